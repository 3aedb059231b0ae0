"""Turns answered by their commit: the actor hands a finished turn to the store's
commit and serves its next item meanwhile.

A branch with a store ends every turn (and every ``Act``) with a commit of
what it recorded: its caller is answered ok only once that commit succeeded
(DESIGN.md, "What pride trusts"). Waiting for it in the actor's own task
costs a wake-up of every actor for every commit, and lines the waiting
actors up behind the commit's lock. Instead, a turn with nothing left to end
under a shield (no nested tasks, no signal deliveries, not a stream) hands
its end to the commit: the `CommitBarrier` queues the turn's rows at once
and asks the store to call back once they are durable
(`BranchStore.after_commit`). When the commit ends, every turn of its
batch is ended in one pass, in queue order, in the event loop's thread: the
turn is counted on the session's accounts, its terminal signal is
dispatched (if a subscriber may want it), its trace is ended and its caller
is answered, with ``StoreError`` if the commit failed. Nothing of the order
a caller sees changes: still committed before answered, still the terminal
before the answer.

Meanwhile the actor serves its next item. A later turn of the branch built
on an earlier one still in flight queues its rows behind the earlier ones;
a commit of the branch's rows that fails fails the turns whose rows it held
and every turn that was waiting behind it (as ``flush`` does), and serving
goes on. When a subscriber may see the turn's terminal, the actor waits for
it before it takes the next item, so each branch's signals keep their order
(a turn's terminal before the next turn's ``RunStart``); nobody watching,
nothing waits.

A turn that recorded nothing (and whose branch has nothing in flight) has
nothing to wait for: it ends at once, in the actor's task, with no cancel
scope and no task switch (an ``Act`` with no tool call, a ``Chat``).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from ..messages import RunEnd, RunFailed, RunSuspended
from . import wiring
from .ending import ENDED, Outcome, answer, ended_kind, terminal

if TYPE_CHECKING:
    from .actor import Actor
    from .mailbox import Reply
    from .turn import TurnState

__all__ = ["CommitBarrier", "Handoff", "deferrable", "hand_over_step", "hand_over_turn"]

log = logging.getLogger("pride.actor")


class CommitBarrier:
    """A turn barrier that commits what the turn recorded (a store's), in two halves
    so that the actor need not wait for it.

    Awaited (``await barrier(state)``) it is an ordinary barrier: `stage`, then
    wait for the commit. The actor uses the halves instead when it can:
    `stage` (synchronous) queues what the turn left, then `after_commit`
    arranges a callback for when it is durable.

    Args:
        stage: ``stage(state)`` queues what the turn (``state``; None after an
            ``Act``) left to commit.
        after_commit: ``after_commit(done)`` calls ``done(failure)`` later, once
            what was staged is durable (``failure`` None) or its commit failed;
            returns False (calling nothing) if nothing waits for a commit.
        flush: waits until what was staged is durable (raises ``StoreError``
            if its commit failed).

    The halves are the callables themselves, called with no layer between
    (every turn of a stored branch calls both).
    """

    __slots__ = ("after_commit", "flush", "stage")

    def __init__(
        self,
        stage: Callable[[TurnState | None], None],
        after_commit: Callable[[Callable[[Exception | None], None]], bool],
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self.stage = stage
        self.after_commit = after_commit
        self.flush = flush

    async def __call__(self, state: TurnState | None) -> None:
        """Stage, and wait for the commit.

        Raises:
            StoreError: the commit failed.
        """
        self.stage(state)
        await self.flush()


def deferrable(actor: Actor) -> CommitBarrier | None:
    """The actor's one barrier, if it is a `CommitBarrier` (else None: the turn
    awaits its barriers itself)."""
    barriers = actor.barriers
    if barriers is not None and len(barriers) == 1 and isinstance(barriers[0], CommitBarrier):
        return barriers[0]
    return None


class Handoff:
    """A turn handed to its commit: ended and answered when the commit ends.

    It keeps only what ending the turn needs: the turn's state (what its
    terminal and trace report) only when a subscriber may want the terminal or
    the turn is traced, so a turn nobody watches lets go of its state, its
    journal run and its context as soon as its actor is done with them (they
    would otherwise outlive the round of turns a commit waits for, and burden
    the garbage collector's young generations).

    ``finished`` turns True once its caller was answered; `wait` waits for it
    (the actor does, before its next item, when the terminal may be watched).

    The commit's completion calls it outside any task (a callback of trio's
    run loop, `pride.store._queue`), where anything raised would crash the
    whole run: so whatever fails in ending the turn (a subscriber raising even
    a BaseException, a nursery gone for async subscribers, a tracer) is
    logged, and the caller is answered all the same. Subscribers of a watched
    turn's terminal run in the turn's own context, captured at the hand-over,
    as they did when the actor waited for its commit: ``pride.current_turn()``
    is the turn, still finalizing (it closes once they ran), a name they send
    to resolves in the turn's session, and what they send carries the turn's
    budget and trace. Only the task differs: ``trio.lowlevel.current_task()``
    is trio's, not the actor's (see docs/durability.md).
    """

    __slots__ = (
        "above",
        "actor",
        "context",
        "finished",
        "observer",
        "outcome",
        "reply",
        "result",
        "state",
        "suspended",
        "waiter",
    )

    def __init__(
        self,
        actor: Actor,
        state: TurnState | None,
        outcome: Outcome,
        reply: Reply,
        result: Any,
        *,
        suspended: bool,
    ) -> None:
        self.actor = actor
        self.state = state
        self.outcome = outcome
        self.reply = reply
        self.result = result
        self.suspended = suspended
        # What the turn ran attached to: a Detach served meanwhile changes the actor's.
        self.observer = actor.observer if state is not None else None
        self.above = actor.account.parent
        self.finished = False
        self.waiter: trio.lowlevel.Task | None = None
        # The turn's context (its binding, budget, trace) for its terminal's subscribers.
        self.context: contextvars.Context | None = None

    def __call__(self, failure: Exception | None) -> None:
        """The commit is over (``failure`` None: durable): end the turn. Never raises."""
        outcome = self.outcome
        if failure is None and self.state is None and outcome.failure is None:
            # Durable, nobody watching, not traced (every turn of a busy store): count
            # it and answer, as `_announce` and `_answer` would.
            try:
                if self.above is not None:
                    self.above.count_turn("done")
                self.reply.succeed(self.result if outcome.result_kept else None)
            except BaseException:  # outside any task: raised, it would crash the run
                log.exception(
                    "ending turn %s of branch %r failed", self.reply.turn_id, self.actor.branch.name
                )
            finally:
                self.finished = True
            return
        if failure is not None:
            # The turn's messages may not be durable: say so to the caller.
            name = self.actor.branch.name
            log.error("turn %s of branch %r: %s", self.reply.turn_id, name, failure)
            if outcome.failure is None:
                outcome = Outcome(failure)
        try:
            context = self.context
            if context is None:
                self._announce(outcome)
            else:
                context.run(self._announce, outcome)
        except BaseException:  # outside any task: raised, it would crash the run
            log.exception(
                "ending turn %s of branch %r failed", self.reply.turn_id, self.actor.branch.name
            )
            self._answer(outcome)

    def _announce(self, outcome: Outcome) -> None:
        """Count the turn, dispatch its terminal, then answer (after async subscribers)."""
        kind = ended_kind(outcome, suspended=self.suspended)
        if self.above is not None:
            self.above.count_turn(ENDED[kind])
        state, observer = self.state, self.observer
        pending = signal = None
        if state is not None and observer is not None and wiring.wants(observer, kind):
            signal = terminal(self.actor, state, outcome, kind)
            try:
                pending = observer.dispatch(signal)
            except BaseException:  # even KeyboardInterrupt-like: outside any task
                log.exception(
                    "observer failed on %s of branch %r", kind.__name__, self.actor.branch.name
                )
        if pending is None:
            self._answer(outcome)
            return
        host = self.actor.host or (state.host if state is not None else None)
        try:
            if host is None:
                raise RuntimeError("its actor has stopped")
            host.start_soon(self._after_subscribers, signal, pending, outcome)
        except RuntimeError:  # the actor's nursery is gone (its session closing): trio's own
            trio.lowlevel.spawn_system_task(
                self._after_subscribers,
                signal,
                pending,
                outcome,
                context=contextvars.copy_context(),
            )

    async def _after_subscribers(self, signal: Any, pending: Any, outcome: Outcome) -> None:
        """Wait for the terminal's async subscribers, then answer. Never raises (it
        may run as a system task, whose exception would crash the run)."""
        try:
            with trio.CancelScope(shield=True):  # bounded by FINALIZE_GRACE inside
                await wiring.await_lifecycle(self.actor, signal, pending)
        except BaseException:
            log.exception("async subscribers of a terminal of %r failed", self.actor.branch.name)
        finally:
            self._answer(outcome)

    def _answer(self, outcome: Outcome) -> None:
        if self.finished:
            return
        try:
            answer(self.state, outcome, self.reply, self.result)
        except BaseException:  # a tracer's fault: the caller is answered all the same
            log.exception(
                "ending turn %s of branch %r failed", self.reply.turn_id, self.actor.branch.name
            )
            answer(None, outcome, self.reply, self.result)
        finally:
            self.finished = True
            if self.context is not None and self.state is not None:
                self.state.context.phase = "closed"  # its subscribers ran: now it is over
            waiter, self.waiter = self.waiter, None
            if waiter is not None:
                trio.lowlevel.reschedule(waiter)

    async def wait(self) -> None:
        """Wait until the turn's caller was answered (its terminal dispatched).

        Cancellation: a cancelled wait leaves the turn to its commit.
        """
        if self.finished:
            return
        self.waiter = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self.waiter = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


def hand_over_turn(
    actor: Actor,
    state: TurnState,
    outcome: Outcome,
    reply: Reply,
    result: Any,
    *,
    barrier: CommitBarrier,
) -> Outcome | None:
    """Stage the turn's commit and hand the turn to it; None if it was handed over
    (the commit ends it), else the outcome to end it with now (nothing to wait
    for, or staging failed)."""
    try:
        barrier.stage(state)
    except Exception as exc:
        log.error("turn %s of branch %r: %s", state.context.turn_id, actor.branch.name, exc)
        return outcome if outcome.failure is not None else Outcome(exc)
    observer = actor.observer
    watched = observer is not None and _watched(observer, outcome, state.suspended)
    kept = state if watched or state.trace is not None else None
    handoff = Handoff(actor, kept, outcome, reply, result, suspended=state.suspended)
    if not barrier.after_commit(handoff):
        return outcome
    reply.start(reply.turn_id, None)  # a caller giving up now cancels nothing of the actor's
    if watched:
        handoff.context = contextvars.copy_context()  # what its subscribers see (the turn's)
        actor.answering = handoff  # its terminal goes before the branch's next signal
    if state.trace is not None:  # the span ends later, its context is restored here, now
        state.trace.leave()
    return None


def _watched(observer: Any, outcome: Outcome, suspended: bool) -> bool:
    """Whether a subscriber may see the terminal the turn will end with: its own
    kind, or ``RunFailed`` for a success whose commit may yet fail (a suspended
    turn's terminal is a ``RunSuspended`` either way, a ``RunFailed`` too)."""
    wants = wiring.wants  # every turn handed over asks: no generator
    if outcome.failure is None:
        return wants(observer, RunEnd) or wants(observer, RunFailed)
    return wants(observer, RunSuspended if suspended else RunFailed)


def hand_over_step(actor: Actor, reply: Reply, result: Any, barrier: CommitBarrier) -> None:
    """Stage an ``Act``'s commit and answer it once that is durable (at once if
    nothing waits for a commit)."""
    try:
        barrier.stage(None)
    except Exception as exc:
        log.error("an Act of branch %r: %s", actor.branch.name, exc, exc_info=exc)
        reply.fail(exc)
        return
    name = actor.branch.name

    def done(failure: Exception | None) -> None:
        if failure is None:
            reply.succeed(result)
            return
        log.error("an Act of branch %r: %s", name, failure)
        reply.fail(failure)

    if barrier.after_commit(done):
        reply.start(None, None)
    else:
        reply.succeed(result)
