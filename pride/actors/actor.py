"""The branch actor: its runtime state, the loop serving its mailbox, and the turn driver.

One actor task per branch takes one mailbox item at a time, so turns of a
branch serialise by mailbox order (ADR-0018 D2's lock *is* the mailbox).
Priority items are applied between turns, never during one. Everything the
actor tracks lives in one `Actor` per branch (``branch.actor``); the
branch itself holds the conversation.

The turn driver (`_run_turn`) is the single owner of a turn's
lifecycle (ADR-0018 D4), read top-down in this module:

```text
open the turn's journal run          (a Resume: the journaled turn it continues)
RunStart
body (the operation), with nested work in the turn nursery
phase -> "finalizing"               (shielded and bounded from here on)
end the journal run                  (finished, or suspended for approval)
cancel and await nested tasks
drain the turn's message-signal tasks
pass the turn barriers (a store's commit)
exactly one terminal: RunEnd, RunFailed or RunSuspended
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
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import attrs
import trio

from ..errors import (
    ApprovalRequired,
    BranchClosed,
    BranchNotRunning,
    Escalate,
    StopStream,
    StoreError,
    TurnCancelled,
)
from ..messages import (
    Attach,
    Detach,
    PriorityCommand,
    RunEnd,
    RunFailed,
    RunStart,
    RunSuspended,
    Signal,
    Stop,
    WorkCommand,
    new_id,
)
from . import instrument, turn, wiring
from .budget import Account, Meter, carry, uncarry
from .dispatch import run_command
from .journal import BranchJournal, open_run
from .mailbox import Mailbox, MailboxStatistics, Reply
from .target import announce_live, withdraw_live
from .turn import FINALIZE_GRACE, await_bounded
from .waits import enter_step, leave_step

if TYPE_CHECKING:
    from .branch import Branch, HookSink, SignalSink

__all__ = ["FINALIZE_GRACE", "Actor", "StopReason", "Suspend", "await_bounded"]

log = logging.getLogger("pride.actor")

StopReason = Literal["normal", "shutdown", "suspend"]

TurnBarrier = Callable[["turn.TurnState | None"], Awaitable[None]]
"""Awaited at the end of every turn (with its state) and ``Act`` (with None),
before its terminal signal and its reply (a store's commit)."""


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
        turn: the active top-level turn (ADR-0018's pointer), else None.
        envelope: the envelope the loop took last (a restart cancels its turn).
        last_context_report: the context report of the last finished top-level turn.
        observer: where the branch's signals go (a session's observer, or one
            given to a standalone branch).
        hooks: the session's hook bus, while attached.
        owner_id: the id of the session the branch belongs to, while attached.
        directory: resolves branch names for sends made from the branch's turns.
        account: the branch's usage, counted over all its turns (``branch.usage``);
            while attached, its parent is the session's account.
        journal: the branch's turn journal (`pride.actors.journal`), if it keeps one.
    """

    __slots__ = (
        "_barriers",
        "account",
        "branch",
        "directory",
        "envelope",
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
        self.journal: BranchJournal | None = None
        self._barriers: list[TurnBarrier] | None = None

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
        if self._barriers is None:
            self._barriers = []
        self._barriers.append(barrier)

    def remove_turn_barrier(self, barrier: TurnBarrier) -> None:
        """Stop awaiting ``barrier``; nothing happens if it was not added."""
        if self._barriers is not None and barrier in self._barriers:
            self._barriers.remove(barrier)
            if not self._barriers:
                self._barriers = None

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
                    await _run_turn(actor, reply, shared)
                else:
                    await _run_step(actor, reply, shared)
                actor.envelope = None  # served: an idle actor holds no finished envelope


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
    step = enter_step(reply)  # its tools waiting on this branch would deadlock
    command: WorkCommand = reply.command  # type: ignore[assignment]
    meter = _meter(actor, command, reply)
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
        failure = await _commit_step(actor)
        if failure is None:
            reply.succeed(result)
        else:
            reply.fail(failure)
    finally:
        uncarry(carried)
        meter.close()
        leave_step(step)
        if trace is not None:
            trace.end(None, False, meter.usage())


async def _commit_step(actor: Actor) -> Exception | None:
    """Pass the barriers (a store's commit) after an ``Act``, shielded and bounded;
    return the failure, if any, for its caller."""
    if not actor._barriers:
        return None
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        guard.shield = True
        for barrier in actor._barriers:
            try:
                await barrier(None)
            except Exception as exc:
                log.error("an Act of branch %r: %s", actor.branch.name, exc, exc_info=exc)
                return exc
    if guard.cancelled_caught:
        return _uncommitted(actor)
    return None


def _uncommitted(actor: Actor) -> StoreError:
    message = (
        f"branch {actor.branch.name!r}: the commit of its messages did not finish within "
        f"{FINALIZE_GRACE}s; they may not be durable"
    )
    log.error("%s", message)
    return StoreError(message)


def _meter(actor: Actor, command: WorkCommand, reply: Reply) -> Meter:
    """The allowance of one work item: its command's budget, else its branch's,
    drawing on the allowance its envelope carries (a flow's), if any."""
    budget = command.budget if command.budget is not None else actor.branch.budget
    return Meter(budget, actor.account, carried=reply.allowance)


# ------------------------------------------------------------ the turn driver


async def _run_turn(actor: Actor, reply: Reply, cancel: trio.CancelScope) -> None:
    branch = actor.branch
    command = reply.command
    assert actor.host is not None, "a turn runs only inside a serving actor"
    try:
        run = open_run(actor, reply)
    except Exception as exc:  # refused before it started (a bad Resume, a pending approval)
        reply.start(None, cancel)
        reply.fail(exc)
        if reply.stream is not None:
            reply.stream.close()  # a stream consumer waits for its end: it gets the error
        return
    if run is not None and run.command is not None:
        command = run.command  # a Resume runs the command that started the turn
    context = turn.TurnExecutionContext(
        turn_id=run.turn_id if run is not None else new_id(),
        model=branch.chat_model,
        owner_task=trio.lowlevel.current_task(),
    )
    # A Resume's own budget, when it has one, bounds the rest of the turn.
    budgeted = reply.command if getattr(reply.command, "budget", None) is not None else command
    meter = _meter(actor, budgeted, reply)  # type: ignore[arg-type]
    state = turn.TurnState(context, command, actor.host, meter=meter, journal=run)  # type: ignore[arg-type]
    scope = turn.TurnScope(state, owns_lifecycle=True, stream=reply.stream)
    observer = actor.observer
    reply.start(context.turn_id, cancel)
    tracer = instrument.TRACER
    if tracer is not None:  # the turn's span, under the caller's (from the envelope)
        state.trace = tracer.turn(branch, context.turn_id, command, reply.trace)  # type: ignore[arg-type]
    actor.turn = state
    token = turn.bind(branch, actor, scope)
    carried = carry(reply.allowance)  # what the turn sends draws on it too
    result: Any = None
    error: BaseException | None = None
    outcome: _Outcome | None = None
    try:
        try:
            if observer is not None and wiring.wants(observer, RunStart):
                await wiring.emit_lifecycle(
                    actor,
                    RunStart(
                        branch_id=branch.id,
                        branch_name=branch.name,
                        turn_id=context.turn_id,
                        command=type(command).__name__,
                        resumed=run is not None and run.resumed,
                    ),
                )
            if run is not None and run.abandon is not None:
                raise run.abandoned()
            if meter.limited:  # the budget's cancel scope, its deadline the max_duration
                meter.on_trip = state.cancel_nested
                result = await meter.run(partial(run_command, branch, command, scope))  # type: ignore[arg-type]
            else:
                result = await run_command(branch, command, scope)  # type: ignore[arg-type]
        except BaseException as exc:
            error = exc
        finally:
            context.advance("finalizing")
            meter.close()
        if meter.error is not None:
            error = _over_budget(meter.error, error, reply)
        if reply.stream is not None:
            reply.stream.close()
        outcome = _classify(error, reply)
        if run is not None:
            outcome = _end_journal_run(actor, state, run, outcome)
        if state.nested is not None or state.signals is not None or actor._barriers:
            outcome = await _finalise(actor, state, outcome)
        elif observer is not None or actor.account.parent is not None:
            # Nothing to end, drain or commit: no shielded scope, the terminal now.
            await _announce(actor, state, outcome)
    except BaseException as exc:  # a fault of the runtime itself: answer, then crash
        outcome = _Outcome(exc, reraise=exc)
        if run is not None and not state.suspended:
            run.end(exc, can_suspend=False)
    finally:
        actor.last_context_report = context.provider_report
        context.advance("closed")
        actor.turn = None
        uncarry(carried)
        turn.unbind(token)
        if reply.stream is not None:
            reply.stream.close()
        if state.trace is not None:  # ended before the caller is answered
            _end_trace(state, outcome)
    if outcome.failure is None:
        reply.succeed(result if outcome.result_kept else None)
    else:
        reply.fail(outcome.failure)
    if outcome.reraise is not None:
        raise outcome.reraise


async def _finalise(actor: Actor, state: turn.TurnState, outcome: _Outcome) -> _Outcome:
    """End nested work, drain message signals, pass the turn's barriers (a store's
    commit), emit the terminal: shielded and bounded. Returns the final outcome.

    Cut short by the bound, the turn's leftover signal deliveries are cancelled
    and its terminal is still emitted (once: never a second attempt).
    """
    attempted = False
    committed = not actor._barriers
    name = actor.branch.name
    turn_id = state.context.turn_id
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        # Cancellation from outside must not strand the turn half-finalised.
        guard.shield = True
        if state.nested is not None:
            await state.nested.cancel_and_wait()
        if state.signals is not None:
            await state.signals.wait()
        outcome = _escalated(state, outcome)
        for barrier in actor._barriers or ():
            try:
                await barrier(state)
            except Exception as exc:
                # The turn's messages may not be durable: say so to the caller.
                log.error("turn %s of branch %r: %s", turn_id, name, exc, exc_info=exc)
                if outcome.failure is None:
                    outcome = _Outcome(exc)
        committed = True
        attempted = True
        await _announce(actor, state, outcome)
    if guard.cancelled_caught:
        log.error(
            "turn %s of branch %r did not finalise within %ss; finalisation was cut short",
            turn_id,
            name,
            FINALIZE_GRACE,
        )
        with trio.move_on_after(FINALIZE_GRACE) as late:
            late.shield = True
            if state.signals is not None:  # stuck subscribers: cancel, never leave behind
                await state.signals.cancel_and_wait()
            if not committed:  # cut short before its commit: commit now, still first
                for barrier in actor._barriers or ():
                    try:
                        await barrier(state)
                    except Exception as exc:
                        log.error("turn %s of branch %r: %s", turn_id, name, exc)
                        if outcome.failure is None:
                            outcome = _Outcome(exc)
                committed = True
            if not attempted:  # every turn gets its terminal
                await _announce(actor, state, outcome)
        if not committed and outcome.failure is None:  # never answered ok uncommitted
            outcome = _Outcome(_uncommitted(actor))
    return outcome


def _end_trace(state: turn.TurnState, outcome: _Outcome | None) -> None:
    failure = outcome.failure if outcome is not None else None
    cancelled = outcome.cancelled if outcome is not None else False
    state.trace.end(failure, cancelled, state.meter.usage())


def _over_budget(
    exceeded: BaseException, error: BaseException | None, reply: Reply
) -> BaseException | None:
    """What a turn whose allowance was exceeded failed with: the BudgetExceeded,
    unless the turn crashed (Escalate, an error of the runtime) or the actor is
    being shut down, which keep their meaning."""
    if error is None or error is exceeded:
        return exceeded
    if isinstance(error, Escalate) or not isinstance(error, Exception | trio.Cancelled):
        return error
    if isinstance(error, trio.Cancelled) and reply.cancel_reason is None:
        return error  # the actor is being cancelled from outside: finalise, then let it go
    return exceeded


def _end_journal_run(actor: Actor, state: turn.TurnState, run: Any, outcome: _Outcome) -> _Outcome:
    """End the turn's journal run; a run with calls waiting for approval suspends,
    and its caller gets ApprovalRequired (even if the operation swallowed it)."""
    can_suspend = outcome.reraise is None and not outcome.cancelled
    if not run.end(outcome.failure, can_suspend=can_suspend):
        return outcome
    state.suspended = True
    failure = outcome.failure
    if not (isinstance(failure, ApprovalRequired) and failure.turn_id == run.turn_id):
        failure = ApprovalRequired(run.turn_id, run.pending, actor.branch.name)
    return _Outcome(failure)


def _escalated(state: turn.TurnState, outcome: _Outcome) -> _Outcome:
    """The outcome once the turn's own tasks had their say: an Escalate from a
    nested task or an async hook escalates the turn (after it finalises)."""
    if outcome.reraise is not None:
        return outcome
    for group in (state.nested, state.signals):
        if group is not None and group.escalation is not None:
            return _Outcome(group.escalation, reraise=group.escalation)
    return outcome


@attrs.frozen
class _Outcome:
    failure: BaseException | None  # what the caller receives, None on success
    cancelled: bool = False
    result_kept: bool = True
    reraise: BaseException | None = None  # escapes the actor loop after answering


_SUCCESS = _Outcome(None)


def _classify(error: BaseException | None, reply: Reply) -> _Outcome:
    if error is None:
        return _SUCCESS
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


async def _announce(actor: Actor, state: turn.TurnState, outcome: _Outcome) -> None:
    """The turn's end: counted on the accounts above its branch (what a session's
    statistics report), then its terminal signal, built only if a subscriber may
    want it. Waiting for async subscribers is shielded (and bounded)."""
    kind = _terminal_kind(state, outcome)
    above = actor.account.parent
    if above is not None:
        above.count_turn(_ENDED[kind])
    observer = actor.observer
    if observer is None or not wiring.wants(observer, kind):
        return
    signal = _terminal(actor, state, outcome, kind)
    pending = wiring.dispatch_lifecycle(actor, signal)
    if pending is not None:
        with trio.CancelScope(shield=True):
            await wiring.await_lifecycle(actor, signal, pending)


_ENDED: dict[type[Signal], str] = {RunEnd: "done", RunFailed: "failed", RunSuspended: "suspended"}


def _terminal_kind(state: turn.TurnState, outcome: _Outcome) -> type[Signal]:
    if outcome.failure is None:
        return RunEnd
    if state.suspended and state.journal is not None:
        return RunSuspended
    return RunFailed


def _terminal(actor: Actor, state: turn.TurnState, outcome: _Outcome, kind: type[Signal]) -> Signal:
    branch = actor.branch
    duration_ms = (time.perf_counter() - state.started_at) * 1000.0
    if kind is RunEnd:
        return RunEnd(
            branch_id=branch.id,
            branch_name=branch.name,
            turn_id=state.context.turn_id,
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            cached_tokens=state.cached_tokens,
            total_cost_usd=state.cost_usd,
            model_calls=state.model_calls,
            tool_calls=state.tool_calls,
            duration_ms=duration_ms,
        )
    if kind is RunSuspended:
        assert state.journal is not None
        return RunSuspended(
            branch_id=branch.id,
            branch_name=branch.name,
            turn_id=state.context.turn_id,
            error_type=type(outcome.failure).__name__,
            error_message=str(outcome.failure),
            duration_ms=duration_ms,
            input_tokens=state.input_tokens,
            output_tokens=state.output_tokens,
            cached_tokens=state.cached_tokens,
            total_cost_usd=state.cost_usd,
            model_calls=state.model_calls,
            tool_calls=state.tool_calls,
            pending=tuple(call.call_id for call in state.journal.pending),
        )
    return RunFailed(
        branch_id=branch.id,
        branch_name=branch.name,
        turn_id=state.context.turn_id,
        error_type=type(outcome.failure).__name__,
        error_message=str(outcome.failure),
        cancelled=outcome.cancelled,
        duration_ms=duration_ms,
        input_tokens=state.input_tokens,
        output_tokens=state.output_tokens,
        cached_tokens=state.cached_tokens,
        total_cost_usd=state.cost_usd,
        model_calls=state.model_calls,
        tool_calls=state.tool_calls,
    )
