"""The actor loop: the task that serves a branch's mailbox, one item at a time.

Priority items are applied between turns, never during one. The loop serves
three kinds of item: priority messages (``Attach``, ``Detach``, ``Stop``, a
supervisor's ``Suspend``), applied at once; model turns, each handed to the
turn driver (`pride.actors.lifecycle`), which owns a turn's whole lifecycle;
and steps that are not model turns (``Act``), served here with no turn
context and no signals. What the loop tracks is the branch's `Actor`
(`pride.actors.actor`).

A failed turn or step is a result, not a crash: the caller gets the
exception and the actor goes on. A crash is [`Escalate`][pride.Escalate] or
an error of the runtime itself: the reply is answered with it, then it
escapes the loop for the supervisor to handle.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import trio

from ..budget.allowance import carry, uncarry
from ..errors import Escalate, TurnCancelled
from ..messages import Attach, Detach, PriorityCommand, Stop, WorkCommand
from . import instrument, wiring
from .actor import Actor, ServedBranch, StopReason, Suspend
from .dispatch import run_command
from .lifecycle import meter_for, run_turn, uncommitted
from .mailbox import Mailbox
from .reply import Reply
from .riders import ride
from .target import announce_live
from .turn import FINALIZE_GRACE
from .waits import serving_step

__all__ = ["serve"]

log = logging.getLogger("pride.actor")


async def serve(
    branch: ServedBranch,
    host: trio.Nursery | None = None,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> StopReason:
    """Serve the mailbox of ``branch``'s actor until a ``Stop`` (or ``Suspend``) arrives.

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
    actor = branch.actor
    if actor.mailbox is None or actor.mailbox.closed:
        actor.mailbox = Mailbox(branch.name, branch.mailbox_size)
    announce_live(branch)
    mailbox = actor.mailbox
    if host is not None:
        # A supervisor's nursery hosts the turns' nested and signal tasks (each
        # turn cancels and awaits its own before its terminal), which spares an
        # idle actor a nursery of its own.
        actor.host = host
        task_status.started()
        try:
            return await _loop(branch, mailbox)
        finally:
            _leave(actor)
    crash: BaseException | None = None
    reason: StopReason = "normal"
    async with trio.open_nursery() as background:
        actor.host = background
        task_status.started()
        try:
            reason = await _loop(branch, mailbox)
        except BaseException as exc:
            crash = exc
        finally:
            _leave(actor)
            background.cancel_scope.cancel()
    if crash is not None:
        raise crash
    return reason


def _leave(actor: Actor) -> None:
    """The loop has left: the actor no longer serves, nor holds the envelope it took
    last (a Stop's, a crash's, answered): it points at the branch, and the branch
    at the actor, a cycle that would keep a stopped branch for a full collection."""
    actor.host = None
    actor.envelope = None


async def _loop(branch: ServedBranch, mailbox: Mailbox) -> StopReason:
    # Cancelling a turn needs a cancel scope around it, and entering a trio
    # cancel scope costs more than the rest of a short turn. So items are
    # served inside one scope shared by consecutive items; a caller cancelling
    # its turn cancels the shared scope, and the loop opens a fresh one before
    # taking the next item. Cancellation is rare; the common path pays nothing.
    actor = branch.actor
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
                        return _stop(branch, reply)
                    _apply_priority(branch, reply)
                    await trio.lowlevel.checkpoint()
                elif command.model_turn:  # type: ignore[attr-defined]
                    await run_turn(branch, reply, shared)
                else:
                    await _run_step(branch, reply, shared)
                actor.envelope = None  # served: an idle actor holds no finished envelope
                del reply, command  # (nor does this frame, while it waits for the next)


def _stop(branch: ServedBranch, reply: Reply) -> StopReason:
    command = reply.command
    if isinstance(command, Suspend):
        reply.succeed(None)
        return "suspend"
    assert isinstance(command, Stop)
    branch.actor.close(branch, f"stopped ({command.reason})")
    reply.succeed(None)
    return command.reason


def _apply_priority(branch: ServedBranch, reply: Reply) -> None:
    command = reply.command
    try:
        if isinstance(command, Attach):
            wiring.attach(branch, command)
        elif isinstance(command, Detach):
            wiring.detach(branch)
        else:
            raise TypeError(f"unknown priority command {type(command).__name__}")
    except Exception as exc:
        reply.fail(exc)
    else:
        reply.succeed(None)


async def _run_step(branch: ServedBranch, reply: Reply, cancel: trio.CancelScope) -> None:
    """Serve a work command that is not a model turn (``Act``): no context, no signals."""
    actor = branch.actor
    reply.start(None, cancel)
    with serving_step(reply):  # its tools waiting on this branch would deadlock
        command: WorkCommand = reply.command  # type: ignore[assignment]
        meter = meter_for(branch, command, reply)
        carried = carry(reply.allowance)  # what its tools send draws on it too
        tracer = instrument.TRACER  # its tool calls' spans, under the caller's (no span of its own)
        trace = None if tracer is None else tracer.step(branch, command, reply.trace)
        try:
            if actor.journal is not None:
                actor.journal.check_free()  # an Act would record after unanswered tool calls
            work = partial(run_command, branch, command, None, meter, trace)
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
                handover.hand_over_step(branch, reply, result)
            else:
                failure = await _commit_step(branch)
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


async def _commit_step(branch: ServedBranch) -> Exception | None:
    """Pass the barriers (a store's commit) after an ``Act``, shielded and bounded;
    return the failure, if any, for its caller."""
    barriers = branch.actor.barriers
    if not barriers:
        return None
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        guard.shield = True
        for barrier in barriers:
            try:
                await barrier(None)
            except Exception as exc:
                log.error("an Act of branch %r: %s", branch.name, exc, exc_info=exc)
                return exc
    if guard.cancelled_caught:
        return uncommitted(branch)
    return None
