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
``denied: ...``; see [`refuse_approvals`][pride.actors.journal.refuse_approvals]),
so a request line can never run such a tool without a person.

Three modules: this one (the policy, a branch's journal, opening a run),
`pride.actors.journal_run` (one run: its steps answered, run or waiting) and
`pride.actors.journal_records` (what the store holds: steps, unfinished turns).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import attrs

from ..errors import ApprovalPending, Defer, InvalidMessage, UnknownPendingCall, UnknownTurn
from ..llm import iModel
from ..messages import (
    ActionCall,
    Approve,
    Deny,
    Resume,
    WorkCommand,
    new_id,
    structure,
    to_json,
)
from ..messages.codec import parse_json
from ..messages.commands import MODEL_FIELDS
from ..tools import ActionManager
from .journal_records import StepRecord, WaitingTurn, call_id_of, parse_tag, tag_text
from .journal_run import JournalRun

if TYPE_CHECKING:
    from .actor import Actor
    from .mailbox import Reply

__all__ = [
    "BranchJournal",
    "Durability",
    "JournalBackend",
    "JournalRun",
    "WaitingTurn",
    "open_run",
    "refuse_approvals",
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
        steps do not read back can only be abandoned (``problem`` says why).
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
        problem = None
        parsed: WorkCommand | None = None
        if command is None or command == "null":
            problem = detail or "its command could not be journaled"
        else:
            try:
                parsed = structure(parse_json(command), WorkCommand)
            except InvalidMessage as exc:
                problem = f"its journaled command does not read back: {exc}"
            else:
                if isinstance(parsed, Resume):
                    parsed, problem = None, "its journaled command is a Resume"
        records: dict[int, StepRecord] = {}
        for index, text in steps:
            try:
                records[index] = StepRecord.from_text(text)
            except InvalidMessage as exc:
                problem = problem or f"journal step {index} does not read back: {exc}"
        problem = problem or _ambiguous_ids(records)
        if status not in ("running", "suspended"):
            problem = problem or f"unknown journal status {status!r}"
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

    def start(self, reply: Reply, command: WorkCommand, turn_id: UUID) -> JournalRun:
        """A new turn's run."""
        run = JournalRun(self, turn_id, command, reply.tag)
        if self.durable:  # made when its begin is queued: a one-step turn never is
            run.journaled = _journaled_command
        return run

    def resume(self, reply: Reply, command: Resume) -> JournalRun:
        """The run of an unfinished turn a ``Resume`` continues (or abandons).

        Decisions are applied to the turn's pending steps first (and journaled
        with its next commit).

        Raises:
            UnknownTurn: no unfinished turn has ``command.turn_id``.
            UnknownPendingCall: a decision names a call the turn does not wait on
                (nothing is changed).
        """
        waiting = self.waiting.get(command.turn_id)
        if waiting is None:
            raise UnknownTurn(command.turn_id, f"branch {self.branch_name!r}")
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


def open_run(actor: Actor, reply: Reply) -> JournalRun | None:
    """The journal run of the turn ``reply`` starts, or None when the branch keeps
    no journal (called by the turn driver before ``RunStart``).

    Raises:
        UnknownTurn, UnknownPendingCall: a bad ``Resume`` (see `BranchJournal.resume`).
        ApprovalPending: the branch has a turn waiting for approval, and this
            is other work.
    """
    command = reply.command
    journal = actor.journal
    if (
        journal is not None
        and not journal.waiting
        and journal.backend is not None
        and journal.durability.journal
        and not isinstance(command, Resume)
    ):  # every turn of a stored branch with nothing waiting: a new durable run
        run = JournalRun(journal, new_id(), command, reply.tag)  # type: ignore[arg-type]
        run.journaled = _journaled_command  # used when its begin is queued
        run.begin(actor.branch._messages)
        return run
    if journal is None or not (journal.durable or journal.waiting):
        # Nothing to journal durably and nothing waiting: a run only if a call
        # may stop for approval (kept in memory).
        if isinstance(command, Resume):
            raise UnknownTurn(command.turn_id, f"branch {actor.branch.name!r}")
        if not _may_suspend(actor):
            return None
        if journal is None:
            journal = actor.journal = BranchJournal(actor.branch.name)
    if isinstance(command, Resume):
        run = journal.resume(reply, command)
    else:
        journal.check_free()
        run = journal.start(reply, command, new_id())  # type: ignore[arg-type]
    run.begin(actor.branch._messages)
    return run


def refuse_approvals(
    acts: ActionManager, before: Callable[[ActionCall], Awaitable[None]] | None
) -> Callable[[ActionCall], Awaitable[None]]:
    """A ``before_call`` for tool calls served where nothing can wait for a person
    (an ``Act`` outside a turn: it has no turn to suspend): a call of a tool that
    ``requires_approval`` is denied (its outcome says why; it never runs); the
    others pass on to ``before`` (the session's hook). An Act from a request
    line can thus never bypass a person's approval."""

    async def check(call: ActionCall) -> None:
        tool = acts.get(call.function)
        if tool is not None and tool.requires_approval:
            reason = (
                f"{call.function} requires approval, and an Act served outside a turn cannot "
                "wait for a person: ask for it in a turn (the model's call of it suspends the "
                "turn until session.resolve decides)"
            )
            log.warning("refused a direct call of %s: it requires approval", call.function)
            raise Defer(reason)
        if before is not None:
            await before(call)

    return check


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


def _may_suspend(actor: Actor) -> bool:
    """True when a turn of the branch could stop for approval without a store."""
    if actor.branch._actions.needs_approval:
        return True
    return bool(getattr(actor.hooks, "intercepts_tools", False))


# ------------------------------------------------------------------ helpers


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
