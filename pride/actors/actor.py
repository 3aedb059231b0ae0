"""The branch actor: its runtime state, and what it needs of the branch it serves.

One actor task per branch takes one mailbox item at a time, so turns of a
branch serialise by mailbox order (the mailbox is where an asyncio design
would hold a per-branch lock). Everything the actor tracks lives in one
`Actor` per branch (``branch.actor``); the branch itself holds the
conversation. The loop that serves the mailbox is `pride.actors.loop`.

The reference points one way, from the branch to its actor: the runtime is
handed the branch wherever it needs it, so a stopped branch and its actor
are freed as soon as nothing else holds the branch (a back-reference made
the pair a cycle, kept with the whole conversation until a full collection).

The runtime sits below the classes it serves, so this module declares what it
needs of them instead of importing them: `ServedBranch` (what the runtime
reads of its branch; a `pride.Branch` is one), `SignalSink` and `HookSink`
(a session's observer and hook bus, as an ``Attach`` brings them),
`CommitHandover` and `HandedTurn` (a store's commit taking a finished turn's
end off the actor's hands; `pride.durable.commit.CommitBarrier` and
`pride.actors.ending.TurnEnd` are the ones pride has).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, runtime_checkable
from uuid import UUID

import attrs
import trio

from ..budget.accounts import Account
from ..errors import BranchClosed, BranchNotRunning
from ..messages import PriorityCommand
from .mailbox import Mailbox, MailboxStatistics
from .reply import Reply
from .target import withdraw_live

if TYPE_CHECKING:
    from ..context import CapabilityGrant, ContextProviderRegistry
    from ..llm import iModel
    from ..memory import MemoryStore
    from ..messages import Budget, RoledMessage, Signal, System, Usage
    from ..messages.history import History
    from ..operations.registry import OperationManager
    from ..tools import ActionManager
    from .journaling import BranchRecord
    from .logs import DataLogger
    from .turn import LoopControl, TurnState

__all__ = [
    "Actor",
    "CommitHandover",
    "HandedTurn",
    "HookSink",
    "Identified",
    "ServedBranch",
    "SignalSink",
    "StopReason",
    "Suspend",
]

log = logging.getLogger("pride.actor")

StopReason = Literal["normal", "shutdown", "suspend"]

TurnBarrier = Callable[["TurnState | None"], Awaitable[None]]
"""Awaited at the end of every turn (with its state) and ``Act`` (with None),
before its terminal signal and its reply (a store's commit)."""


class ServedBranch(Protocol):
    """What the actor runtime reads of the branch it serves (a `pride.Branch` is one).

    The conversation's identity and managers, its models and budget, and the
    one door into its history (`add_message`). The actor's own state is
    `actor`; nothing here is the runtime's to replace.
    """

    @property
    def id(self) -> UUID: ...

    @property
    def id_str(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def user(self) -> str | None: ...

    @property
    def owner_id(self) -> UUID | None: ...

    @property
    def mailbox_size(self) -> int: ...

    @property
    def budget(self) -> Budget | None: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def system(self) -> System | None: ...

    @property
    def messages(self) -> History: ...

    @property
    def acts(self) -> ActionManager: ...

    @property
    def logs(self) -> DataLogger: ...

    @property
    def operations(self) -> OperationManager: ...

    @property
    def chat_model(self) -> iModel: ...

    @property
    def parse_model(self) -> iModel: ...

    @property
    def has_providers(self) -> bool: ...

    @property
    def providers(self) -> ContextProviderRegistry: ...

    @property
    def capabilities(self) -> CapabilityGrant | None: ...

    @property
    def actor(self) -> Actor: ...

    def add_message(self, message: RoledMessage) -> RoledMessage: ...

    def poll_control(self, *, turn_id: UUID | None = None) -> LoopControl | None: ...

    def offer_memory(self, store: MemoryStore) -> None: ...


class Identified(Protocol):
    """The branch an actor's own methods act for (a `ServedBranch` is one): named
    in their errors, withdrawn by its id from the branches live in the process."""

    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...


class SignalSink(Protocol):
    """What a branch needs of an observer (a session attaches a real one).

    ``dispatch`` runs synchronous subscribers at once (isolating their
    failures) and returns an awaitable for the asynchronous ones, or None.
    A sink may also have ``wants(kind) -> bool`` (the session's observer has):
    False says no subscriber would see a signal of that class, and the branch
    then does not build one (`Actor.wants`).
    """

    def dispatch(self, signal: Signal) -> Any: ...


class HookSink(Protocol):
    """What a branch needs of a session's hook bus.

    ``emit(point, payload)`` returns None or an awaitable. For blocking points
    (``before_tool_call``) an exception denies the action; other points
    isolate handler failures themselves. A bus may also have an ``active``
    attribute (a session's `HookBus` has): False says no handler would run,
    and the branch then builds no payload.
    """

    def emit(self, point: str, payload: Mapping[str, Any]) -> Any: ...


class HandedTurn(Protocol):
    """A finished turn's end, as a `CommitHandover` holds it until its commit is
    durable (`pride.actors.ending.TurnEnd` is the one the driver hands over)."""

    @property
    def reply(self) -> Reply: ...

    @property
    def watched(self) -> bool:
        """Whether a subscriber may see its terminal (then it is ``answering``)."""
        ...

    @property
    def state(self) -> TurnState | None:
        """The turn's state, while a subscriber or a trace may still need it."""
        ...

    context: contextvars.Context | None
    """The turn's context, for its terminal's subscribers (set at the hand-over)."""

    def __call__(self, failure: Exception | None) -> None:
        """End the turn: ``failure`` is its commit's, None once it is durable."""
        ...

    def uncommitted(self, failure: Exception) -> None:
        """Its commit could not be staged: the turn fails with ``failure``."""
        ...

    async def wait(self) -> None:
        """Return once its terminal's subscribers ran (the loop's next item waits)."""
        ...


@runtime_checkable
class CommitHandover(Protocol):
    """A turn barrier that can take a finished turn off the actor's hands: it ends
    the turn (or ``Act``) once its commit is durable, and the actor serves its
    next item meanwhile (`pride.durable.commit.CommitBarrier` is one). The actor
    hands its turns over when such a barrier is its only one.
    """

    def hand_over_turn(self, branch: ServedBranch, state: TurnState, end: HandedTurn) -> bool:
        """Stage the turn's commit and hand ``end`` to it: True if handed over (the
        commit calls ``end``), False if the driver ends it now."""
        ...

    def hand_over_step(self, branch: ServedBranch, reply: Reply, result: Any) -> None:
        """Answer an ``Act`` once its commit is durable (at once if nothing waits)."""
        ...


@attrs.frozen(kw_only=True)
class Suspend(PriorityCommand):
    """Internal: leave the loop keeping the mailbox (a supervisor restart)."""


class Actor:
    """A branch's actor: its mailbox, the task serving it, and what that task tracks.

    Runtime state only, never serialised or cloned. The mailbox outlives a
    run of the loop (a restart serves the same mailbox again); the rest is
    per run or per turn.

    It holds no reference to its branch (see the module's docstring): what
    needs the branch takes it as an argument.

    Attributes:
        mailbox: the two-lane mailbox, once the actor was started.
        host: the nursery hosting the turns' tasks while the loop runs, else None.
        turn: the active top-level turn, else None.
        envelope: the envelope the loop took last (a restart cancels its turn).
        last_context_report: the context report of the last finished top-level turn.
        observer: where the branch's signals go (a session's observer, or one
            given to a standalone branch); set with `watch_with`.
        wants: ``wants(kind)``, whether the observer may want a signal of class
            ``kind``: its own ``wants``, or True for an observer without one.
            Asked before a signal is built; meaningless while ``observer`` is None.
        hooks: the session's hook bus, while attached.
        owner_id: the id of the session the branch belongs to, while attached.
        directory: resolves branch names for sends made from the branch's turns.
        account: the branch's usage, counted over all its turns (``branch.usage``);
            while attached, its parent is the session's account.
        journal: the branch's turn journal (`pride.actors.journaling`), if it keeps one.
        barriers: what every turn and ``Act`` awaits before its terminal and
            reply (see `add_turn_barrier`), or None while there are none.
        handover: the barriers when they are one `CommitHandover`, else None.
        answering: the last turn handed to its commit whose terminal a subscriber
            may see, until the loop takes its next item (`pride.durable.commit`).
    """

    __slots__ = (
        "account",
        "answering",
        "barriers",
        "directory",
        "envelope",
        "handover",
        "hooks",
        "host",
        "journal",
        "last_context_report",
        "mailbox",
        "observer",
        "owner_id",
        "turn",
        "wants",
    )

    def __init__(self, name: str, observer: SignalSink | None = None) -> None:
        """An actor for the branch named ``name`` (its account's scope), idle."""
        self.mailbox: Mailbox | None = None
        self.host: trio.Nursery | None = None
        self.turn: TurnState | None = None
        self.envelope: Reply | None = None
        self.last_context_report: Any = None
        self.observer: SignalSink | None = None
        self.wants: Callable[[type[Signal]], bool] = _wants_every_kind
        self.watch_with(observer)
        self.hooks: HookSink | None = None
        self.owner_id: UUID | None = None
        self.directory: Any = None
        self.account = Account(None, scope=f"branch {name}")
        self.journal: BranchRecord | None = None
        self.barriers: list[TurnBarrier] | None = None
        self.handover: CommitHandover | None = None
        self.answering: HandedTurn | None = None

    def __repr__(self) -> str:
        mailbox = self.mailbox
        if mailbox is None:  # the mailbox knows the branch's name; the actor does not
            return "<Actor never started>"
        state = "serving" if self.serving else "running" if self.running else "idle"
        return f"<Actor of {mailbox.name!r} {state}>"

    def watch_with(self, observer: SignalSink | None) -> None:
        """Send the branch's signals to ``observer`` (None: nowhere).

        Its ``wants`` becomes `wants` here, a bound method read from a slot,
        so a branch asking before each signal calls the observer directly.
        """
        self.observer = observer
        found = getattr(observer, "wants", None)
        self.wants = found if callable(found) else _wants_every_kind

    # ------------------------------------------------------------ mailbox

    @property
    def running(self) -> bool:
        """True while the mailbox accepts commands."""
        return self.mailbox is not None and not self.mailbox.closed

    @property
    def serving(self) -> bool:
        """True while the loop runs (in a supervisor's task or a standalone one)."""
        return self.host is not None

    def statistics(self) -> MailboxStatistics | None:
        """A snapshot of the mailbox, or None if the actor never started."""
        return self.mailbox.statistics() if self.mailbox is not None else None

    def require_mailbox(self, branch: Identified) -> Mailbox:
        """The open mailbox (``branch``, this actor's, names it in an error).

        Raises:
            BranchNotRunning: the actor was never started.
            BranchClosed: the branch has stopped.
        """
        mailbox = self.mailbox
        if mailbox is None:
            raise BranchNotRunning(branch.name)
        if mailbox.closed:
            raise BranchClosed(branch.name)
        return mailbox

    def close(self, branch: Identified, detail: str) -> None:
        """Close the mailbox of ``branch`` (this actor's) and answer everything
        queued with BranchClosed."""
        mailbox = self.mailbox
        if mailbox is None or mailbox.closed:
            return
        name = branch.name
        answered = [reply for reply in mailbox.close() if reply.state != "dropped"]
        for reply in answered:  # a dropped one's caller has gone: nobody to answer
            reply.fail(BranchClosed(name, detail))
        if answered:
            log.info(
                "branch %r: answered %d queued envelopes with BranchClosed", name, len(answered)
            )
        withdraw_live(branch)

    def hand_over(self, branch: Identified, detail: str) -> list[Reply]:
        """Close the mailbox of ``branch`` (this actor's) for a supervisor that gives
        the queued work to the branch's next incarnation (a crashed virtual
        branch's, activated afresh).

        Returns the work envelopes that were queued, in order and unanswered:
        answering them is now the caller's. Everything else (priority items,
        senders still waiting for room) is answered with BranchClosed, as by
        `close`.
        """
        mailbox = self.mailbox
        if mailbox is None or mailbox.closed:
            return []
        queued, refused = mailbox.close_apart()
        work = [r for r in queued if r.command.lane == "work" and r.state != "dropped"]
        kept = set(map(id, work))
        for reply in [*queued, *refused]:
            if id(reply) not in kept and reply.state != "dropped":
                reply.fail(BranchClosed(branch.name, detail))
        withdraw_live(branch)
        return work

    def suspend(self, branch: Identified, cancel_reason: str | None) -> Reply:
        """For supervisors: leave the loop serving ``branch`` (this actor's) after
        the current item, keeping the mailbox.

        With ``cancel_reason`` the item being served is cancelled first (its
        caller gets ``TurnCancelled(cancel_reason)``); without, it finishes.
        Returns the Reply of the ``Suspend`` (answered when the loop leaves).

        Raises:
            BranchNotRunning, BranchClosed: no mailbox to suspend.
        """
        reply = Reply(branch, Suspend())
        self.require_mailbox(branch).put_priority(reply, first=True)
        serving = self.envelope
        if cancel_reason is not None and serving is not None and serving.state == "running":
            serving.cancel(cancel_reason)
        return reply

    # ------------------------------------------------------------ barriers

    def add_turn_barrier(self, barrier: TurnBarrier) -> None:
        """Await ``barrier(state)`` at the end of every turn (``barrier(None)`` after
        an ``Act``), before its terminal and reply.

        A failing barrier fails the turn (a store that could not commit says
        so to the caller).
        """
        if self.barriers is None:
            self.barriers = []
        self.barriers.append(barrier)
        self._choose_handover()

    def remove_turn_barrier(self, barrier: TurnBarrier) -> None:
        """Stop awaiting ``barrier``; nothing happens if it was not added."""
        if self.barriers is not None and barrier in self.barriers:
            self.barriers.remove(barrier)
            if not self.barriers:
                self.barriers = None
            self._choose_handover()

    def _choose_handover(self) -> None:
        barriers = self.barriers
        only = barriers[0] if barriers is not None and len(barriers) == 1 else None
        self.handover = only if _is_handover(only) else None


# Whether each barrier class is a CommitHandover: a class's answer never changes.
_HANDS_OVER: dict[type, bool] = {}


def _is_handover(barrier: object) -> TypeGuard[CommitHandover]:
    """Whether ``barrier`` is a `CommitHandover`, asked once for each class: a runtime
    protocol's own check walks its members each time (about 6 us, at every spawn and
    every virtual activation)."""
    if barrier is None:
        return False
    kind = type(barrier)
    known = _HANDS_OVER.get(kind)
    if known is None:
        known = _HANDS_OVER[kind] = issubclass(kind, CommitHandover)
    return known


def _wants_every_kind(kind: type[Signal]) -> bool:
    """`Actor.wants` of an observer that says nothing of what it wants: it may want all."""
    return True
