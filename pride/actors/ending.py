"""A turn's end: its outcome, its terminal signal, and the answer its caller gets.

The turn driver (`pride.actors.lifecycle`) classifies how the operation
ended into an `Outcome`; the end is then announced (counted on the accounts
above the branch, and the terminal signal, ``RunEnd``, ``RunFailed`` or
``RunSuspended``, built only if a subscriber may want it) and the reply is
answered. Both the driver and a turn answered by its commit
(`pride.actors.commit`) end a turn through here.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import Escalate, StopStream, TurnCancelled
from ..messages import RunEnd, RunFailed, RunSuspended, Signal
from . import wiring

if TYPE_CHECKING:
    from .actor import Actor
    from .mailbox import Reply
    from .turn import TurnState

__all__ = [
    "ENDED",
    "SUCCESS",
    "Outcome",
    "announce",
    "answer",
    "classify",
    "counted",
    "ended_kind",
    "terminal",
    "terminal_kind",
]

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


async def announce(actor: Actor, state: TurnState, outcome: Outcome) -> None:
    """The turn's end: counted on the accounts above its branch (what a session's
    statistics report), then its terminal signal, built only if a subscriber may
    want it. Waiting for async subscribers is shielded (and bounded)."""
    signal = counted(actor, state, outcome)
    if signal is None:
        return
    pending = wiring.dispatch_lifecycle(actor, signal)
    if pending is not None:
        with trio.CancelScope(shield=True):
            await wiring.await_lifecycle(actor, signal, pending)


def counted(actor: Actor, state: TurnState, outcome: Outcome) -> Signal | None:
    """Count the turn's end on the accounts above its branch; return its terminal
    signal to dispatch, or None when no subscriber could want it."""
    kind = terminal_kind(state, outcome)
    above = actor.account.parent
    if above is not None:
        above.count_turn(ENDED[kind])
    observer = actor.observer
    if observer is None or not wiring.wants(observer, kind):
        return None
    return terminal(actor, state, outcome, kind)


def answer(state: TurnState | None, outcome: Outcome, reply: Reply, result: Any) -> None:
    """End the turn's trace (if traced), then answer its caller."""
    if state is not None and state.trace is not None:  # ended before the caller is answered
        state.trace.end(outcome.failure, outcome.cancelled, state.meter.usage())
    if outcome.failure is None:
        reply.succeed(result if outcome.result_kept else None)
    else:
        reply.fail(outcome.failure)


ENDED: dict[type[Signal], str] = {RunEnd: "done", RunFailed: "failed", RunSuspended: "suspended"}
"""How `Account.count_turn` names the end of a turn whose terminal is of a class."""


def terminal_kind(state: TurnState, outcome: Outcome) -> type[Signal]:
    """``RunEnd`` for a success, ``RunSuspended`` for a turn waiting for approval,
    else ``RunFailed``."""
    return ended_kind(outcome, suspended=state.suspended and state.journal is not None)


def ended_kind(outcome: Outcome, *, suspended: bool) -> type[Signal]:
    """`terminal_kind` from the outcome and whether the turn stopped for approval."""
    if outcome.failure is None:
        return RunEnd
    return RunSuspended if suspended else RunFailed


def terminal(actor: Actor, state: TurnState, outcome: Outcome, kind: type[Signal]) -> Signal:
    """The terminal signal of kind ``kind`` for the turn."""
    branch = actor.branch
    # What every terminal says: whose turn, how long, and the work it did.
    common: dict[str, Any] = {
        "branch_id": branch.id,
        "branch_name": branch.name,
        "turn_id": state.context.turn_id,
        "duration_ms": (time.perf_counter() - state.started_at) * 1000.0,
        "input_tokens": state.input_tokens,
        "output_tokens": state.output_tokens,
        "cached_tokens": state.cached_tokens,
        "cache_write_tokens": state.cache_write_tokens,
        "reasoning_tokens": state.reasoning_tokens,
        "total_cost_usd": state.cost_usd,
        "model_calls": state.model_calls,
        "tool_calls": state.tool_calls,
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
