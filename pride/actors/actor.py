"""The branch actor: the loop serving a mailbox, and the turn driver.

One actor task per branch takes one mailbox item at a time, so turns of a
branch serialise by mailbox order (ADR-0018 D2's lock *is* the mailbox).
Priority items are applied between turns, never during one.

The turn driver is the single owner of a turn's lifecycle (ADR-0018 D4):

```text
RunStart
body (the operation), with nested work in the turn nursery
phase -> "finalizing"               (shielded and bounded from here on)
cancel and await nested tasks
drain the turn's message-signal tasks
exactly one terminal: RunEnd or RunFailed
publish last_context_report, phase -> "closed", clear pointer and binding
answer the reply
```

A failed turn is a result, not a crash: the caller gets the exception and
the actor goes on. A crash is [`Escalate`][pride.Escalate] from a turn or an
error of the runtime itself: the reply is answered with it, then it
escapes the loop for the supervisor to handle.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from ..errors import Escalate, StopStream, TurnCancelled
from ..messages import Attach, Detach, PriorityCommand, RunEnd, RunFailed, RunStart, Stop
from ..messages._ids import new_id
from . import turn
from .mailbox import Mailbox, Reply
from .waits import enter_step, leave_step

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["FINALIZE_GRACE", "StopReason", "Suspend", "serve"]

log = logging.getLogger("pride.actor")

# Bound on a turn's shielded finalisation (nested-task cancellation, signal
# drain, terminal observers). ADR-0018 sets no drain timeout; an unbounded
# shield could pin a branch forever on a stuck observer, so pride bounds it and
# logs when the bound is hit.
FINALIZE_GRACE = 10.0

StopReason = Literal["normal", "shutdown", "suspend"]


async def await_bounded(pending: Any, what: str, logger: logging.Logger) -> None:
    """Await subscriber work for at most FINALIZE_GRACE; past it, cancel and log."""
    with trio.move_on_after(FINALIZE_GRACE) as bound:
        await pending
    if bound.cancelled_caught:
        logger.error("%s took over %ss; cancelled", what, FINALIZE_GRACE)


@attrs.frozen(kw_only=True)
class Suspend(PriorityCommand):
    """Internal: leave the loop keeping the mailbox (a supervisor restart)."""


async def serve(
    branch: Branch,
    mailbox: Mailbox,
    host: trio.Nursery | None = None,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> StopReason:
    """Serve ``branch``'s mailbox until a ``Stop`` (or ``Suspend``) arrives.

    ``host`` is a nursery that outlives the actor (its supervisor's) to run
    the turns' nested and signal tasks in; without one the actor opens its own.

    Returns the stop reason. On ``Stop`` the mailbox is closed and every
    envelope still queued is answered with BranchClosed; on ``Suspend`` (or
    a crash, or cancellation) the mailbox is left as it is for the supervisor.

    Raises:
        Escalate, Exception: a crash, after the envelope being served was
            answered with it.
    """
    if host is not None:
        # A supervisor's nursery hosts the turns' nested and signal tasks (each
        # turn cancels and awaits its own before its terminal), which spares an
        # idle actor a nursery of its own.
        branch._background = host
        task_status.started()
        try:
            return await _loop(branch, mailbox)
        finally:
            branch._background = None
    crash: BaseException | None = None
    reason: StopReason = "normal"
    async with trio.open_nursery() as background:
        branch._background = background
        task_status.started()
        try:
            reason = await _loop(branch, mailbox)
        except BaseException as exc:
            crash = exc
        finally:
            branch._background = None
            background.cancel_scope.cancel()
    if crash is not None:
        raise crash
    return reason


async def _loop(branch: Branch, mailbox: Mailbox) -> StopReason:
    # Cancelling a turn needs a cancel scope around it, and entering a trio
    # cancel scope costs more than the rest of a short turn. So items are
    # served inside one scope shared by consecutive items; a caller cancelling
    # its turn cancels the shared scope, and the loop opens a fresh one before
    # taking the next item. Cancellation is rare; the common path pays nothing.
    while True:
        with trio.CancelScope() as shared:
            while not shared.cancel_called:
                reply = await mailbox.next()
                if reply.state == "dropped":
                    continue
                branch._serving = reply
                command = reply.command
                if isinstance(command, PriorityCommand):
                    if isinstance(command, Stop | Suspend):
                        return _stop(branch, mailbox, reply)
                    _apply_priority(branch, reply)
                    await trio.lowlevel.checkpoint()
                elif command.model_turn:  # type: ignore[attr-defined]
                    await _run_turn(branch, reply, shared)
                else:
                    await _run_step(branch, reply, shared)


def _stop(branch: Branch, mailbox: Mailbox, reply: Reply) -> StopReason:
    command = reply.command
    if isinstance(command, Suspend):
        reply.succeed(None)
        return "suspend"
    assert isinstance(command, Stop)
    branch._close_mailbox(f"stopped ({command.reason})")
    reply.succeed(None)
    return command.reason


def _apply_priority(branch: Branch, reply: Reply) -> None:
    command = reply.command
    try:
        if isinstance(command, Attach):
            branch._attach(command)
        elif isinstance(command, Detach):
            branch._detach()
        else:
            raise TypeError(f"unknown priority command {type(command).__name__}")
    except Exception as exc:
        reply.fail(exc)
    else:
        reply.succeed(None)


async def _run_step(branch: Branch, reply: Reply, cancel: trio.CancelScope) -> None:
    """Serve a work command that is not a model turn (``Act``): no context, no signals."""
    reply.start(None, cancel)
    step = enter_step(reply)  # its tools waiting on this branch would deadlock
    try:
        result = await branch._run_inline(reply.command, None)  # type: ignore[arg-type]
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
        reply.succeed(result)
    finally:
        leave_step(step)


async def _run_turn(branch: Branch, reply: Reply, cancel: trio.CancelScope) -> None:
    command = reply.command
    host = branch._background
    assert host is not None, "a turn runs only inside a serving actor"
    context = turn.TurnExecutionContext(
        turn_id=new_id(),
        model=branch.chat_model,
        owner_task=trio.lowlevel.current_task(),
        command=command,  # type: ignore[arg-type]
        host=host,
    )
    scope = turn.TurnScope(context, owns_lifecycle=True, stream=reply._stream)
    observed = branch._observer is not None
    reply.start(context.turn_id, cancel)
    branch._active_turn = context
    token = turn.bind(branch, scope)
    result: Any = None
    error: BaseException | None = None
    outcome: _Outcome | None = None
    try:
        try:
            if observed:
                await branch._emit_lifecycle(
                    RunStart(
                        branch_id=branch.id,
                        branch_name=branch.name,
                        turn_id=context.turn_id,
                        command=type(command).__name__,
                    )
                )
            result = await branch._run_inline(command, scope)  # type: ignore[arg-type]
        except BaseException as exc:
            error = exc
        finally:
            context.advance("finalizing")
        if reply._stream is not None:
            reply._stream.close()
        outcome = _classify(error, reply)
        if (
            observed
            or context.nested is not None
            or context.signals is not None
            or branch._turn_barriers
        ):
            outcome = await _finalise(branch, context, outcome, observed)
    except BaseException as exc:  # a fault of the runtime itself: answer, then crash
        outcome = _Outcome(exc, reraise=exc)
    finally:
        branch._last_context_report = context.provider_report
        context.advance("closed")
        branch._active_turn = None
        turn.unbind(token)
        if reply._stream is not None:
            reply._stream.close()
    if outcome.failure is None:
        reply.succeed(result if outcome.result_kept else None)
    else:
        reply.fail(outcome.failure)
    if outcome.reraise is not None:
        raise outcome.reraise


async def _finalise(
    branch: Branch, context: turn.TurnExecutionContext, outcome: _Outcome, observed: bool
) -> _Outcome:
    """End nested work, drain message signals, pass the turn's barriers (a store's
    commit), emit the terminal: shielded and bounded. Returns the final outcome.

    Cut short by the bound, the turn's leftover signal deliveries are cancelled
    and its terminal is still emitted (once: never a second attempt).
    """
    attempted = False
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        # Cancellation from outside must not strand the turn half-finalised.
        guard.shield = True
        if context.nested is not None:
            await context.nested.cancel_and_wait()
        if context.signals is not None:
            await context.signals.wait()
        outcome = _escalated(context, outcome)
        for barrier in branch._turn_barriers:
            try:
                await barrier()
            except Exception as exc:
                # The turn's messages may not be durable: say so to the caller.
                log.error(
                    "turn %s of branch %r: %s", context.turn_id, branch.name, exc, exc_info=exc
                )
                if outcome.failure is None:
                    outcome = _Outcome(exc)
        if observed:
            attempted = True
            await branch._emit_lifecycle(_terminal(branch, context, outcome))
    if guard.cancelled_caught:
        log.error(
            "turn %s of branch %r did not finalise within %ss; finalisation was cut short",
            context.turn_id,
            branch.name,
            FINALIZE_GRACE,
        )
        with trio.move_on_after(FINALIZE_GRACE) as late:
            late.shield = True
            if context.signals is not None:  # stuck subscribers: cancel, never leave behind
                await context.signals.cancel_and_wait()
            if observed and not attempted:  # every turn gets its terminal
                await branch._emit_lifecycle(_terminal(branch, context, outcome))
    return outcome


def _escalated(context: turn.TurnExecutionContext, outcome: _Outcome) -> _Outcome:
    """The outcome once the turn's own tasks had their say: an Escalate from a
    nested task or an async hook escalates the turn (after it finalises)."""
    if outcome.reraise is not None:
        return outcome
    for group in (context.nested, context.signals):
        if group is not None and group.escalation is not None:
            return _Outcome(group.escalation, reraise=group.escalation)
    return outcome


@attrs.frozen
class _Outcome:
    failure: BaseException | None  # what the caller receives, None on success
    cancelled: bool = False
    result_kept: bool = True
    reraise: BaseException | None = None  # escapes the actor loop after answering


_SUCCESS = None  # set below, once _Outcome exists


def _classify(error: BaseException | None, reply: Reply) -> _Outcome:
    if error is None:
        return _SUCCESS  # type: ignore[return-value]
    if isinstance(error, StopStream):
        return _Outcome(None, result_kept=False)
    if isinstance(error, trio.Cancelled):
        if reply.cancel_reason is not None:
            reason = reply.cancel_reason
            if reason == "stream_closed":
                return _Outcome(None, result_kept=False)
            return _Outcome(TurnCancelled(reason), cancelled=True)
        # The actor itself is being cancelled from outside: finalise, then let it go.
        return _Outcome(TurnCancelled("shutdown"), cancelled=True, reraise=error)
    if isinstance(error, Escalate):
        return _Outcome(error, reraise=error)
    if isinstance(error, Exception):
        return _Outcome(error)
    return _Outcome(error, reraise=error)  # KeyboardInterrupt and friends


_SUCCESS = _Outcome(None)


def _terminal(branch: Branch, context: turn.TurnExecutionContext, outcome: _Outcome) -> Any:
    duration_ms = (time.perf_counter() - context.started_at) * 1000.0
    if outcome.failure is None:
        return RunEnd(
            branch_id=branch.id,
            branch_name=branch.name,
            turn_id=context.turn_id,
            input_tokens=context.input_tokens,
            output_tokens=context.output_tokens,
            cached_tokens=context.cached_tokens,
            total_cost_usd=context.cost_usd,
            num_turns=context.model_calls,
            duration_ms=duration_ms,
        )
    return RunFailed(
        branch_id=branch.id,
        branch_name=branch.name,
        turn_id=context.turn_id,
        error_type=type(outcome.failure).__name__,
        error_message=str(outcome.failure),
        cancelled=outcome.cancelled,
        duration_ms=duration_ms,
    )
