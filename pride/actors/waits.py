"""Deadlock detection for branches waiting on branches.

While a turn of branch W waits on a reply from target T, W's actor can serve
nothing else. This module records, per waiting branch, the targets its live
turn is waiting on; before a turn waits on T, `check_wait_allowed`
follows those edges from T, and if they lead back to W the wait would never
end, so it fails at once with [`ReentrancyError`][pride.ReentrancyError]. Whoever closes
a cycle is the one refused, so every cycle is caught when it forms.

An ``Act`` served from the mailbox is not a turn (no turn context), but it
occupies its actor just the same: its tools run in the actor's task lineage,
so `serving_step` marks them as waiting on behalf of that branch too.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Protocol

from ..errors import ReentrancyError
from . import turn

__all__ = [
    "Party",
    "check_wait_allowed",
    "in_step",
    "record_wait",
    "remove_wait",
    "serving_branch",
    "serving_step",
    "waiting_edge",
    "waiting_on",
]


class Party(Protocol):
    """A branch or target as the wait graph sees it: kept by identity, named in
    the `ReentrancyError` that reports a cycle (a `pride.Target` is one)."""

    @property
    def name(self) -> str:
        """The name the error reports."""
        ...


# Wait edges: waiting branch -> {target: number of waits}. An entry exists only
# while a wait is under way (every record_wait is undone in a finally), so the
# graph holds no stopped branch. Only local branches wait; a target of another
# process has no edges here (a cycle through another process is not seen).
_edges: dict[Any, dict[Any, int]] = {}

# The Reply of the Act step the calling task's actor is serving, if any.
_step: contextvars.ContextVar[Any] = contextvars.ContextVar("pride_serving_step", default=None)


@contextlib.contextmanager
def serving_step(reply: Any) -> Iterator[None]:
    """While the block runs, the calling task (and tasks it starts) serve
    ``reply``'s step: its tools waiting on this branch would deadlock."""
    token = _step.set(reply)
    try:
        yield
    finally:
        _step.reset(token)


def in_step() -> bool:
    """True when the calling task belongs to an Act step its actor is serving."""
    return _step.get() is not None


def serving_branch() -> Party | None:
    """The branch whose live turn (or Act step) the calling task belongs to, if any.

    While that is so, the branch's actor is busy with the caller's own work:
    waiting for it to do anything else would never end.
    """
    bound = turn.binding()
    if bound is not None and turn.live_scope_for(bound.branch) is not None:
        return bound.branch
    step = _step.get()
    if step is not None and not step.done:
        return step.branch  # type: ignore[no-any-return]
    return None


def check_wait_allowed(target: Party) -> Party | None:
    """Raise ReentrancyError if the calling turn waiting on ``target`` would deadlock.

    Returns the waiting branch (`serving_branch`), for `record_wait`;
    None when the caller serves no branch, so no wait of it can deadlock.
    """
    if turn.binding() is None and _step.get() is None:
        return None  # the caller serves no branch (every ask from outside): nothing to check
    waiter = serving_branch()
    if waiter is None:
        return None
    if waiter is target:
        raise ReentrancyError([waiter.name, target.name])
    path = _wait_path(target, waiter)
    if path is not None:
        raise ReentrancyError([waiter.name, *(branch.name for branch in path)])
    return waiter


def _wait_path(start: Party, goal: Party) -> list[Party] | None:
    """The targets from ``start`` following wait edges to ``goal``, if reachable."""
    stack: list[list[Party]] = [[start]]
    seen = {id(start)}
    while stack:
        path = stack.pop()
        for following in _edges.get(path[-1], ()):
            if following is goal:
                return [*path, following]
            if id(following) not in seen:
                seen.add(id(following))
                stack.append([*path, following])
    return None


def waiting_on(waiter: Party) -> dict[Any, int]:
    """A copy of the targets ``waiter``'s turn waits on now, with how many waits each."""
    return dict(_edges.get(waiter, ()))


def record_wait(waiter: Party, target: Party) -> None:
    """Record that ``waiter`` waits on ``target`` (undo with `remove_wait`)."""
    edges = _edges.get(waiter)
    if edges is None:
        edges = _edges[waiter] = {}
    edges[target] = edges.get(target, 0) + 1


def remove_wait(waiter: Party | None, target: Party) -> None:
    """Undo `record_wait` (nothing for a ``waiter`` of None: no wait was recorded)."""
    if waiter is None:
        return
    edges = _edges[waiter]
    edges[target] -= 1
    if not edges[target]:
        del edges[target]
        if not edges:
            del _edges[waiter]


@contextlib.contextmanager
def waiting_edge(target: Party) -> Iterator[None]:
    """While the block runs, record that the calling turn's branch (if any) waits on
    ``target``."""
    waiter = serving_branch()
    if waiter is not None:
        record_wait(waiter, target)
    try:
        yield
    finally:
        remove_wait(waiter, target)
