"""Restart strategies, child restart types and restart intensity.

These are Erlang/OTP's supervisor flags, kept under their OTP names because
that is the vocabulary people who write supervisors already know
(https://www.erlang.org/doc/system/sup_princ.html).

Policy: which children restart when one crashes.
    Problem: one crashed branch may leave its siblings inconsistent (a planner
    holding half an answer from a researcher that just lost its turn), or it
    may be entirely independent of them.
    Options: always restart only the crashed child; always restart everyone;
    let the supervisor say. Akka restarts per actor (one-for-one) unless told
    otherwise; OTP offers three strategies.
    Choice: OTP's three, chosen per session. ``one_for_one`` restarts the
    crashed child; ``one_for_all`` stops every running sibling and restarts
    them all; ``rest_for_one`` does that for the children started after the
    crashed one (they are the ones that may depend on it). Siblings stop in
    reverse start order and everyone starts again in start order, as OTP does.

Policy: which children restart at all (restart types).
    ``permanent`` and ``transient`` children restart after a crash;
    ``temporary`` ones never do. A temporary child caught in a one_for_all or
    rest_for_one group is stopped with the group and not started again (OTP's
    rule: restarting it would be a restart). Unlike OTP, a deliberate stop
    (``Stop``, ``remove``, shutdown) is never followed by a restart, even for
    a permanent child (DESIGN.md, "Sessions, pinned"): a branch stops only
    because someone asked, so the two restarting types differ in intent only.

Policy: restart intensity.
    Problem: a child that crashes on every start would be restarted forever,
    burning model calls and hiding the fault.
    Options: unlimited restarts; a fixed count for the supervisor's lifetime
    (Ray's ``max_restarts``); a count per sliding window (OTP's
    ``intensity``/``period``, Akka's ``withLimit(n, window)``).
    Choice: OTP's window, default 3 restarts per 5 seconds. Restart *events*
    are counted, so a one_for_all restart of three children is one event.
    The event that would exceed the limit is not performed: the supervisor
    fails instead (``max_restarts=0``: the first crash fails it), stopping its
    children and failing to its parent, which treats that as a crash of a
    child. Time is ``trio.current_time()``, so tests run on a MockClock.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Literal, TypeVar, get_args

__all__ = [
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_PERIOD",
    "RestartIntensity",
    "RestartType",
    "Strategy",
    "check_restart_type",
    "check_strategy",
    "restart_group",
    "restarts_after_crash",
]

Strategy = Literal["one_for_one", "one_for_all", "rest_for_one"]
"""Which children a crash restarts (see the module docstring)."""

RestartType = Literal["permanent", "transient", "temporary"]
"""Whether a child is restarted after a crash (``temporary``: never)."""

DEFAULT_MAX_RESTARTS = 3
"""Restart events allowed within [`DEFAULT_PERIOD`][pride.supervisors.strategy.DEFAULT_PERIOD]
(OTP's default is 1 per 5 s)."""

DEFAULT_PERIOD = 5.0
"""The sliding window, in seconds, over which restart events are counted."""

_Child = TypeVar("_Child")


def check_strategy(value: object) -> Strategy:
    """Return ``value`` as a strategy.

    Raises:
        ValueError: it is not one of ``one_for_one``, ``one_for_all``, ``rest_for_one``.
    """
    if value not in get_args(Strategy):
        raise ValueError(f"strategy must be one of {', '.join(get_args(Strategy))}, got {value!r}")
    return value  # type: ignore[return-value]


def check_restart_type(value: object) -> RestartType:
    """Return ``value`` as a restart type.

    Raises:
        ValueError: it is not one of ``permanent``, ``transient``, ``temporary``.
    """
    if value not in get_args(RestartType):
        raise ValueError(
            f"restart must be one of {', '.join(get_args(RestartType))}, got {value!r}"
        )
    return value  # type: ignore[return-value]


def restarts_after_crash(restart: RestartType) -> bool:
    """True when a crashed child of this type is started again."""
    return restart != "temporary"


def restart_group(strategy: Strategy, running: Sequence[_Child], crashed: _Child) -> list[_Child]:
    """The children a crash of ``crashed`` stops and starts again, in start order.

    Args:
        strategy: the supervisor's strategy.
        running: the children in start order (the crashed one included).
        crashed: the child that crashed.

    Returns:
        ``[crashed]`` for one_for_one; every child for one_for_all; the
        crashed child and those started after it for rest_for_one.
    """
    if strategy == "one_for_one" or crashed not in running:
        return [crashed]
    if strategy == "one_for_all":
        return list(running)
    return list(running[running.index(crashed) :])


class RestartIntensity:
    """Counts restart events in a sliding window and says when the limit is passed.

    Args:
        max_restarts: restart events allowed within ``period`` (0: none).
        period: the window, in seconds.

    Raises:
        ValueError: ``max_restarts`` is negative or ``period`` is not positive.
    """

    __slots__ = ("_events", "max_restarts", "period", "total")

    def __init__(self, max_restarts: int, period: float) -> None:
        if isinstance(max_restarts, bool) or not isinstance(max_restarts, int) or max_restarts < 0:
            raise ValueError(f"max_restarts must be a non-negative int, got {max_restarts!r}")
        if not isinstance(period, int | float) or not period > 0:
            raise ValueError(f"period must be a positive number of seconds, got {period!r}")
        self.max_restarts = max_restarts
        self.period = float(period)
        self.total = 0  # restart events performed over the supervisor's lifetime
        self._events: collections.deque[float] = collections.deque()

    def __repr__(self) -> str:
        return f"<RestartIntensity {len(self._events)}/{self.max_restarts} per {self.period}s>"

    def allow(self, now: float) -> bool:
        """Record a restart event at ``now``; False if it would pass the limit.

        A refused event is not recorded (the supervisor fails instead of
        restarting).
        """
        horizon = now - self.period
        events = self._events
        while events and events[0] <= horizon:
            events.popleft()
        if len(events) >= self.max_restarts:
            return False
        events.append(now)
        self.total += 1
        return True

    def reset(self) -> None:
        """Forget the window (a supervisor starting afresh); ``total`` is kept."""
        self._events.clear()
