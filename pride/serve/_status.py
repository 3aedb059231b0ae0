"""The HTTP status of each error, and the two bodies it is said in (native and OpenAI's).

One table (`STATUS`, most specific class first) serves both APIs, so a
client of either sees the same status for the same failure; docs/serve.md
prints it. The native body is the answer of ``pride run`` (`describe_error`:
type, message, and the data the error carries); the OpenAI body is
``{"error": {"message", "type", "param", "code"}}`` with the types the
official SDK's users match on.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import (
    ApprovalPending,
    ApprovalRequired,
    BranchClosed,
    BranchNotRunning,
    BudgetExceeded,
    InvalidMessage,
    MailboxFull,
    ParseFailed,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    TurnCancelled,
    UnknownBranch,
    UnknownOperation,
    UnknownPendingCall,
    UnknownTurn,
)
from ..messages.requests import describe_error
from ._http import Headers, HttpError

__all__ = ["RETRY_AFTER", "STATUS", "TurnTimeout", "native_error", "openai_error", "status_of"]

RETRY_AFTER = 1
"""Seconds a 503 asks the client to wait before trying again (``Retry-After``)."""


class TurnTimeout(Exception):
    """The request's ``timeout`` passed before the turn ended; the turn was cancelled."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"the turn did not finish within the request's timeout of {timeout:g} s; "
            "it was cancelled"
        )


STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (InvalidMessage, 400),
    (UnknownOperation, 400),
    (UnknownPendingCall, 400),
    (UnknownBranch, 404),
    (UnknownTurn, 404),
    (ApprovalRequired, 409),
    (ApprovalPending, 409),
    (BudgetExceeded, 429),
    (MailboxFull, 503),
    (BranchClosed, 503),
    (BranchNotRunning, 503),
    (TurnCancelled, 503),
    (TurnTimeout, 504),
    (ProviderTimeout, 504),
    (ProviderError, 502),
    (ParseFailed, 502),
)
"""Error class → status, most specific first; anything else is 500."""

# Answers a retry cannot change (the openai SDK retries 409 and 429 unless told not to).
_FINAL = (ApprovalRequired, ApprovalPending, BudgetExceeded)


def status_of(error: BaseException) -> tuple[int, Headers]:
    """The status for ``error`` and the headers that go with it."""
    if isinstance(error, HttpError):
        return error.status, list(error.headers)
    status = next((code for kind, code in STATUS if isinstance(error, kind)), 500)
    headers: Headers = []
    if status == 503:
        headers.append((b"retry-after", str(RETRY_AFTER).encode()))
    elif isinstance(error, RateLimited) and error.retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(error.retry_after))).encode()))
    if isinstance(error, _FINAL):
        headers.append((b"x-should-retry", b"false"))
    return status, headers


def native_error(error: BaseException) -> dict[str, Any]:
    """The native API's answer for ``error``: ``{"ok": false, "error": {...}}``."""
    if isinstance(error, HttpError):
        return {"ok": False, "error": {"type": error.kind, "message": error.message}}
    described = describe_error(error)
    if isinstance(error, TurnTimeout):
        described["type"] = "TimeoutError"
    return {"ok": False, "error": described}


_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    421: "permission_error",
    429: "rate_limit_error",
}


def openai_error(
    error: BaseException, status: int, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error body for ``error`` answered with ``status``."""
    kind = _OPENAI_TYPES.get(status, "server_error")
    if isinstance(error, BudgetExceeded):
        kind, code = "insufficient_quota", code or "insufficient_quota"
    elif code is None:
        code = error.kind if isinstance(error, HttpError) else type(error).__name__
    message = error.message if isinstance(error, HttpError) else str(error)
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
