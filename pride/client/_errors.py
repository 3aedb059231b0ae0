"""Error answers of ``pride serve`` rebuilt as pride's own exceptions.

The server answers an error as ``{"type": class name, "message": ..., ...}``
with the data some errors carry (`pride.messages.requests.describe_error`).
The client raises the class of that name from `pride.errors`, with the
server's message and the attributes its constructor names, filled from that
data or from the request (the branch it named): so ``except
pride.UnknownBranch`` and ``error.limit`` work over HTTP as in process.
``BudgetExceeded`` and ``ApprovalRequired`` are built by their own
constructors (their fields are the point). A refusal with no pride class
(401, 403, 413, 421, ...) is a `RequestRefused`, and so is one naming a class
only pride's runtime raises to steer itself (`_STEERING`: ``Escalate``, ...);
the turn timeout an ask asked for is the builtin ``TimeoutError``.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from .. import errors
from ..errors import (
    ApprovalPending,
    ApprovalRequired,
    BudgetExceeded,
    Defer,
    Escalate,
    LoopBreak,
    PrideError,
    StopStream,
    TurnCancelled,
)
from ..messages import PendingCall

__all__ = ["AnswerTooLarge", "RequestRefused", "rebuild"]


class RequestRefused(PrideError):
    """The server refused a request for a reason with no pride class of its own.

    Attributes:
        status: the HTTP status (401 no or wrong token, 403 a foreign origin,
            413 a body too large, 421 a foreign Host, 503 overloaded, ...).
        kind: the error's type as the server named it (``"Unauthorized"``).
        retry_after: seconds the server asked to wait before trying again
            (``Retry-After``), or None.
    """

    def __init__(
        self, status: int, kind: str, message: str, *, retry_after: float | None = None
    ) -> None:
        self.status = status
        self.kind = kind
        self.retry_after = retry_after
        super().__init__(f"{status} {kind}: {message}")


class AnswerTooLarge(PrideError):
    """The server's answer passed a bound of the client; reading stopped there and
    the connection was dropped.

    A server's bytes are as untrusted as a provider's: without a bound, one
    endless answer would take the client's memory.

    Attributes:
        limit: the bound passed: ``"max_answer_bytes"`` (a whole answer, its
            body decoded) or ``"max_event_bytes"`` (one server-sent event).
        allowed: its value in bytes.
    """

    def __init__(self, limit: str, allowed: int, what: str) -> None:
        self.limit = limit
        self.allowed = allowed
        super().__init__(
            f"{what} is larger than {limit} ({allowed:,} bytes); "
            f"raise it with Client({limit}=...) if the server is trusted to send more"
        )


_CANCELLED = re.compile(r"turn cancelled \(([^)]*)\)")

_STEERING = (Escalate, LoopBreak, StopStream, Defer)
"""What pride's runtime raises on purpose to steer itself (crash a branch, end a
loop or a stream, suspend a call for approval). Named by a server, such a class
would steer the caller's runtime instead (a served branch's crash restarting the
branch whose tool asked it): it is a `RequestRefused` naming it."""


def rebuild(
    status: int,
    described: Any,
    *,
    name: str | None = None,
    retry_after: float | None = None,
) -> BaseException:
    """The exception an error answer describes.

    Args:
        status: the answer's HTTP status.
        described: the answer's ``error`` object (``{"type", "message", ...}``);
            anything else (a proxy's HTML page) becomes a `RequestRefused`.
        name: the branch the request named, for the attributes that hold it.
        retry_after: the answer's ``Retry-After``, in seconds.
    """
    if not isinstance(described, Mapping):
        return RequestRefused(status, "HTTPError", str(described)[:500], retry_after=retry_after)
    kind = str(described.get("type", "HTTPError"))
    message = str(described.get("message", ""))
    if kind == "TimeoutError":
        return TimeoutError(message)
    cls = getattr(errors, kind, None)
    if (
        not (isinstance(cls, type) and issubclass(cls, PrideError))
        or cls is PrideError
        or issubclass(cls, _STEERING)
    ):
        return RequestRefused(status, kind, message, retry_after=retry_after)
    try:
        if cls is BudgetExceeded:
            return BudgetExceeded(
                str(described["limit"]),
                described["used"],
                described["allowed"],
                scope=str(described.get("scope", "turn")),
            )
        if cls is ApprovalRequired or cls is ApprovalPending:
            pending = [
                PendingCall(p["call_id"], p["function"], dict(p.get("arguments") or {}))
                for p in described.get("pending", ())
            ]
            return cls(UUID(described["turn_id"]), pending, str(described.get("branch", "")))
    except (KeyError, TypeError, ValueError):
        pass  # not the fields it should carry: built as any other class below
    return _generic(cls, message, described, name)


def _generic(
    cls: type[PrideError], message: str, described: Mapping[str, Any], name: str | None
) -> PrideError:
    """``cls`` with the server's message, its constructor's attributes set from the data."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    known: dict[str, Any] = {"branch_name": name, "ref": name}
    if issubclass(cls, TurnCancelled):
        found = _CANCELLED.match(message)
        known["reason"] = found.group(1) if found else "unknown"
    if issubclass(cls, errors.InvalidMessage):
        problems = [tuple(line.split(": ", 1)) for line in message.splitlines()]
        known["problems"] = [p if len(p) == 2 else ("request", p[0]) for p in problems] or [
            ("request", message)
        ]
        known["path"], known["reason"] = known["problems"][0]
    try:
        parameters = list(inspect.signature(cls.__init__).parameters)[1:]
    except (TypeError, ValueError):
        parameters = []
    extra = {"problems", "path", "reason"} if issubclass(cls, errors.InvalidMessage) else set()
    if issubclass(cls, TurnCancelled):
        extra.add("reason")
    for parameter in sorted({*parameters, *extra}):
        value = described.get(parameter, known.get(parameter))
        # A read-only property takes its value from the others.
        with contextlib.suppress(AttributeError):
            setattr(error, parameter, value)
    return error
