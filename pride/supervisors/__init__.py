"""Sessions and supervision: membership, restart strategies, the observer and hook points."""

from .hooks import BLOCKING_POINTS, HOOK_POINTS, HookBus, HookHandler
from .observer import Filter, Handler, Observer
from .session import DEFAULT_GRACE, Session, SessionStatistics, SuspendedTurn
from .strategy import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_PERIOD,
    RestartIntensity,
    RestartType,
    Strategy,
)

__all__ = [
    "BLOCKING_POINTS",
    "DEFAULT_GRACE",
    "DEFAULT_MAX_RESTARTS",
    "DEFAULT_PERIOD",
    "HOOK_POINTS",
    "Filter",
    "Handler",
    "HookBus",
    "HookHandler",
    "Observer",
    "RestartIntensity",
    "RestartType",
    "Session",
    "SessionStatistics",
    "Strategy",
    "SuspendedTurn",
]
