"""The turn journal as a branch's actor keeps it: steps recorded, answered on resume.

A turn's operation makes **steps**: model calls and tool calls, every one of
them through the turn view ([`BranchTurn.call_model`][pride.actors.view.BranchTurn.call_model],
[`BranchTurn.call_tools`][pride.actors.view.BranchTurn.call_tools]). The journal numbers
them in the order the operation makes them (a batch of tool calls takes one
number per call, in call order) and records each one as it completes: the
model's reply with its usage, the tool's result, a person's approval
decision. A step is committed to the branch's store before the next step
begins (the store's group commit: one fsync for every branch's rows).

When a turn runs again (a [`Resume`][pride.Resume]: approved after it
stopped for approval, or restored after a crash), its command's operation
runs from the start over the conversation as it was before the turn, and
every step the journal holds is answered from it: no model call repeated,
no tool run twice. The first step the journal does not hold runs live, and
from there the turn goes on as any other. An operation is replayed exactly
when it makes the same steps in the same order given the same answers,
which pride's operations do; a step that differs from its record fails the
turn with [`JournalMismatch`][pride.JournalMismatch] rather than run anything twice.

Tools: a call to a tool that is not ``idempotent`` (the default) is marked
*started* (committed) before it runs, so a crash while it runs is known
after the restart: the call is never run a second time silently; by the
branch's `Durability.interrupted` policy the model is told it was
interrupted (``"error"``), or a person is asked (``"approve"``). A tool with
``requires_approval`` (or a call a ``before_tool_call`` hook defers with
[`Defer`][pride.Defer]) does not run when the model calls it: the call is
recorded *pending*, one [`ApprovalRequested`][pride.ApprovalRequested] is
emitted per call, and the turn stops with
[`ApprovalRequired`][pride.ApprovalRequired]. A stopped (suspended) turn
leaves the conversation as it was before it began (its messages are
recorded again when it resumes); the branch takes no other work until it is
resolved ([`ApprovalPending`][pride.ApprovalPending]), so the conversation never holds a
tool call without its answer.

Without a store the journal lives in memory, and only on branches that can
suspend (a tool with ``requires_approval``, or a session hook on
``before_tool_call``); other branches keep none and pay nothing.

An ``Act`` served on its own (not inside a turn) has no turn to suspend: a
call in it of a tool that ``requires_approval`` is refused (its response says
``denied: ...``; see [`refuse_approvals`][pride.actors.journaling.refuse_approvals]),
so a request line can never run such a tool without a person.

One module, over 600 lines, because it is one idea: the policy
(`Durability`), a branch's journal (`BranchJournal`: its unfinished turns,
adopted from the store after a restart) and one run of one turn through it
(`JournalRun`: its steps answered, run live or waiting) are each other's
halves: a run is opened by its branch's journal, answers from and records
into it, and hands back to it a turn that stops. What the store holds of
them (a step as JSON, an unfinished turn) is `pride.durable.records`; what
the actor runtime needs of them is `pride.actors.journaling`'s protocols.
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import attrs

from ..errors import (
    ApprovalPending,
    ApprovalRequired,
    Defer,
    InvalidMessage,
    JournalMismatch,
    StoreError,
    TurnAbandoned,
    UnknownPendingCall,
    UnknownTurn,
)
from ..llm import ModelResponse, iModel
from ..messages import (
    ActionCall,
    ApprovalRequested,
    Approve,
    Deny,
    PendingCall,
    Resume,
    WorkCommand,
    structure,
    to_json,
)
from ..messages.codec import parse_json
from ..messages.commands import MODEL_FIELDS
from ..messages.history import Checkpoint, History
from ..store.journal import FAILED, TAG_BYTES
from ..tools import ActionOutcome
from .records import (
    StepRecord,
    WaitingTurn,
    call_id_of,
    parse_tag,
    step_ids,
    tag_text,
    tool_step,
)

if TYPE_CHECKING:
    from ..actors.journaling import Envelope, ToolStepView

__all__ = [
    "INTERRUPTED",
    "BranchJournal",
    "Durability",
    "JournalBackend",
    "JournalRun",
    "StoredTurnRow",
    "WaitingTurn",
]

log = logging.getLogger("pride.journal")

ResumePolicy = Literal["resume", "abandon"]
InterruptedPolicy = Literal["error", "approve"]


@attrs.frozen
class Durability:
    """How a branch's turns are journaled and what happens to them after a restart.

    Give it to ``Session(durability=...)`` (every member) or
    ``session.spawn(branch, durability=...)`` (one branch). See docs/durability.md.

    Attributes:
        journal: with a store, journal each turn's steps so that a crash
            mid-turn can be resumed (default). Off, a store keeps whole turns
            only (and approvals still work within the process).
        resume: what a restored branch does with a turn a crash interrupted:
            ``"resume"`` (default) runs it again from its journal, answering
            its completed steps from it, then goes on live; ``"abandon"``
            ends it with [`TurnAbandoned`][pride.TurnAbandoned].
        interrupted: what a resumed turn does with a call to a tool that is
            not idempotent which started and did not finish before the
            crash: ``"error"`` (default) gives the model an error result
            saying so; ``"approve"`` asks a person (the turn stops with
            [`ApprovalRequired`][pride.ApprovalRequired]; approved, it runs again).
    """

    journal: bool = True
    resume: ResumePolicy = attrs.field(default="resume")
    interrupted: InterruptedPolicy = attrs.field(default="error")

    @resume.validator
    def _check_resume(self, _: Any, value: Any) -> None:
        if value not in ("resume", "abandon"):
            raise ValueError(f"resume must be 'resume' or 'abandon', got {value!r}")

    @interrupted.validator
    def _check_interrupted(self, _: Any, value: Any) -> None:
        if value not in ("error", "approve"):
            raise ValueError(f"interrupted must be 'error' or 'approve', got {value!r}")


class JournalBackend(Protocol):
    """Where journal rows go (a [`BranchStore`][pride.store.BranchStore] is one).

    Writes are queued and made durable by ``flush``; JSON may be given as a
    function, called when the row is committed.
    """

    def journal_begin(
        self,
        branch_name: str,
        turn_id: str,
        command: str | Callable[[], str] | None,
        *,
        tag: str | None = None,
        detail: str | None = None,
    ) -> None: ...

    def journal_step(
        self, branch_name: str, turn_id: str, step: int, data: str | Callable[[], str]
    ) -> None: ...

    def journal_status(
        self,
        branch_name: str,
        turn_id: str,
        status: str,
        *,
        detail: str | None = None,
        tag: str | None = None,
    ) -> None: ...

    def journal_end(self, branch_name: str, turn_id: str) -> None: ...

    async def flush(self, branch_name: str | None = None) -> None: ...


class StoredTurnRow(Protocol):
    """An unfinished turn as a store reads it back ([`StoredTurn`][pride.store.StoredTurn])."""

    @property
    def turn_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def command(self) -> str | None: ...
    @property
    def tag(self) -> str | None: ...
    @property
    def detail(self) -> str | None: ...
    @property
    def steps(self) -> Sequence[tuple[int, str]]: ...
    @property
    def problem(self) -> str | None:
        """Why it cannot be replayed as stored (a row of it over the store's bound), or None."""
        ...


class BranchJournal:
    """A branch's journal: its backend, its policy and its unfinished turns.

    Kept on the branch's actor (``actor.journal``); a session with a store
    sets it up when it restores the branch.
    """

    __slots__ = ("backend", "branch_name", "durability", "waiting")

    def __init__(
        self,
        branch_name: str,
        backend: JournalBackend | None = None,
        durability: Durability | None = None,
    ) -> None:
        self.branch_name = branch_name
        self.backend = backend
        self.durability = durability if durability is not None else Durability()
        self.waiting: dict[UUID, WaitingTurn] = {}
        """Unfinished turns by id."""

    def __repr__(self) -> str:
        where = "stored" if self.backend is not None else "in memory"
        return f"<BranchJournal of {self.branch_name!r} {where}, {len(self.waiting)} waiting>"

    @property
    def durable(self) -> bool:
        """True when new turns journal their steps in a store."""
        return self.backend is not None and self.durability.journal

    def suspended(self) -> WaitingTurn | None:
        """The turn waiting for approval, if one is."""
        if not self.waiting:  # every turn asks: the common answer without a generator
            return None
        return next((w for w in self.waiting.values() if w.status == "suspended"), None)

    def check_free(self) -> None:
        """Refuse other work while a turn waits for approval.

        Raises:
            ApprovalPending: naming the waiting turn.
        """
        waiting = self.suspended()
        if waiting is not None:
            raise ApprovalPending(waiting.turn_id, waiting.pending(), self.branch_name)

    def interrupted(self) -> list[WaitingTurn]:
        """Turns a crash interrupted (to resume or abandon), oldest first."""
        return [w for w in self.waiting.values() if w.status == "running"]

    def adopt(self, stored: StoredTurnRow) -> WaitingTurn | None:
        """Take over an unfinished turn read from the store (after a restart).

        Everything is checked (a file is not trusted): a turn whose command or
        steps do not read back, that the store could not read (a row over its
        bound: ``stored.problem``), that failed when the store refused a row of
        it (status ``"failed"``, ``detail`` saying which), or that is marked
        waiting for approval with no call of it pending (no decision could
        resume it) can only be abandoned (``problem`` says why), and is adopted
        as interrupted, so that it is, even one that waited for approval.
        Returns None for a row without a valid turn id (logged).
        """
        turn_id, status, command = stored.turn_id, stored.status, stored.command
        tag, detail, steps = stored.tag, stored.detail, stored.steps
        try:
            identity = UUID(turn_id)
        except ValueError:
            log.error(
                "journal of %r: a turn row has no valid id (%r); ignored", self.branch_name, turn_id
            )
            return None
        problem = stored.problem  # a row of it too large to be read
        parsed: WorkCommand | None = None
        if problem is None:  # else it was not read: nothing of it is parsed
            problem, parsed = _journaled(command, detail)
        records: dict[int, StepRecord] = {}
        for index, text in steps:
            try:
                records[index] = StepRecord.from_text(text)
            except InvalidMessage as exc:
                problem = problem or f"journal step {index} does not read back: {exc}"
        problem = problem or _ambiguous_ids(records)
        if status == FAILED:  # a row of it was refused: it failed in its process
            problem = detail or "it failed when a row of its journal was refused"
        elif status == "suspended":
            # pride suspends a turn only with its pending calls journaled: without one,
            # no decision could resume it, and the branch would refuse all work for it.
            if not any(s.kind == "tool" and s.state == "pending" for s in records.values()):
                problem = problem or (
                    "it is marked waiting for approval, but its journal holds no call "
                    "waiting for a decision"
                )
        elif status != "running":
            problem = problem or f"unknown journal status {status!r}"
        if problem is not None:
            # It can only be abandoned, whatever it waited for: as an interrupted
            # turn it is, once its branch runs (`Persistence.recover`), instead of
            # waiting for a decision that could do nothing else.
            status = "running"
        waiting = WaitingTurn(
            identity,
            parsed if problem is None else None,
            status,
            records,
            parse_tag(tag),
            problem,
            stored=True,
        )
        waiting.announced.update(call.call_id for call in waiting.pending())
        self.waiting[identity] = waiting
        return waiting

    # ------------------------------------------------------------ runs

    @property
    def active(self) -> bool:
        """Every turn needs a run: new turns are journaled in a store, or a turn waits."""
        return bool(self.waiting) or (self.backend is not None and self.durability.journal)

    def run(self, reply: Envelope, history: History, turn_id: UUID) -> JournalRun:
        """The run of the turn ``reply`` starts (or continues: a ``Resume``) over
        ``history`` (the conversation as it is before the turn); the actor's
        `pride.actors.journaling.open_run` asks for it before ``RunStart``. A new
        turn's id is ``turn_id`` (made by the driver); a continued one keeps its own.

        Raises:
            UnknownTurn, UnknownPendingCall: a bad ``Resume`` (see `resume`).
            ApprovalPending: a turn waits for approval, and this is other work.
        """
        command = reply.command
        if isinstance(command, Resume):
            run = self.resume(reply, command)
        else:
            self.check_free()
            run = self.start(reply, command, turn_id)  # type: ignore[arg-type]
        run.begin(history)
        return run

    def start(self, reply: Envelope, command: WorkCommand, turn_id: UUID) -> JournalRun:
        """A new turn's run."""
        run = JournalRun(self, turn_id, command, reply.tag)
        if self.durable:  # made when its begin is queued: a one-step turn never is
            run.journaled = _journaled_command
        return run

    def resume(self, reply: Envelope, command: Resume) -> JournalRun:
        """The run of an unfinished turn a ``Resume`` continues (or abandons).

        Decisions are applied to the turn's pending steps first (and journaled
        with its next commit).

        Raises:
            UnknownTurn: no unfinished turn has ``command.turn_id``.
            UnknownPendingCall: a decision names a call the turn does not wait on
                (nothing is changed).
            InvalidMessage: the ``Resume``'s tag (a request id), which a stored turn
                keeps, is over `TAG_BYTES` as JSON (nothing is changed): the room
                every journal entry keeps for it (`pride.store.journal.status_room`).
        """
        waiting = self.waiting.get(command.turn_id)
        if waiting is None:
            raise UnknownTurn(command.turn_id, f"branch {self.branch_name!r}")
        if self.backend is not None and waiting.stored and reply.tag not in (None, waiting.tag):
            _check_tag(tag_text(reply.tag))  # its own tag (a restart's Resume) is there already
        by_id = {
            call_id_of(index, step.call_id): index
            for index, step in waiting.steps.items()
            if step.kind == "tool" and step.state == "pending"
        }
        unknown = [call_id for call_id in command.decisions if call_id not in by_id]
        if unknown:
            raise UnknownPendingCall(command.turn_id, unknown, list(by_id))
        del self.waiting[command.turn_id]
        tag = reply.tag if reply.tag is not None else waiting.tag
        run = JournalRun(self, waiting.turn_id, waiting.command, tag, resumed=True)
        run.steps = dict(waiting.steps)
        run.announced = set(waiting.announced)
        run.begun = waiting.stored
        run.abandon = command.abandon or (None if waiting.command is not None else waiting.problem)
        if self.backend is not None and run.begun:
            self.backend.journal_status(
                self.branch_name,
                str(run.turn_id),
                "running",
                tag=tag_text(reply.tag) if reply.tag is not None else None,
            )
        for call_id, decision in command.decisions.items():
            index = by_id[call_id]
            step = run.steps[index]
            if isinstance(decision, Approve):
                run.record(index, attrs.evolve(step, state="approved", approved=True))
            elif isinstance(decision, Deny):
                run.record(
                    index, attrs.evolve(step, state="done", error=f"denied: {decision.reason}")
                )
        return run


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
        "unsuspendable",
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
        # The commit that would have suspended it failed: the turn fails (`_check_pending`).
        self.unsuspendable: StoreError | None = None

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

    def take_model_step(self) -> tuple[int, ModelResponse | None]:
        """Number the next model call and return its journaled reply, if there is
        one. Unless a reply came back, the caller awaits `commit` (when
        `uncommitted`) before the live call.

        Raises:
            ApprovalRequired: calls of this turn wait for approval.
            JournalMismatch: the journal holds a tool step here.
            StoreError: the commit that would have suspended this turn failed.
        """
        if self.pending or self.unsuspendable is not None:
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
        view: ToolStepView,
        calls: Sequence[ActionCall],
        execute: Callable[..., Awaitable[list[ActionOutcome]]],
        call_ids: Sequence[str] | None,
    ) -> list[ActionOutcome]:
        """Answer a batch of tool calls: from the journal, by running them, or by
        waiting for approval (see the module docstring).

        ``execute(calls, before=..., after=..., call_ids=...)`` runs the live
        ones through the turn view.

        Raises:
            ApprovalRequired: a call needs approval (after the others ran), once
                its pending step is committed.
            JournalMismatch: the journal holds other steps here.
            StoreError: a commit failed (no tool ran after it), that of the
                pending steps included: a turn whose suspension its store refused
                fails, and waits for nobody's approval.
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
        # The journal goes on past this batch: each of its calls of a tool that is not
        # idempotent has a step (its start is journaled before it runs, and the turn
        # goes on only once every call of the batch ended). One without is a lost row.
        past = bool(self.steps) and max(self.steps) >= base + len(calls)
        for position, call in enumerate(calls):
            index = base + position
            step = self.steps.get(index)
            tool = view.acts.get(call.function)
            if step is None:
                if tool is not None and tool.requires_approval:
                    waiting.append((position, f"{call.function} requires approval"))
                elif past and tool is not None and not tool.idempotent:
                    raise JournalMismatch(
                        f"turn {self.turn_id} of branch {self.journal.branch_name!r}: step "
                        f"{index}, a call of {call.function!r}, is missing from the journal, "
                        "which holds later steps; the call may have run, so the turn is "
                        "failed rather than run it again"
                    )
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
        view: ToolStepView,
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
            refuse_once_failed()
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
            refuse_once_failed()

        def refuse_once_failed() -> None:
            # A commit of this turn failed (for an earlier call of the batch): the turn
            # fails with it, so no later call runs, even if the store has recovered
            # since (its caller, told the turn failed, would have it run twice).
            if failure:
                raise StoreError(
                    f"not run: a commit of the journal of turn {self.turn_id} failed before it"
                )

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
        view: ToolStepView,
        calls: Sequence[ActionCall],
        base: int,
        waiting: list[tuple[int, str]],
        ids: Sequence[str],
    ) -> None:
        waits: list[tuple[PendingCall, ActionCall, str]] = []
        for position, reason in sorted(waiting):
            index = base + position
            call = calls[position]
            step = self.steps.get(index)
            if step is None or step.state != "pending":
                step = tool_step(call, "pending", False, ids[position])
                self.record(index, attrs.evolve(step, reason=reason))
            pending = PendingCall(ids[position], call.function, dict(call.arguments))
            waits.append((pending, call, reason))
        try:
            await self.commit()
        except StoreError as exc:
            # A suspension its store refused (a row over max_row_bytes, the disk) would
            # not survive a restart: the turn fails here, and nobody is asked to approve.
            self.unsuspendable = exc
            raise
        for pending, call, reason in waits:
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
        self._check_pending()

    # ------------------------------------------------------------ the turn's end

    def _check_pending(self) -> None:
        if self.unsuspendable is not None:  # an operation that went on after it: not so
            raise StoreError(
                f"turn {self.turn_id} of branch {self.journal.branch_name!r} failed: the "
                f"commit that would have suspended it for approval failed "
                f"({self.unsuspendable})"
            )
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


# ------------------------------------------------------------------ helpers


def _journaled(command: str | None, detail: str | None) -> tuple[str | None, WorkCommand | None]:
    """``(problem, command)``: the journaled command of a stored turn, parsed, or why not."""
    if command is None or command == "null":
        return detail or "its command could not be journaled", None
    try:
        parsed: WorkCommand = structure(parse_json(command), WorkCommand)
    except InvalidMessage as exc:
        return f"its journaled command does not read back: {exc}", None
    if isinstance(parsed, Resume):
        return "its journaled command is a Resume", None
    return None, parsed


def _check_tag(text: str | None) -> None:
    """Refuse a tag whose JSON ``text`` is over `TAG_BYTES`, naming its size (not it).

    Raises:
        InvalidMessage: ``text`` is over `TAG_BYTES` bytes as UTF-8.
    """
    if text is None or len(text) * 4 <= TAG_BYTES:
        return
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > TAG_BYTES:
        raise InvalidMessage(
            [
                (
                    "tag",
                    f"{size:,} bytes as JSON, more than the {TAG_BYTES:,} a journaled turn "
                    "keeps (a Resume's request id is kept with its turn): use a shorter id",
                )
            ]
        )


def _ambiguous_ids(steps: Mapping[int, StepRecord]) -> str | None:
    """Why a journal read back cannot be resumed safely, if two of its calls share an id.

    Pride gives every call of a turn an id of its own (issue 36): a decision
    names exactly one call. A journal holding two calls under one id (altered,
    or written before that rule) could have a decision run a call nobody was
    shown, so its turn can only be abandoned.
    """
    model_ids: set[str] = set()
    waiting: set[str] = set()
    for index, step in sorted(steps.items()):
        if step.kind == "model" and step.response is not None:
            for call in step.response.tool_calls:
                if call.id in model_ids:
                    return f"its journal holds two tool calls under the id {call.id[:100]!r}"
                model_ids.add(call.id)
        elif step.state in ("pending", "approved", "started"):
            call_id = call_id_of(index, step.call_id)
            if call_id in waiting:
                return f"its journal holds two calls waiting under the id {call_id[:100]!r}"
            waiting.add(call_id)
    return None


def _journaled_command(command: WorkCommand) -> tuple[Callable[[], str] | None, str | None]:
    """``(json_function, None)`` for a command the journal can hold, else
    ``(None, why_not)``. A model given as an ``iModel`` is journaled by its
    name (a restored branch offers it again; a configuration never travels)."""
    changes: dict[str, Any] = {}
    cls: type = type(command)
    for name in _live_fields(cls):
        value = getattr(command, name)
        if value is None:
            continue
        if name == "response_format":
            if isinstance(value, Mapping):
                continue
            return None, (
                f"its response_format {getattr(value, '__name__', value)!r} is a class, which "
                "cannot be journaled (a JSON schema dict can)"
            )
        if isinstance(value, iModel):
            changes[name] = f"{value.provider}/{value.model}"
        elif not isinstance(value, str):
            return None, f"its {name} is a model configuration (journal a model by name)"
    journaled = attrs.evolve(command, **changes) if changes else command

    def text() -> str:
        try:
            return to_json(journaled)
        except InvalidMessage as exc:
            log.warning("journal: the command of a turn cannot be journaled: %s", exc)
            return "null"

    return text, None


@functools.cache
def _live_fields(cls: type) -> tuple[str, ...]:
    """The fields of a command class that may hold a live object in process."""
    return tuple(
        field.name
        for field in attrs.fields(cls)
        if field.name in MODEL_FIELDS or field.name == "response_format"
    )
