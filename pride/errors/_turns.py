"""A turn's course: how it can end other than with its result, and what it raises inside."""

from __future__ import annotations

import logging
from typing import Any

import trio

from ..messages import PrideError

__all__ = [
    "BudgetExceeded",
    "Escalate",
    "LoopBreak",
    "ParseFailed",
    "StopStream",
    "ToolArgumentError",
    "ToolError",
    "TurnCancelled",
    "TurnFinalizingError",
    "exception_leaves",
    "one_exception",
    "sole_exception",
]


def exception_leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """Every non-group exception inside ``group``, depth first.

    pride's public calls raise one exception, never a group the caller did not
    open; the places that leave a nursery use this to pick that one.
    """
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found.extend(exception_leaves(exc))
        else:
            found.append(exc)
    return found


def one_exception(
    group: BaseExceptionGroup[BaseException], log: logging.Logger, leaving: str
) -> BaseException:
    """The one exception a group from a nursery pride opened stands for.

    Its first leaf that is not a ``trio.Cancelled``; a ``Cancelled`` only when
    every leaf is one (the cancel scope that caused it catches it). Every other
    leaf that is not a ``Cancelled`` is logged on ``log`` as "another error
    ``leaving``" with its traceback: nothing the group held is dropped silently.
    """
    leaves = exception_leaves(group)
    chosen = next((leaf for leaf in leaves if not isinstance(leaf, trio.Cancelled)), leaves[0])
    for other in leaves:
        if other is not chosen and not isinstance(other, trio.Cancelled):
            log.error("another error %s: %r", leaving, other, exc_info=other)
    return chosen


def sole_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception inside ``group`` when it wraps just one (through any number
    of groups of one, as a library's nested nurseries report it), else ``group``
    itself: a caller raises the one error, or the group when several happened."""
    sole: BaseException = group
    while isinstance(sole, BaseExceptionGroup) and len(sole.exceptions) == 1:
        sole = sole.exceptions[0]
    return sole


class TurnFinalizingError(PrideError, RuntimeError):
    """A task of a turn's own lineage re-entered its branch while the turn finalises.

    Waiting would deadlock (the turn is waiting on that task), so the call fails at
    once. Schedule the work after the terminal signal instead, or retry it.
    """


class TurnCancelled(PrideError):
    """The turn was cancelled before it finished.

    ``reason`` is ``"caller"`` (the caller gave up), ``"restart"`` (a supervisor
    restarted the branch), ``"shutdown"`` (the grace period ran out) or
    ``"control"`` (a CANCEL directive).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        text = f"turn cancelled ({reason})"
        super().__init__(f"{text}: {detail}" if detail else text)


class BudgetExceeded(PrideError):
    """Work ran past a [`Budget`][pride.Budget] limit; the turn was stopped.

    Raised to the caller of the turn, after its one ``RunFailed``.

    Attributes:
        limit: the Budget field that was exceeded (``"max_model_calls"``).
        used: the figure that went past it: tokens or dollars used, the
            number of the call that was refused (``4`` for the fourth call
            under ``max_model_calls=3``), or seconds elapsed.
        allowed: the limit's value.
        scope: whose allowance it was: ``"turn"`` (the command's or the
            branch's budget) or ``"session <name>"``.
    """

    def __init__(self, limit: str, used: float, allowed: float, *, scope: str = "turn") -> None:
        self.limit = limit
        self.used = used
        self.allowed = allowed
        self.scope = scope
        super().__init__(f"{scope} budget exceeded: {_overrun(limit, used, allowed)}")

    def details(self) -> dict[str, Any]:
        """The limit, the figures and the scope as plain data (for answers over the wire)."""
        return {
            "limit": self.limit,
            "used": self.used,
            "allowed": self.allowed,
            "scope": self.scope,
        }

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only ``scope`` would be lost by the default pickling (Ray carries errors).
        return (_budget_exceeded, (self.limit, self.used, self.allowed, self.scope))


def _budget_exceeded(limit: str, used: float, allowed: float, scope: str) -> BudgetExceeded:
    return BudgetExceeded(limit, used, allowed, scope=scope)


def _overrun(limit: str, used: float, allowed: float) -> str:
    if limit in ("max_model_calls", "max_tool_calls"):
        kind = "model" if limit == "max_model_calls" else "tool"
        return (
            f"{limit}={allowed:g} allows {allowed:g} {kind} calls; call {used:g} was refused "
            "(give the work a larger Budget, or none)"
        )
    if limit == "max_cost_usd":
        return f"{limit}={allowed:g}, but ${used:.6g} was spent"
    if limit == "max_duration":
        return f"{limit}={allowed:g} s, and {used:.3g} s have passed"
    return f"{limit}={allowed:g}, but {used:g} were used"


class Escalate(PrideError):
    """Raise inside a turn to say: this branch's state is not to be trusted.

    The turn ends with ``RunFailed`` and its caller gets this exception; then the
    branch's supervisor applies its restart strategy.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class LoopBreak(PrideError):
    """A BREAK directive stopped the loop; the turn ends with ``RunFailed``."""


class StopStream(PrideError):
    """A CANCEL directive ended the stream cleanly (not a failure)."""


class ToolError(PrideError):
    """A tool call failed. Inside a turn it becomes an error ActionResponse."""


class ToolArgumentError(ToolError, ValueError):
    """A tool's arguments did not match its parameter schema."""


class ParseFailed(PrideError, ValueError):
    """Text could not be parsed into the requested response format.

    Attributes:
        failure_kind: how the last attempt failed: ``"extraction"`` (no JSON
            found in the text), ``"schema"`` (JSON that does not fit the
            format), or None where a single building step failed outside a
            parse. The same values as [`Unparsed.failure_kind`][pride.Unparsed].
    """

    def __init__(self, message: str, failure_kind: str | None = None) -> None:
        self.failure_kind = failure_kind
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        # The default pickling would rebuild from the message alone.
        return (type(self), (str(self), self.failure_kind))
