"""A turn's end: its outcome, its terminal signal, and the answer its caller gets.

The turn driver (`pride.actors.lifecycle`) classifies how the operation
ended into an `Outcome`; a `TurnEnd` then ends the turn: counted on the
accounts above the branch, its terminal signal (``RunEnd``, ``RunFailed`` or
``RunSuspended``, built only if a subscriber may want it), its trace, and the
answer to its caller. It is the one end-of-turn path: the driver calls it at
once, or hands it to the store's commit (`pride.durable.commit`), which calls
it when the commit ends.
"""

from __future__ import annotations

import contextvars
import logging
import time
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import Escalate, StopStream, TurnCancelled
from ..messages import RunEnd, RunFailed, RunSuspended, Signal
from . import wiring

if TYPE_CHECKING:
    from .actor import HandedTurn, ServedBranch
    from .reply import Reply
    from .turn import TurnState

__all__ = ["ENDED", "SUCCESS", "Outcome", "TurnEnd", "classify", "terminal"]

log = logging.getLogger("pride.actor")


@attrs.frozen
class Outcome:
    """How a turn ended, as its caller and its terminal see it."""

    failure: BaseException | None  # what the caller receives, None on success
    cancelled: bool = False
    result_kept: bool = True
    reraise: BaseException | None = None  # escapes the actor loop after answering


SUCCESS = Outcome(None)


def classify(error: BaseException | None, reply: Reply) -> Outcome:
    """The outcome of a turn whose operation ended with ``error`` (None: returned)."""
    if error is None:
        return SUCCESS
    if isinstance(error, StopStream):
        return Outcome(None, result_kept=False)
    if isinstance(error, trio.Cancelled):
        if reply.cancel_reason is not None:
            reason = reply.cancel_reason
            if reason == "stream_closed":
                return Outcome(None, result_kept=False)
            return Outcome(TurnCancelled(reason), cancelled=True)
        # The actor itself is being cancelled from outside: finalise, then let it go.
        return Outcome(TurnCancelled("shutdown"), cancelled=True, reraise=error)
    if isinstance(error, Escalate):
        return Outcome(error, reraise=error)
    if isinstance(error, Exception):
        return Outcome(error)
    return Outcome(error, reraise=error)  # KeyboardInterrupt and friends


class TurnEnd:
    """The end of one turn, the one way every turn ends: counted on the accounts
    above its branch, its terminal signal dispatched (built only if a subscriber
    may want it), its trace ended and its caller answered.

    The driver (`pride.actors.lifecycle`) makes one once the turn's outcome is
    known and its shielded finalisation is over, and either calls it at once
    (``end(None)``) or hands it to the store's commit (`pride.durable.commit`),
    which calls it with the commit's failure (None: durable) when the commit
    ends, in a callback of trio's run loop. Either way the same code runs.

    It keeps only what ending the turn needs: the turn's state (what its
    terminal and trace report) only when a subscriber may want the terminal or
    the turn is traced, so a turn nobody watches lets go of its state, its
    journal run and its context as soon as its actor is done with them (a
    handed-over turn's would otherwise outlive the round of turns a commit
    waits for, and burden the garbage collector's young generations).

    Async subscribers of the terminal are awaited in a task of the actor's
    nursery (bounded by ``FINALIZE_GRACE``), and the caller is answered after
    them; ``finished`` turns True once it was answered, and `wait` waits for
    that (the driver does before the turn leaves it; the actor loop, for a
    watched turn handed to its commit, before its next item, so each branch's
    signals keep their order).

    Called outside any task (the commit's callback), anything raised would
    crash the whole run: so whatever fails in ending the turn (a subscriber
    raising even a BaseException, a nursery gone for async subscribers, a
    tracer) is logged, and the caller is answered all the same. Subscribers of
    a handed-over turn's terminal run in the turn's own context, captured at
    the hand-over (``context``): ``pride.current_turn()`` is the turn, still
    finalizing (it closes once they ran), a name they send to resolves in the
    turn's session, and what they send carries the turn's budget and trace.
    Only the task differs: ``trio.lowlevel.current_task()`` is trio's, not the
    actor's (see docs/durability.md).
    """

    __slots__ = (
        "above",
        "branch",
        "context",
        "finished",
        "kind",
        "observer",
        "outcome",
        "reply",
        "result",
        "shown",
        "shown_uncommitted",
        "state",
        "waiter",
        "watched",
    )

    def __init__(
        self,
        branch: ServedBranch,
        state: TurnState,
        outcome: Outcome,
        reply: Reply,
        result: Any,
        *,
        committing: bool,
    ) -> None:
        """The end of ``branch``'s turn ``state``, once its outcome is known.

        Args:
            branch: the branch whose turn it is.
            state: the turn's state.
            outcome: how it ended.
            reply: its envelope, answered at the end.
            result: the operation's result.
            committing: a commit may yet fail the turn (its end is handed to the
                commit), so whether a subscriber wants a ``RunFailed`` matters too.
        """
        actor = branch.actor
        observer = actor.observer
        # A success ends with RunEnd, a turn waiting for approval with RunSuspended.
        kind = RunEnd if outcome.failure is None else RunSuspended if state.suspended else RunFailed
        self.branch = branch
        self.kind = kind
        if observer is None:  # nobody to show a terminal to, committed or not
            self.shown = self.shown_uncommitted = watched = False
        else:
            shown = self.shown = actor.wants(kind)
            if committing and kind is RunEnd:  # a failed commit turns it into a RunFailed
                self.shown_uncommitted = actor.wants(RunFailed)
            else:
                self.shown_uncommitted = shown
            watched = shown or self.shown_uncommitted
        self.state: TurnState | None = state if watched or state.trace is not None else None
        # What the turn ran attached to: a Detach served meanwhile changes the actor's.
        self.observer = observer if watched else None
        self.watched = watched
        """Whether a subscriber may see the terminal the turn will end with."""
        self.outcome = outcome
        self.reply = reply
        self.result = result
        self.above = actor.account.parent
        self.finished = False
        self.waiter: trio.lowlevel.Task | None = None
        # The turn's context (its binding, budget, trace), for a handed-over turn's subscribers.
        self.context: contextvars.Context | None = None

    def uncommitted(self, failure: Exception) -> None:
        """What the turn recorded may not be durable (its commit failed, or could
        not be staged): logged, and the turn fails with ``failure`` unless it
        failed already."""
        log.error("turn %s of branch %r: %s", self.reply.turn_id, self.branch.name, failure)
        if self.outcome.failure is None:
            self.outcome = Outcome(failure)
            self.kind = RunFailed
            self.shown = self.shown_uncommitted

    def __call__(self, failure: Exception | None) -> None:
        """End the turn (``failure``: its commit's, None if durable or nothing to
        commit). Never raises."""
        if failure is not None:
            self.uncommitted(failure)
        try:
            context = self.context
            if context is None:
                self.announce()
            else:
                context.run(self.announce)
        except BaseException:  # outside any task: raised, it would crash the run
            log.exception(
                "ending turn %s of branch %r failed", self.reply.turn_id, self.branch.name
            )
            self.answer()

    def announce(self) -> None:
        """End the turn now, in the caller's context: count it, dispatch its terminal,
        then answer (after async subscribers). What the driver calls for a turn
        with nothing to commit; `__call__` is the commit's way in."""
        kind = self.kind
        state, observer = self.state, self.observer
        pending = signal = None
        if self.shown and state is not None and observer is not None:
            # Built before the count, dispatched after it: this module's work in one go.
            signal = terminal(self.branch, state, self.outcome, kind)
        if self.above is not None:
            self.above.count_turn(ENDED[kind])
        if signal is not None and observer is not None:
            try:
                pending = observer.dispatch(signal)
            except BaseException:  # even KeyboardInterrupt-like: outside any task
                log.exception("observer failed on %s of branch %r", kind.__name__, self.branch.name)
        if pending is None:
            self.answer()
            return
        host = self.branch.actor.host or (state.host if state is not None else None)
        try:
            if host is None:
                raise RuntimeError("its actor has stopped")
            host.start_soon(self._after_subscribers, signal, pending)
        except RuntimeError:  # the actor's nursery is gone (its session closing): trio's own
            trio.lowlevel.spawn_system_task(
                self._after_subscribers, signal, pending, context=contextvars.copy_context()
            )

    async def _after_subscribers(self, signal: Any, pending: Any) -> None:
        """Wait for the terminal's async subscribers, then answer. Never raises (it
        may run as a system task, whose exception would crash the run)."""
        try:
            with trio.CancelScope(shield=True):  # bounded by FINALIZE_GRACE inside
                await wiring.await_lifecycle(self.branch, signal, pending)
        except BaseException:
            log.exception("async subscribers of a terminal of %r failed", self.branch.name)
        finally:
            self.answer()

    def answer(self) -> None:
        """End the turn's trace (if traced), then answer its caller; once.

        `announce` and the commit's callback end with it; a crash of the runtime
        itself (no terminal: the supervisor's to handle) answers with it alone.
        """
        if self.finished:
            return
        self.finished = True
        outcome, state, reply = self.outcome, self.state, self.reply
        try:
            if state is not None and state.trace is not None:  # ended before the answer
                state.trace.end(outcome.failure, outcome.cancelled, state.meter.usage())
        except BaseException:  # a tracer's fault: the caller is answered all the same
            log.exception("ending turn %s of branch %r failed", reply.turn_id, self.branch.name)
        if outcome.failure is None:
            reply.succeed(self.result if outcome.result_kept else None)
        else:
            reply.fail(outcome.failure)
        if state is not None:
            state.context.phase = "closed"  # its subscribers ran: now it is over
        waiter, self.waiter = self.waiter, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)

    async def wait(self) -> None:
        """Wait until the turn's caller was answered (its terminal dispatched).

        Cancellation: a cancelled wait leaves the turn to end by itself.
        """
        if self.finished:
            return
        self.waiter = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self.waiter = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


ENDED: dict[type[Signal], str] = {RunEnd: "done", RunFailed: "failed", RunSuspended: "suspended"}
"""How `Account.count_turn` names the end of a turn whose terminal is of a class."""


def terminal(
    branch: ServedBranch, state: TurnState, outcome: Outcome, kind: type[Signal]
) -> Signal:
    """The terminal signal of kind ``kind`` for the turn of ``branch``."""
    used = state.meter  # the turn's usage: read off its meter, not through the state
    # What every terminal says: whose turn, how long, and the work it did.
    common: dict[str, Any] = {
        "branch_id": branch.id,
        "branch_name": branch.name,
        "turn_id": state.context.turn_id,
        "duration_ms": (time.perf_counter() - state.started_at) * 1000.0,
        "input_tokens": used.input_tokens,
        "output_tokens": used.output_tokens,
        "cached_tokens": used.cached_tokens,
        "cache_write_tokens": used.cache_write_tokens,
        "reasoning_tokens": used.reasoning_tokens,
        "total_cost_usd": used.cost_usd,
        "model_calls": used.model_calls,
        "tool_calls": used.tool_calls,
    }
    if kind is RunEnd:
        return RunEnd(**common)
    failure = outcome.failure
    error: dict[str, Any] = {"error_type": type(failure).__name__, "error_message": str(failure)}
    if kind is RunSuspended:
        assert state.journal is not None
        pending = tuple(call.call_id for call in state.journal.pending)
        return RunSuspended(**common, **error, pending=pending)
    return RunFailed(**common, **error, cancelled=outcome.cancelled)


if TYPE_CHECKING:

    def _implements_handed_turn(end: TurnEnd) -> HandedTurn:
        return end  # mypy checks here that a TurnEnd is what a commit hand-over holds
