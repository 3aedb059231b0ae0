"""What the tree has been doing, as ``GET /v1/branches`` reports it: turns and restarts.

A branch knows its turn in flight (``active_turn_id``) but not since when,
nor how often its supervisor restarted it, nor what its last turn cost. An
`Activity` learns those from the session's signals (``RunStart``,
``RunEnd``, ``RunFailed``, ``BranchRestarted``) from the moment the server is
built, so a view opened late (the console) shows a running turn's elapsed
time, the restarts so far and the last outcome without having watched them.

Times are kept on trio's clock for elapsed seconds (immune to the wall
clock's steps); what the answer carries is elapsed seconds, never an instant,
so a browser on another machine needs no synchronised clock.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any
from uuid import UUID

import attrs
import trio

from ..messages import (
    BranchPassivated,
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    RunEnd,
    RunFailed,
    RunStart,
    RunSuspended,
    Signal,
)

__all__ = ["Activity", "LastTurn"]


@attrs.frozen
class LastTurn:
    """How a branch's last finished turn ended.

    Attributes:
        turn_id: the turn.
        outcome: ``"done"``, ``"failed"``, ``"cancelled"`` or ``"suspended"``
            (waiting for approval).
        cost_usd: its cost, None when no model priced or reported it.
        input_tokens, output_tokens: its tokens.
        duration_ms: how long it ran.
        error_type: the error's class name for a turn that did not end done.
    """

    turn_id: str | None
    outcome: str
    cost_usd: float | None
    input_tokens: int
    output_tokens: int
    duration_ms: float
    error_type: str | None = None

    def describe(self) -> dict[str, Any]:
        """This record as plain JSON data."""
        return attrs.asdict(self)


class Activity:
    """Turn starts, restarts and last outcomes per branch, learnt from signals.

    ``watch(session)`` subscribes; ``close()`` unsubscribes. Branches are keyed
    by id, which a restart keeps; a branch that leaves the tree (stopped, removed,
    passivated) is forgotten, so the records are bounded by the tree's branches. A
    branch stopped by a group restart (``BranchStopped(reason="shutdown")``, then
    ``BranchRestarted``) keeps its records: its restarts count on, its last turn stays.

    Args:
        ignored: ids of branches never reported, whose signals are not kept
            (the OpenAI endpoint's transient clones: one per request, each
            with a fresh id; kept, their last turns grew without bound).
    """

    def __init__(self, ignored: Container[UUID] = ()) -> None:
        self._ignored = ignored
        self._started: dict[UUID, tuple[UUID | None, float]] = {}
        self._restarts: dict[UUID, int] = {}
        self._last: dict[UUID, LastTurn] = {}
        self._held: set[UUID] = set()  # stopped by a "shutdown": gone, or about to restart
        self._session: Any = None

    def watch(self, session: Any) -> None:
        """Follow ``session``'s tree from now on."""
        self._session = session
        session.observe(
            RunStart,
            RunEnd,
            RunFailed,
            BranchStarted,
            BranchRestarted,
            BranchStopped,
            BranchPassivated,
            handler=self._on_signal,
        )

    def close(self) -> None:
        """Stop following (idempotent)."""
        if self._session is not None:
            self._session.unobserve(self._on_signal)
            self._session = None

    def _on_signal(self, signal: Signal) -> None:
        branch = signal.branch_id
        if branch is None or branch in self._ignored:
            return
        if isinstance(signal, BranchPassivated) or (
            isinstance(signal, BranchStopped) and signal.reason == "normal"
        ):
            # It left the tree (a remove, a Stop, a passivation): kept, a virtual
            # branch's records outlived it, one set per name ever used.
            self._forget(branch)
            self._prune_held()
        elif isinstance(signal, BranchStopped) and signal.reason == "shutdown":
            # A shutdown, or a sibling halted for a one_for_all / rest_for_one restart
            # (or its session's restart), which BranchRestarted follows: the signal does
            # not say which, and forgetting it here reset a restarted sibling's count and
            # lost its last turn. Held until it restarts or is seen gone from the tree.
            self._held.add(branch)
        elif isinstance(signal, BranchStarted):
            self._held.discard(branch)
        elif isinstance(signal, BranchRestarted):
            self._held.discard(branch)
            self._restarts[branch] = self._restarts.get(branch, 0) + 1
            self._started.pop(branch, None)
        elif isinstance(signal, RunStart):
            self._started[branch] = (signal.turn_id, trio.current_time())
        elif isinstance(signal, RunEnd | RunFailed):
            started = self._started.get(branch)
            if started is not None and started[0] == signal.turn_id:
                del self._started[branch]
            self._last[branch] = _last_turn(signal)
        # A crash keeps the records: its restart (or its stopped place in the tree) follows.

    def _forget(self, branch: UUID) -> None:
        self._held.discard(branch)
        self._started.pop(branch, None)
        self._restarts.pop(branch, None)
        self._last.pop(branch, None)

    def _prune_held(self) -> None:
        """Forget the held branches no longer in the tree (a removed child session's)."""
        if not self._held or self._session is None:
            return
        live = {branch.id for branch in _tree_branches(self._session)}
        for branch in self._held - live:
            self._forget(branch)

    def restarts(self, branch: UUID) -> int:
        """How many times ``branch`` was restarted since the server was built."""
        return self._restarts.get(branch, 0)

    def elapsed(self, branch: UUID, turn_id: UUID | None) -> float | None:
        """Seconds the turn ``turn_id`` of ``branch`` has been running, if it was seen start."""
        started = self._started.get(branch)
        if started is None or turn_id is None or started[0] != turn_id:
            return None
        return trio.current_time() - started[1]

    def last_turn(self, branch: UUID) -> LastTurn | None:
        """How ``branch``'s last finished turn ended, if one finished since the server was built."""
        return self._last.get(branch)


def _tree_branches(session: Any) -> list[Any]:
    """The member branches of ``session`` and of every session below it."""
    found = list(session.branches)
    for child in session.sessions:
        found.extend(_tree_branches(child))
    return found


def _last_turn(signal: RunEnd | RunFailed) -> LastTurn:
    turn_id = str(signal.turn_id) if signal.turn_id is not None else None
    if isinstance(signal, RunEnd):
        outcome, error = "done", None
    elif isinstance(signal, RunSuspended):
        outcome, error = "suspended", None
    else:
        outcome = "cancelled" if signal.cancelled else "failed"
        error = signal.error_type or None
    return LastTurn(
        turn_id=turn_id,
        outcome=outcome,
        cost_usd=signal.total_cost_usd,
        input_tokens=signal.input_tokens,
        output_tokens=signal.output_tokens,
        duration_ms=signal.duration_ms,
        error_type=error,
    )
