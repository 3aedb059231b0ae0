"""A turn's lifecycle, start to terminal: the turn driver.

The actor loop (`pride.actors.loop`) hands each model-turn envelope to
`run_turn`, the single owner of that turn's lifecycle, read top-down here:

```text
open the turn's journal run          (a Resume: the journaled turn it continues)
RunStart                             (built only if a subscriber may want it)
body (the operation), with nested work in the turn nursery
phase -> "finalizing"               (shielded and bounded from here on)
end the journal run                  (finished, or suspended for approval)
cancel and await nested tasks
drain the turn's message-signal tasks
pass the turn barriers (a store's commit)
publish last_context_report
end it (`TurnEnd`): counted on the session's account, exactly one terminal
    (RunEnd, RunFailed or RunSuspended, built only if a subscriber may want
    it), the caller answered
phase -> "closed", clear pointer and binding
```

Every turn ends through one `TurnEnd` (`pride.actors.ending`). A turn with
no nested tasks, signal tasks or barriers has nothing to finalise under a
shield: it ends at once, and only an async subscriber's wait for its
terminal is shielded (and bounded). A turn whose one barrier is a store's
commit, with nothing else to finalise, hands its `TurnEnd` to the commit
(`pride.durable.commit`), which calls it once the commit ends; the actor
serves its next item meanwhile.

A failed turn is a result, not a crash: the caller gets the exception and
the actor goes on. A crash is [`Escalate`][pride.Escalate] from a turn or an
error of the runtime itself: the reply is answered with it, then it
escapes the loop for the supervisor to handle.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from ..budget.accounts import Meter
from ..budget.allowance import carry, uncarry
from ..errors import ApprovalRequired, Escalate, StoreError
from ..messages import RunStart, WorkCommand, new_id
from . import instrument, turn, wiring
from .dispatch import run_command
from .ending import SUCCESS, Outcome, TurnEnd, classify
from .journaling import open_run
from .reply import Reply
from .riders import ride
from .turn import FINALIZE_GRACE

if TYPE_CHECKING:
    from .actor import ServedBranch

__all__ = ["meter_for", "run_turn", "uncommitted"]

log = logging.getLogger("pride.actor")


async def run_turn(branch: ServedBranch, reply: Reply, cancel: trio.CancelScope) -> None:
    """Serve ``reply``'s model turn of ``branch``, start to terminal, and answer it
    (the sequence above).

    ``cancel`` is the actor loop's cancel scope the turn runs in (a caller
    giving up cancels it). A failed turn answers its reply with the error and
    returns.

    Raises:
        Escalate, BaseException: a crash (an ``Escalate``, an error of the
            runtime, the actor cancelled from outside), after the reply was
            answered.
    """
    actor = branch.actor
    command = reply.command
    assert actor.host is not None, "a turn runs only inside a serving actor"
    turn_id = new_id()  # a continued turn (a Resume) keeps its own: its run says which
    try:
        run = open_run(branch, reply, turn_id)
    except Exception as exc:  # refused before it started (a bad Resume, a pending approval)
        reply.start(None, cancel)
        reply.fail(exc)
        if reply.stream is not None:
            reply.stream.close()  # a stream consumer waits for its end: it gets the error
        return
    if run is not None and run.command is not None:
        command = run.command  # a Resume runs the command that started the turn
    if run is not None:
        turn_id = run.turn_id
    model = branch.chat_model  # the snapshot the whole turn uses
    # A Resume's own budget, when it has one, bounds the rest of the turn.
    budgeted = reply.command if getattr(reply.command, "budget", None) is not None else command
    meter = meter_for(branch, budgeted, reply)  # type: ignore[arg-type]
    stream = reply.stream
    reply.start(turn_id, cancel)
    # The turn's three records are made together, then bound: the turn module is
    # entered once for them, not once between each of the steps above.
    context = turn.TurnExecutionContext(
        turn_id=turn_id, model=model, owner_task=trio.lowlevel.current_task()
    )
    state = turn.TurnState(context, command, actor.host, meter=meter, journal=run)  # type: ignore[arg-type]
    scope = turn.TurnScope(state, owns_lifecycle=True, stream=stream)
    observer = actor.observer
    tracer = instrument.TRACER
    if tracer is not None:  # the turn's span, under the caller's (from the envelope)
        state.trace = tracer.turn(branch, context.turn_id, command, reply.trace)  # type: ignore[arg-type]
    actor.turn = state
    token = turn.bind(branch, actor, scope)
    carried = carry(reply.allowance)  # what the turn sends draws on it too
    result: Any = None
    error: BaseException | None = None
    outcome: Outcome | None = None
    handed = crashed = False
    end: TurnEnd | None = None
    try:
        try:
            if observer is not None and actor.wants(RunStart):
                await wiring.emit_lifecycle(
                    branch,
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
            context.phase = "finalizing"  # from "active": what advance() checks holds
            if meter.limited:
                meter.close()
        if meter.error is not None:
            error = _over_budget(meter.error, error, reply)
        if stream is not None:
            stream.close()
        outcome = SUCCESS if error is None else classify(error, reply)
        if run is not None:
            outcome = _end_journal_run(branch, state, run, outcome)
        handover = actor.handover
        # Nothing to end under a shield (no nested tasks, signal deliveries or stream):
        # the turn's end can wait for its commit while the actor serves its next item.
        quiet = state.nested is None and state.signals is None and stream is None
        committing = handover is not None and quiet and outcome.reraise is None
        if not committing and (not quiet or actor.barriers):
            outcome = await _finalise(branch, state, outcome, reply, result)
        elif reply.rider is not None:
            ride(reply, result if outcome.result_kept else None, outcome.failure)
        actor.last_context_report = context.provider_report  # before its caller is answered
        end = TurnEnd(branch, state, outcome, reply, result, committing=committing)
        if committing:
            assert handover is not None
            handed = handover.hand_over_turn(branch, state, end)
        if not handed:
            end.announce()  # what end(None) does, in the turn's own context
            if not end.finished:  # async subscribers of its terminal: the caller after them
                with trio.CancelScope(shield=True):  # (bounded by FINALIZE_GRACE inside)
                    await end.wait()
    except BaseException as exc:  # a fault of the runtime itself: answer, then crash
        crashed = True
        outcome = Outcome(exc, reraise=exc)
        if run is not None and not state.suspended:
            run.end(exc, can_suspend=False)
    finally:
        actor.last_context_report = context.provider_report
        answering = actor.answering
        if not handed or answering is None or answering.state is not state:
            context.phase = "closed"  # the last phase: always forward
        # else its terminal's subscribers, later, see it finalizing: its commit closes it
        actor.turn = None
        if carried is not None:
            uncarry(carried)
        turn.unbind(token)
        if stream is not None:
            stream.close()
    try:
        if crashed and (end is None or not end.finished):
            if end is None:
                end = TurnEnd(branch, state, outcome, reply, result, committing=False)
            end.outcome = outcome  # the crash, not what the turn ended with
            end.answer()  # no terminal: the supervisor's to handle
        if outcome.reraise is not None:
            raise outcome.reraise
    finally:
        # A failure's traceback holds this frame: let go of the failure here, or
        # the two keep each other (and the whole turn) alive until a collection.
        # The meter too (this frame's, and every frame's of the turn that holds it).
        error = outcome = end = None
        meter.error = meter.on_trip = None  # the latter is the state's, which holds the meter


async def _finalise(
    branch: ServedBranch, state: turn.TurnState, outcome: Outcome, reply: Reply, result: Any
) -> Outcome:
    """End nested work, drain message signals, pass the turn's barriers (a store's
    commit): shielded and bounded. Returns the outcome the turn ends with.

    The envelope's commit rider (`pride.actors.riders`) is called right before
    the barriers, with no checkpoint between: what it queues is in their commit.

    Cut short by the bound, the turn's leftover signal deliveries are cancelled
    and its commit, if it had not ended, is made then, under a second bound: a
    barrier cut short is passed again (a store's stages nothing twice and waits
    for its commit once more). A turn still uncommitted after that fails, never
    answered ok. Its terminal follows (`TurnEnd`), once.
    """
    committed = not branch.actor.barriers
    name = branch.name
    turn_id = state.context.turn_id
    with trio.move_on_after(FINALIZE_GRACE) as guard:
        # Cancellation from outside must not strand the turn half-finalised.
        guard.shield = True
        if state.nested is not None:
            await state.nested.cancel_and_wait()
        if state.signals is not None:
            await state.signals.wait()
        outcome = _escalated(state, outcome)
        outcome = await _commit(branch, state, reply, result, outcome)
        committed = True
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
                outcome = await _commit(branch, state, reply, result, outcome)
                committed = True
        if not committed and outcome.failure is None:  # never answered ok uncommitted
            outcome = Outcome(uncommitted(branch))
    return outcome


async def _commit(
    branch: ServedBranch, state: turn.TurnState, reply: Reply, result: Any, outcome: Outcome
) -> Outcome:
    """The turn's commit: its envelope's rider, then the actor's barriers (a store's
    commit), with no checkpoint between. Returns the outcome the turn ends with: a
    barrier's failure fails a turn that had not failed (its messages may not be
    durable: the caller is told), and is logged either way."""
    if reply.rider is not None:
        ride(reply, result if outcome.result_kept else None, outcome.failure)
    for barrier in branch.actor.barriers or ():
        try:
            await barrier(state)
        except Exception as exc:
            turn_id, name = state.context.turn_id, branch.name
            log.error("turn %s of branch %r: %s", turn_id, name, exc, exc_info=exc)
            if outcome.failure is None:
                outcome = Outcome(exc)
    return outcome


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


def _end_journal_run(
    branch: ServedBranch, state: turn.TurnState, run: Any, outcome: Outcome
) -> Outcome:
    """End the turn's journal run; a run with calls waiting for approval suspends,
    and its caller gets ApprovalRequired (even if the operation swallowed it)."""
    can_suspend = outcome.reraise is None and not outcome.cancelled
    if not run.end(outcome.failure, can_suspend=can_suspend):
        return outcome
    state.suspended = True
    failure = outcome.failure
    if not (isinstance(failure, ApprovalRequired) and failure.turn_id == run.turn_id):
        failure = ApprovalRequired(run.turn_id, run.pending, branch.name)
    return Outcome(failure)


def _escalated(state: turn.TurnState, outcome: Outcome) -> Outcome:
    """The outcome once the turn's own tasks had their say: an Escalate from a
    nested task or an async hook escalates the turn (after it finalises)."""
    if outcome.reraise is not None:
        return outcome
    for group in (state.nested, state.signals):
        if group is not None and group.escalation is not None:
            return Outcome(group.escalation, reraise=group.escalation)
    return outcome


# ------------------------------------------------------------ shared with Act steps


def uncommitted(branch: ServedBranch) -> StoreError:
    """The error (logged) for work whose commit did not finish within FINALIZE_GRACE."""
    message = (
        f"branch {branch.name!r}: the commit of its messages did not finish within "
        f"{FINALIZE_GRACE}s; they may not be durable"
    )
    log.error("%s", message)
    return StoreError(message)


def meter_for(branch: ServedBranch, command: WorkCommand, reply: Reply) -> Meter:
    """The allowance of one work item of ``branch``: its command's budget, else its
    branch's, drawing on the allowance its envelope carries (a flow's), if any."""
    budget = command.budget if command.budget is not None else branch.budget
    return Meter(budget, branch.actor.account, carried=reply.allowance)
