"""One run of one turn through the journal: its steps answered, run live, or waiting.

The turn view asks the run for every model call
([`model_step`][pride.actors.journal_run.JournalRun.model_step]) and every batch of
tool calls ([`tool_steps`][pride.actors.journal_run.JournalRun.tool_steps]): a step
the journal holds is answered from it, the others run live and are recorded,
and a call that needs a person's approval is recorded *pending* and stops the
turn with [`ApprovalRequired`][pride.ApprovalRequired]. What is recorded goes to
the store with the run's next commit, before the next step begins. See
`pride.actors.journal` for the whole picture.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

import attrs

from ..errors import ApprovalRequired, Defer, JournalMismatch, TurnAbandoned
from ..llm import ModelResponse
from ..messages import ActionCall, ApprovalRequested, PendingCall, WorkCommand
from ..messages.history import Checkpoint, History
from ..tools import ActionOutcome
from .journal_records import StepRecord, WaitingTurn, step_ids, tag_text, tool_step

if TYPE_CHECKING:
    from .journal import BranchJournal, JournalBackend
    from .view import BranchTurn

__all__ = ["INTERRUPTED", "JournalRun"]


class JournalRun:
    """One run of one turn: its steps so far, and the journal they go to.

    Kept on the turn's state (``TurnState.journal``); the turn view consults
    it for every model and tool call.
    """

    __slots__ = (
        "abandon",
        "announced",
        "begun",
        "checkpoint",
        "command",
        "command_text",
        "history",
        "journal",
        "journaled",
        "next",
        "pending",
        "problem",
        "replies",
        "resumed",
        "steps",
        "suspended",
        "tag",
        "turn_id",
        "unsent",
    )

    def __init__(
        self,
        journal: BranchJournal,
        turn_id: UUID,
        command: WorkCommand | None,
        tag: Any,
        *,
        resumed: bool = False,
    ) -> None:
        self.journal = journal
        self.turn_id = turn_id
        self.command = command
        self.tag = tag
        self.resumed = resumed
        self.steps: dict[int, StepRecord] = {}
        # Live model replies not yet made steps (`_settle`): a turn that ends in the
        # commit that would have journaled them (a one-step turn) never makes one.
        self.replies: list[tuple[int, ModelResponse]] | None = None
        self.next = 0
        self.begun = False  # its begin row is queued (or stored)
        self.unsent: list[tuple[int, str | Callable[[], str]]] = []  # for the next commit
        self.command_text: Callable[[], str] | None = None
        self.problem: str | None = None  # why the command cannot be journaled
        # Makes (command_text, problem) from the command, once its begin is queued.
        self.journaled: Callable[[WorkCommand], tuple[Callable[[], str] | None, str | None]]
        self.journaled = _unjournaled
        self.abandon: str | None = None
        self.pending: list[PendingCall] = []
        self.announced: set[str] = set()
        self.history: History | None = None
        self.checkpoint: Checkpoint | None = None
        self.suspended = False

    def __repr__(self) -> str:
        self._settle()
        return f"<JournalRun of turn {self.turn_id}, {len(self.steps)} steps>"

    @property
    def _stored(self) -> JournalBackend | None:
        journal = self.journal
        if journal.backend is None or not (self.begun or journal.durability.journal):
            return None
        return journal.backend

    # ------------------------------------------------------------ recording

    def record(self, index: int, step: StepRecord) -> None:
        """Keep ``step``; it goes to the store with the next `commit` (before the
        next step begins), so a turn that ends first writes nothing."""
        self.steps[index] = step
        if self._stored is None:
            return
        # A model reply is frozen: its JSON is made when it is committed. A tool's
        # output may be any object, and change: its text is taken now.
        data: str | Callable[[], str] = step.to_text if step.kind == "model" else step.to_text()
        self.unsent.append((index, data))

    def _settle(self) -> None:
        """Make the live model replies kept so far steps (recorded, in order)."""
        replies = self.replies
        if replies is not None:
            self.replies = None
            for index, response in replies:
                self.record(index, StepRecord("model", response))

    @property
    def uncommitted(self) -> bool:
        """Whether a `commit` has anything to do: steps recorded and not yet queued,
        or a begin queued (its rows may still be on their way)."""
        return self.replies is not None or bool(self.unsent) or self.begun

    def _push(self) -> None:
        """Queue the steps not yet in the store (with the turn's begin, the first time).

        A turn whose command cannot be journaled still gets its begin row
        (without the command), so that a restart knows it was lost and says so.
        """
        self._settle()
        backend = self._stored
        if backend is None or not self.unsent:
            return
        name, turn_id = self.journal.branch_name, str(self.turn_id)
        if not self.begun:
            self.begun = True
            if self.command is not None:
                self.command_text, self.problem = self.journaled(self.command)
            backend.journal_begin(
                name, turn_id, self.command_text, tag=tag_text(self.tag), detail=self.problem
            )
        if self.problem is None:
            for index, data in self.unsent:
                backend.journal_step(name, turn_id, index, data)
        self.unsent.clear()

    async def commit(self) -> None:
        """Make every step recorded so far durable (before the next step begins).

        Raises:
            StoreError: the store could not commit.
        """
        self._push()
        backend = self.journal.backend
        if backend is not None and self.begun:
            await backend.flush(self.journal.branch_name)

    # ------------------------------------------------------------ model steps

    async def model_step(self) -> tuple[int, ModelResponse | None]:
        """Number the next model call; return its journaled reply if there is one
        (else everything recorded so far is committed, and the call runs live).

        Raises:
            ApprovalRequired: calls of this turn wait for approval.
            JournalMismatch: the journal holds a tool step here.
            StoreError: the commit failed.
        """
        index, replayed = self.take_model_step()
        if replayed is None and self.uncommitted:
            await self.commit()
        return index, replayed

    def take_model_step(self) -> tuple[int, ModelResponse | None]:
        """`model_step` without its commit (synchronous): number the next model
        call and return its journaled reply, if there is one. Unless a reply came
        back, the caller awaits `commit` (when `uncommitted`) before the live call.

        Raises:
            ApprovalRequired: calls of this turn wait for approval.
            JournalMismatch: the journal holds a tool step here.
        """
        if self.pending:
            self._check_pending()
        index = self.next
        self.next = index + 1
        if not self.steps:  # a new turn's (every live step is numbered past the last)
            return index, None
        step = self.steps.get(index)
        if step is None:
            return index, None
        if step.kind != "model" or step.response is None:
            raise self._mismatch(index, "a model call", step)
        return index, step.response

    def model_replied(self, index: int, response: ModelResponse) -> None:
        """Record a live model call's reply (usage included): kept as it is, made
        a step only if the turn goes on past it (or stops for approval)."""
        replies = self.replies
        if replies is None:
            self.replies = [(index, response)]
        else:
            replies.append((index, response))

    # ------------------------------------------------------------ tool steps

    async def tool_steps(
        self,
        view: BranchTurn,
        calls: Sequence[ActionCall],
        execute: Callable[..., Awaitable[list[ActionOutcome]]],
        call_ids: Sequence[str] | None,
    ) -> list[ActionOutcome]:
        """Answer a batch of tool calls: from the journal, by running them, or by
        waiting for approval (see the module docstring).

        ``execute(calls, before=..., after=..., call_ids=...)`` runs the live
        ones through the turn view.

        Raises:
            ApprovalRequired: a call needs approval (after the others ran).
            JournalMismatch: the journal holds other steps here.
            StoreError: a commit failed (no tool ran after it).
        """
        self._check_pending()
        self._settle()
        base = self.next
        self.next += len(calls)
        ids = step_ids(self.steps, base, calls)
        outcomes: list[ActionOutcome | None] = [None] * len(calls)
        live: list[int] = []
        approved: set[int] = set()
        waiting: list[tuple[int, str]] = []  # (position, reason)
        policy = self.journal.durability.interrupted
        for position, call in enumerate(calls):
            index = base + position
            step = self.steps.get(index)
            tool = view.acts.get(call.function)
            if step is None:
                if tool is not None and tool.requires_approval:
                    waiting.append((position, f"{call.function} requires approval"))
                else:
                    live.append(position)
                continue
            if step.kind != "tool" or step.function != call.function:
                raise self._mismatch(index, f"a call of {call.function!r}", step)
            if step.state in ("approved", "pending") and dict(step.arguments) != dict(
                call.arguments
            ):  # a person decides on what was shown, and on nothing else
                raise self._mismatch(index, f"a call of {call.function!r} (other arguments)", step)
            if step.state == "done":
                view.replayed_tool_call()
                outcomes[position] = step.outcome(call)
            elif step.state == "approved":
                live.append(position)
                approved.add(position)
            elif step.state == "pending":
                waiting.append((position, step.reason or "waits for approval"))
            elif tool is not None and tool.idempotent:  # started, and safe to run again
                live.append(position)
            elif policy == "approve":
                waiting.append((position, INTERRUPTED))
            else:
                self.record(
                    index,
                    attrs.evolve(step, state="done", error=f"InterruptedCall: {INTERRUPTED}"),
                )
                outcomes[position] = self.steps[index].outcome(call)
        if live:
            done = await self._run_live(
                view,
                calls,
                base=base,
                live=live,
                approved=approved,
                waiting=waiting,
                execute=execute,
                call_ids=call_ids,
                step_ids=ids,
            )
            for position, outcome in done.items():
                outcomes[position] = outcome
        if waiting:
            await self._wait_for_approval(view, calls, base, waiting, ids)
        return [outcome for outcome in outcomes if outcome is not None]

    async def _run_live(
        self,
        view: BranchTurn,
        calls: Sequence[ActionCall],
        *,
        base: int,
        live: list[int],
        approved: set[int],
        waiting: list[tuple[int, str]],
        execute: Callable[..., Awaitable[list[ActionOutcome]]],
        call_ids: Sequence[str] | None,
        step_ids: Sequence[str],
    ) -> dict[int, ActionOutcome]:
        deferred: dict[int, str] = {}
        failure: list[BaseException] = []
        positions = {id(calls[position]): position for position in live}

        async def before(call: ActionCall) -> None:
            # A call's before and after run in one task (its own, when the batch is
            # concurrent), so the position travels from one to the other in a
            # context variable. (A call to an unknown tool gets no before.)
            position = positions[id(call)]
            _POSITION.set(position)
            await journaled()  # the steps before this one are durable before it begins
            try:
                await view.before_tool_call(call)
            except Defer as exc:
                if position not in approved:  # approved once: not deferred again
                    deferred[position] = exc.reason
                    raise
            tool = view.acts.get(call.function)
            if tool is not None and not tool.idempotent:
                # Durable before it runs: after a crash, a started call is never
                # run again silently.
                step = tool_step(call, "started", position in approved, step_ids[position])
                self.record(base + position, step)
                await journaled()

        async def journaled() -> None:
            try:
                await self.commit()
            except BaseException as exc:
                failure.append(exc)
                raise

        async def after(outcome: ActionOutcome) -> None:
            position = _POSITION.get()
            _POSITION.set(None)
            if position is None or position in deferred or failure:
                # Not run (unknown tool: answered the same way again), deferred,
                # or the journal failed (the turn fails).
                if position is None:
                    await view.after_tool_call(outcome)
                return
            step = tool_step(calls[position], "done", position in approved, step_ids[position])
            self.record(
                base + position, attrs.evolve(step, output=outcome.output, error=outcome.error)
            )
            await view.after_tool_call(outcome)

        ids = [call_ids[position] for position in live] if call_ids is not None else None
        chosen = [calls[position] for position in live]
        results = await execute(chosen, before=before, after=after, call_ids=ids)
        if failure:
            raise failure[0]
        outcomes: dict[int, ActionOutcome] = {}
        for position, outcome in zip(live, results, strict=True):
            if position in deferred:
                waiting.append((position, deferred[position]))
            else:
                outcomes[position] = outcome
        return outcomes

    async def _wait_for_approval(
        self,
        view: BranchTurn,
        calls: Sequence[ActionCall],
        base: int,
        waiting: list[tuple[int, str]],
        ids: Sequence[str],
    ) -> None:
        for position, reason in sorted(waiting):
            index = base + position
            call = calls[position]
            step = self.steps.get(index)
            if step is None or step.state != "pending":
                step = tool_step(call, "pending", False, ids[position])
                self.record(index, attrs.evolve(step, reason=reason))
            pending = PendingCall(ids[position], call.function, dict(call.arguments))
            self.pending.append(pending)
            if pending.call_id not in self.announced:
                self.announced.add(pending.call_id)
                view.signal(
                    ApprovalRequested(
                        turn_id=self.turn_id,
                        call_id=pending.call_id,
                        function=call.function,
                        arguments=dict(call.arguments),
                        reason=reason,
                    )
                )
        await self.commit()
        self._check_pending()

    # ------------------------------------------------------------ the turn's end

    def _check_pending(self) -> None:
        if self.pending:
            raise ApprovalRequired(self.turn_id, self.pending, self.journal.branch_name)

    def _mismatch(self, index: int, wanted: str, step: StepRecord) -> JournalMismatch:
        held = "a model call" if step.kind == "model" else f"a call of {step.function!r}"
        return JournalMismatch(
            f"turn {self.turn_id} of branch {self.journal.branch_name!r}: step {index} is "
            f"{held} in the journal, but the resumed operation made {wanted} there; the turn "
            "is failed rather than run anything twice"
        )

    def abandoned(self) -> TurnAbandoned:
        """The error an abandoned run ends with."""
        return TurnAbandoned(self.turn_id, self.abandon or "abandoned")

    def end(self, failure: BaseException | None, *, can_suspend: bool = True) -> bool:
        """The turn's run is over (called by the driver before the turn's barriers).

        A run that has calls waiting for approval suspends (unless
        ``can_suspend`` is False: a cancelled or crashed turn): the conversation
        returns to where it was when the turn began (the checkpoint), the turn
        waits in the journal (committed with the turn's barrier), and True is
        returned. Any other run is finished: its journal entry is deleted (in
        the same commit as the turn's messages).
        """
        history = self.history
        if not self.pending and not self.begun:  # every one-step turn: nothing to end
            if history is not None and self.checkpoint is not None:
                history.release(self.checkpoint)
            return False
        journal = self.journal
        backend = journal.backend
        if can_suspend and self.pending and self.command is not None and self.abandon is None:
            name, turn_id = journal.branch_name, str(self.turn_id)
            self._settle()
            if history is not None and self.checkpoint is not None:
                history.rollback(self.checkpoint)
            self._push()  # all of it, so that it waits across a restart too
            journal.waiting[self.turn_id] = WaitingTurn(
                self.turn_id,
                self.command,
                "suspended",
                dict(self.steps),
                self.tag,
                stored=self.begun,
                announced=set(self.announced),
            )
            if backend is not None and self.begun:
                backend.journal_status(name, turn_id, "suspended", detail="waits for approval")
            self.suspended = True
            return True
        if history is not None and self.checkpoint is not None:
            history.release(self.checkpoint)
        if backend is not None and self.begun:
            backend.journal_end(journal.branch_name, str(self.turn_id))
        return False

    def begin(self, history: History) -> None:
        """The turn starts over ``history``: remember it, to roll back a suspension."""
        self.history = history
        self.checkpoint = history.checkpoint()


def _unjournaled(command: WorkCommand) -> tuple[Callable[[], str] | None, str | None]:
    return None, None  # a run kept in memory only: its begin is never queued


_POSITION: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "pride_journal_call", default=None
)

INTERRUPTED = (
    "this call started before the process stopped and did not report a result; it may or "
    "may not have taken effect, and it was not run again (its tool is not idempotent)"
)
