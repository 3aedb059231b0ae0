"""The branch actor: its runtime state and the loop serving its mailbox.

One actor task per branch takes one mailbox item at a time, so turns of a
branch serialise by mailbox order (the mailbox is where an asyncio design
would hold a per-branch lock).
Priority items are applied between turns, never during one. Everything the
actor tracks lives in one `Actor` per branch (``branch.actor``); the
branch itself holds the conversation.

The loop serves three kinds of item: priority messages (``Attach``,
``Detach``, ``Stop``, a supervisor's ``Suspend``), applied at once; model
turns, each handed to the turn driver (`pride.actors.lifecycle`), which
owns a turn's whole lifecycle; and steps that are not model turns (``Act``),
served here with no turn context and no signals.

A failed turn or step is a result, not a crash: the caller gets the
exception and the actor goes on. A crash is [`Escalate`][pride.Escalate] or
an error of the runtime itself: the reply is answered with it, then it
escapes the loop for the supervisor to handle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable
from uuid import UUID

import attrs
import trio

from ..errors import BranchClosed, BranchNotRunning, Escalate, TurnCancelled
from ..messages import Attach, Detach, PriorityCommand, Stop, WorkCommand
from . import instrument, turn, wiring
from .allowance import carry, uncarry
from .budget import Account
from .dispatch import run_command
from .lifecycle import meter_for, run_turn, uncommitted
from .mailbox import Mailbox, MailboxStatistics, Reply
from .riders import ride
from .target import announce_live, withdraw_live
from .turn import FINALIZE_GRACE, await_bounded
from .waits import serving_step

if TYPE_CHECKING:
    from .branch import Branch, HookSink, SignalSink
    from .ending import TurnEnd
    from .journaling import BranchRecord

__all__ = [
    "FINALIZE_GRACE",
    "Actor",
    "CommitHandover",
    "StopReason",
    "Suspend",
    "await_bounded",
]

log = logging.getLogger("pride.actor")

StopReason = Literal["normal", "shutdown", "suspend"]

TurnBarrier = Callable[["turn.TurnState | None"], Awaitable[None]]
"""Awaited at the end of every turn (with its state) and ``Act`` (with None),
before its terminal signal and its reply (a store's commit)."""


@runtime_checkable
class CommitHandover(Protocol):
    """A turn barrier that can take a finished turn off the actor's hands: it ends
    the turn (or ``Act``) once its commit is durable, and the actor serves its
    next item meanwhile (`pride.durable.commit.CommitBarrier` is one). The actor
    hands its turns over when such a barrier is its only one.
    """

    def hand_over_turn(self, actor: Actor, state: turn.TurnState, end: TurnEnd) -> bool:
        """Stage the turn's commit and hand ``end`` to it: True if handed over (the
        commit calls ``end``), False if the driver ends it now."""
        ...

    def hand_over_step(self, actor: Actor, reply: Reply, result: Any) -> None:
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

    Attributes:
        branch: the branch this actor serves.
        mailbox: the two-lane mailbox, once the actor was started.
        host: the nursery hosting the turns' tasks while the loop runs, else None.
        turn: the active top-level turn, else None.
        envelope: the envelope the loop took last (a restart cancels its turn).
        last_context_report: the context report of the last finished top-level turn.
        observer: where the branch's signals go (a session's observer, or one
            given to a standalone branch).
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
        "branch",
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
    )

    def __init__(self, branch: Branch, observer: SignalSink | None = None) -> None:
        self.branch = branch
        self.mailbox: Mailbox | None = None
        self.host: trio.Nursery | None = None
        self.turn: turn.TurnState | None = None
        self.envelope: Reply | None = None
        self.last_context_report: Any = None
        self.observer = observer
        self.hooks: HookSink | None = None
        self.owner_id: UUID | None = None
        self.directory: Any = None
        self.account = Account(None, scope=f"branch {branch.name}")
        self.journal: BranchRecord | None = None
        self.barriers: list[TurnBarrier] | None = None
        self.handover: CommitHandover | None = None
        self.answering: TurnEnd | None = None

    def __repr__(self) -> str:
        state = "serving" if self.serving else "running" if self.running else "idle"
        return f"<Actor of {self.branch.name!r} {state}>"

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

    def require_mailbox(self) -> Mailbox:
        """The open mailbox.

        Raises:
            BranchNotRunning: the actor was never started.
            BranchClosed: the branch has stopped.
        """
        mailbox = self.mailbox
        if mailbox is None:
            raise BranchNotRunning(self.branch.name)
        if mailbox.closed:
            raise BranchClosed(self.branch.name)
        return mailbox

    def close(self, detail: str) -> None:
        """Close the mailbox and answer everything queued with BranchClosed."""
        mailbox = self.mailbox
        if mailbox is None or mailbox.closed:
            return
        name = self.branch.name
        answered = [reply for reply in mailbox.close() if reply.state != "dropped"]
        for reply in answered:  # a dropped one's caller has gone: nobody to answer
            reply.fail(BranchClosed(name, detail))
        if answered:
            log.info(
                "branch %r: answered %d queued envelopes with BranchClosed", name, len(answered)
            )
        withdraw_live(self.branch)

    def hand_over(self, detail: str) -> list[Reply]:
        """Close the mailbox for a supervisor that gives the queued work to the
        branch's next incarnation (a crashed virtual branch's, activated afresh).

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
                reply.fail(BranchClosed(self.branch.name, detail))
        withdraw_live(self.branch)
        return work

    def suspend(self, cancel_reason: str | None) -> Reply:
        """For supervisors: leave the loop after the current item, keeping the mailbox.

        With ``cancel_reason`` the item being served is cancelled first (its
        caller gets ``TurnCancelled(cancel_reason)``); without, it finishes.
        Returns the Reply of the ``Suspend`` (answered when the loop leaves).

        Raises:
            BranchNotRunning, BranchClosed: no mailbox to suspend.
        """
        reply = Reply(self.branch, Suspend())
        self.require_mailbox().put_priority(reply, first=True)
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
        self.handover = only if isinstance(only, CommitHandover) else None

    # ------------------------------------------------------------ serving

    async def serve(
        self, host: trio.Nursery | None = None, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> StopReason:
        """Serve the mailbox until a ``Stop`` (or ``Suspend``) arrives.

        ``host`` is a nursery that outlives the actor (its supervisor's) to run
        the turns' nested and signal tasks in; without one the actor opens its
        own. The mailbox is opened first (a new one if the last was closed).

        Returns the stop reason. On ``Stop`` the mailbox is closed and every
        envelope still queued is answered with BranchClosed; on ``Suspend`` (or
        a crash, or cancellation) the mailbox is left as it is for the supervisor.

        Raises:
            Escalate, Exception: a crash, after the envelope being served was
                answered with it.
        """
        if self.mailbox is None or self.mailbox.closed:
            self.mailbox = Mailbox(self.branch.name, self.branch.mailbox_size)
        announce_live(self.branch)
        mailbox = self.mailbox
        if host is not None:
            # A supervisor's nursery hosts the turns' nested and signal tasks (each
            # turn cancels and awaits its own before its terminal), which spares an
            # idle actor a nursery of its own.
            self.host = host
            task_status.started()
            try:
                return await _loop(self, mailbox)
            finally:
                self.host = None
        crash: BaseException | None = None
        reason: StopReason = "normal"
        async with trio.open_nursery() as background:
            self.host = background
            task_status.started()
            try:
                reason = await _loop(self, mailbox)
            except BaseException as exc:
                crash = exc
            finally:
                self.host = None
                background.cancel_scope.cancel()
        if crash is not None:
            raise crash
        return reason


# ----------------------------------------------------------------- the loop


async def _loop(actor: Actor, mailbox: Mailbox) -> StopReason:
    # Cancelling a turn needs a cancel scope around it, and entering a trio
    # cancel scope costs more than the rest of a short turn. So items are
    # served inside one scope shared by consecutive items; a caller cancelling
    # its turn cancels the shared scope, and the loop opens a fresh one before
    # taking the next item. Cancellation is rare; the common path pays nothing.
    while True:
        with trio.CancelScope() as shared:
            while not shared.cancel_called:
                answering = actor.answering
                if answering is not None:  # a watched terminal, then the next item (as ordered now)
                    actor.answering = None
                    await answering.wait()
                reply = await mailbox.next()
                if reply.state == "dropped":
                    continue
                actor.envelope = reply
                command = reply.command
                if isinstance(command, PriorityCommand):
                    if isinstance(command, Stop | Suspend):
                        return _stop(actor, reply)
                    _apply_priority(actor, reply)
                    await trio.lowlevel.checkpoint()
                elif command.model_turn:  # type: ignore[attr-defined]
                    await run_turn(actor, reply, shared)
                else:
                    await _run_step(actor, reply, shared)
                actor.envelope = None  # served: an idle actor holds no finished envelope
                del reply, command  # (nor does this frame, while it waits for the next)


def _stop(actor: Actor, reply: Reply) -> StopReason:
    command = reply.command
    if isinstance(command, Suspend):
        reply.succeed(None)
        return "suspend"
    assert isinstance(command, Stop)
    actor.close(f"stopped ({command.reason})")
    reply.succeed(None)
    return command.reason


def _apply_priority(actor: Actor, reply: Reply) -> None:
    command = reply.command
    try:
        if isinstance(command, Attach):
            wiring.attach(actor, command)
        elif isinstance(command, Detach):
            wiring.detach(actor)
        else:
            raise TypeError(f"unknown priority command {type(command).__name__}")
    except Exception as exc:
        reply.fail(exc)
    else:
        reply.succeed(None)


async def _run_step(actor: Actor, reply: Reply, cancel: trio.CancelScope) -> None:
    """Serve a work command that is not a model turn (``Act``): no context, no signals."""
    reply.start(None, cancel)
    with serving_step(reply):  # its tools waiting on this branch would deadlock
        command: WorkCommand = reply.command  # type: ignore[assignment]
        meter = meter_for(actor, command, reply)
        carried = carry(reply.allowance)  # what its tools send draws on it too
        tracer = instrument.TRACER  # its tool calls' spans, under the caller's (no span of its own)
        trace = None if tracer is None else tracer.step(actor.branch, command, reply.trace)
        try:
            if actor.journal is not None:
                actor.journal.check_free()  # an Act would record after unanswered tool calls
            work = partial(run_command, actor.branch, command, None, meter, trace)
            if meter.limited:  # the budget's cancel scope, its deadline the max_duration
                result = await meter.run(work)
            else:
                result = await work()
        except trio.Cancelled:
            if reply.cancel_reason is None:
                reply.fail(TurnCancelled("shutdown"))
                raise
            reply.fail(TurnCancelled(reply.cancel_reason))
        except Escalate as exc:
            reply.fail(exc)
            raise
        except Exception as exc:
            reply.fail(exc)
        else:
            # Its tool calls are recorded: like a turn, answered only once they are durable.
            if reply.rider is not None:
                ride(reply, result, None)  # committed with them (pride.actors.riders)
            handover = actor.handover
            if handover is not None:  # answered by the commit (or at once: nothing to commit)
                handover.hand_over_step(actor, reply, result)
            else:
                failure = await _commit_step(actor)
                if failure is None:
                    reply.succeed(result)
                else:
                    reply.fail(failure)
        finally:
            uncarry(carried)
            meter.close()
            meter.error = None  # the failure's frames hold the meter: no cycle through it
            if trace is not None:
                trace.end(None, False, meter.usage())


async def _commit_step(actor: Actor) -> Exception | None:
    """Pass the barriers (a store's commit) after an ``Act``, shielded and bounded;
    return the failure, if any, for its caller."""
    if not actor.barriers:
        return None
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        guard.shield = True
        for barrier in actor.barriers:
            try:
                await barrier(None)
            except Exception as exc:
                log.error("an Act of branch %r: %s", actor.branch.name, exc, exc_info=exc)
                return exc
    if guard.cancelled_caught:
        return uncommitted(actor)
    return None
