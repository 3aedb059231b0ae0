"""A run's node signals: made from a node's state, handed to its listeners and observer.

Each node gets exactly one ``NodeStarted`` (when its command is sent) and one
terminal signal (``NodeCompleted``, ``NodeFailed``, ``NodeSkipped`` or
``NodeCancelled``); a node that never started gets its terminal only. The
listeners (a ``flow_stream``) see a signal before the observer does, and a
run waits, bounded, for the observer's asynchronous subscribers, so signals
arrive in the order the run made them.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

import trio

from ..actors.turn import FINALIZE_GRACE, await_bounded
from ..messages import (
    NodeCancelled,
    NodeCompleted,
    NodeFailed,
    NodeSignal,
    NodeSkipped,
    NodeStarted,
    Signal,
)
from .state import NodeState

__all__ = ["SignalOut"]

log = logging.getLogger("pride.flows")


class SignalOut:
    """Where a run's node signals go: its listeners, then the session's observer."""

    __slots__ = ("flow_id", "flow_name", "listeners", "observer", "started_at")

    def __init__(self, flow_id: UUID, flow_name: str | None, observer: Any) -> None:
        self.flow_id = flow_id
        self.flow_name = flow_name
        self.observer = observer
        self.listeners: list[Callable[[Signal], None]] = []
        self.started_at = 0.0

    @property
    def wanted(self) -> bool:
        """True when a signal made now would reach someone (a stream, a subscriber):
        a run with nobody listening makes none (looked at for each signal, since
        subscriptions come and go)."""
        if self.listeners:
            return True
        observer = self.observer
        return observer is not None and not getattr(observer, "idle", False)

    def make(self, kind: type[NodeSignal], state: NodeState, **fields: Any) -> Any:
        """A ``kind`` signal about ``state``'s node."""
        return kind(
            branch_id=state.branch_id,
            branch_name=state.label,
            flow_id=self.flow_id,
            flow_name=self.flow_name,
            node=state.name,
            elapsed=trio.current_time() - self.started_at,
            depends_on=state.node.depends_on,
            spawned_by=state.node.spawned_by,
            **fields,
        )

    def terminal(self, state: NodeState) -> NodeSignal:
        """The terminal signal of a node that has ended."""
        duration = state.duration
        if state.phase == "completed":
            return self.make(NodeCompleted, state, turn_id=state.turn_id, duration=duration)  # type: ignore[no-any-return]
        if state.phase == "failed":
            error = state.error
            return self.make(  # type: ignore[no-any-return]
                NodeFailed,
                state,
                turn_id=state.turn_id,
                duration=duration,
                error_type=type(error).__name__ if error is not None else "",
                error_message=str(error) if error is not None else "",
            )
        if state.phase == "cancelled":
            return self.make(  # type: ignore[no-any-return]
                NodeCancelled,
                state,
                turn_id=state.turn_id,
                duration=duration,
                reason=state.reason or "",
            )
        return self.make(NodeSkipped, state, reason=state.reason or "")  # type: ignore[no-any-return]

    async def started(self, state: NodeState, command: str) -> None:
        """Emit ``state``'s ``NodeStarted`` (its command was sent), if anyone listens."""
        if self.wanted:
            await self.emit(self.make(NodeStarted, state, command=command))

    async def ended(self, state: NodeState, *, deadline: float | None = None) -> bool:
        """Emit ``state``'s terminal signal, if anyone listens (see `emit`)."""
        if self.wanted:
            return await self.emit(self.terminal(state), deadline=deadline)
        return False

    async def skipped(self, states: collections.deque[NodeState], label: str) -> None:
        """Emit the terminal signal of each of ``states`` (taken off it in order):
        the nodes one that did not complete has skipped, maybe thousands.

        Their asynchronous subscribers share one FINALIZE_GRACE, as a turn's
        signals do, so a subscriber that hangs costs the cascade one grace
        period, not one per node (the run also announces this way, shielded,
        when its caller cancels it). Once it is spent, each later delivery is
        cancelled at its subscribers' first checkpoint (logged once, naming the
        flow by ``label``).
        """
        deadline = trio.current_time() + FINALIZE_GRACE
        cut = 0
        while states:
            if await self.ended(states.popleft(), deadline=deadline):
                cut += 1
        if cut:
            log.error(
                "flow %s: observers of NodeSkipped took over %ss; %d deliveries were cancelled",
                label,
                FINALIZE_GRACE,
                cut,
            )

    async def emit(self, signal: NodeSignal, *, deadline: float | None = None) -> bool:
        """Hand ``signal`` to the listeners and the observer; wait (bounded) for the
        observer's asynchronous subscribers, if it has any for this signal.

        They get FINALIZE_GRACE, or until ``deadline`` (a bound several signals
        share, logged by the caller); past it they are cancelled.

        Returns:
            True when subscribers were cancelled at ``deadline``.
        """
        for listener in self.listeners:
            listener(signal)
        observer = self.observer
        pending = observer.dispatch(signal) if observer is not None else None
        if pending is None:
            return False
        if deadline is None:
            await await_bounded(pending, f"observers of {type(signal).__name__}", log)
            return False
        with trio.move_on_at(deadline) as bound:
            await pending
        return bound.cancelled_caught
