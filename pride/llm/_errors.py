"""The one place where HTTP and provider failures become pride exceptions.

Every endpoint goes through `translating` (transport failures) and
`error_for_status` / `error_for_payload` (the provider said no), so
the mapping below is the whole story:

======================================  ==================================
what happened                           raised
======================================  ==================================
HTTP 429                                ``RateLimited`` (``retry_after``)
HTTP 401, 403                           ``AuthenticationFailed``
HTTP 408                                ``ProviderTimeout``
other HTTP 4xx                          ``BadRequest``
HTTP 5xx (incl. Anthropic 529)          ``ServerError``
``httpx.TimeoutException``              ``ProviderTimeout``
connect/read/write error, cut stream    ``ProviderConnectionError``
unreadable JSON or SSE                  ``MalformedResponse``
bad ``base_url`` scheme, client bug     ``ProviderError`` (not retried)
======================================  ==================================

Each is chained with ``from`` to the original. Messages carry the HTTP status
and the provider's own error text, never a credential: provider text is
scrubbed of anything that looks like a key, and the ``httpx.Request`` kept on
a chained httpx exception has its credential headers replaced.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx
import httpx_sse

from pride.errors import (
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
)

__all__ = [
    "error_for_payload",
    "error_for_status",
    "malformed",
    "parse_retry_after",
    "redact",
    "translating",
]

#: Request headers that carry credentials; scrubbed from chained httpx errors.
SECRET_HEADERS = ("authorization", "x-api-key", "api-key")

#: The longest provider message kept in an exception.
MAX_MESSAGE_CHARS = 500

# Shapes of API keys of the supported providers (sk-, sk-ant-, sk-or-, gsk_, ...);
# providers sometimes echo a partly masked key back in their error text.
_KEY_PATTERN = re.compile(r"\b(?:sk|gsk)[-_][A-Za-z0-9_\-*.]{6,}")


#: Secrets shorter than this are not searched for (a one-letter test key would
#: garble every message); real API keys are far longer.
MIN_SECRET_CHARS = 8


def redact(text: str, secret: str | None = None) -> str:
    """Return ``text`` with ``secret`` and anything shaped like an API key removed."""
    if secret and len(secret) >= MIN_SECRET_CHARS:
        text = text.replace(secret, "[redacted]")
    return _KEY_PATTERN.sub("[redacted]", text)


def _scrub_request(exc: httpx.HTTPError) -> None:
    """Replace credential headers on the request an httpx error carries."""
    try:
        request = exc.request
    except RuntimeError:  # an httpx error raised without a request
        return
    for name in SECRET_HEADERS:
        if name in request.headers:
            request.headers[name] = "[redacted]"


def _where(exc: httpx.HTTPError) -> str:
    try:
        url = exc.request.url
    except RuntimeError:
        return ""
    # The path only: a query string may hold a credential for some providers.
    return f" ({exc.request.method} {url.scheme}://{url.netloc.decode('ascii')}{url.path})"


@contextmanager
def translating(provider: str, secret: str | None = None) -> Iterator[None]:
    """Translate httpx and SSE failures raised inside the block.

    Args:
        provider: the provider name, for the message.
        secret: the API key in use, removed from any text that echoes it.

    Raises:
        ProviderTimeout: for ``httpx.TimeoutException``.
        ProviderConnectionError: for other transport failures (including a
            connection closed before the body ended).
        MalformedResponse: for a body that cannot be decoded or an SSE stream
            with the wrong content type.
        ProviderError: for a request httpx cannot send (bad URL scheme).

    ``trio.Cancelled`` and pride's own errors pass through untouched.
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        _scrub_request(exc)
        raise ProviderTimeout(
            f"{provider}: no answer within the timeout ({type(exc).__name__}){_where(exc)}",
            provider=provider,
        ) from exc
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
        _scrub_request(exc)
        raise ProviderError(
            f"{provider}: cannot send the request: {redact(str(exc), secret)}{_where(exc)}",
            provider=provider,
        ) from exc
    except httpx.DecodingError as exc:
        _scrub_request(exc)
        raise MalformedResponse(
            f"{provider}: the response body could not be decoded{_where(exc)}", provider=provider
        ) from exc
    except httpx_sse.SSEError as exc:  # an httpx.TransportError: must come first
        raise MalformedResponse(
            f"{provider}: not an event stream: {exc}", provider=provider
        ) from exc
    except httpx.HTTPError as exc:  # TransportError, TooManyRedirects, ...
        _scrub_request(exc)
        raise ProviderConnectionError(
            f"{provider}: connection failed ({type(exc).__name__}: "
            f"{redact(str(exc), secret)}){_where(exc)}",
            provider=provider,
        ) from exc


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date).

    Returns ``None`` when the headers say nothing usable; never negative.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    # An HTTP date is absolute wall-clock time, so it is compared with the wall clock.
    return max(0.0, when.timestamp() - time.time())


def _message_from_body(body: bytes) -> str:
    """The provider's error text from an OpenAI- or Anthropic-shaped error body."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:MAX_MESSAGE_CHARS]
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:MAX_MESSAGE_CHARS]
        if isinstance(error, str):
            return error[:MAX_MESSAGE_CHARS]
    return text[:MAX_MESSAGE_CHARS]


def error_for_status(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    secret: str | None = None,
) -> ProviderError:
    """Build the exception for an HTTP error response (status >= 400).

    Args:
        status: the HTTP status code.
        body: the response body (an error JSON document, usually).
        headers: the response headers (``Retry-After`` is read on 429).
        provider: the provider name.
        secret: the API key in use, removed from the provider's text.

    Returns:
        the matching [`ProviderError`][pride.ProviderError] subclass, to be raised
        by the caller.
    """
    provider_message = redact(_message_from_body(body), secret)
    message = f"{provider}: HTTP {status}: {provider_message}"
    kwargs: dict[str, Any] = {
        "status": status,
        "provider_message": provider_message,
        "provider": provider,
    }
    if status == 429:
        return RateLimited(message, retry_after=parse_retry_after(headers), **kwargs)
    if status in (401, 403):
        return AuthenticationFailed(message, **kwargs)
    if status == 408:
        return ProviderTimeout(message, **kwargs)
    if 400 <= status < 500:
        return BadRequest(message, **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    return MalformedResponse(f"{provider}: unexpected HTTP status {status}", **kwargs)


_PAYLOAD_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "rate_limit_error": RateLimited,
    "rate_limit_exceeded": RateLimited,
    "authentication_error": AuthenticationFailed,
    "permission_error": AuthenticationFailed,
    "invalid_request_error": BadRequest,
    "not_found_error": BadRequest,
    "request_too_large": BadRequest,
    "timeout_error": ProviderTimeout,
}


def error_for_payload(error: Any, *, provider: str, secret: str | None = None) -> ProviderError:
    """Build the exception for an error reported inside a 200 stream.

    ``error`` is the provider's error object (``{"type", "message", ...}``);
    unknown types become [`ServerError`][pride.ServerError], which is retried
    only if no text had been delivered yet.
    """
    if isinstance(error, dict):
        kind = str(error.get("type") or error.get("code") or "")
        text = str(error.get("message") or kind or "unknown error")
    else:
        kind, text = "", str(error)
    provider_message = redact(text[:MAX_MESSAGE_CHARS], secret)
    cls = _PAYLOAD_ERROR_TYPES.get(kind, ServerError)
    return cls(
        f"{provider}: error in stream: {provider_message}",
        provider_message=provider_message,
        provider=provider,
    )


def malformed(provider: str, what: str, exc: Exception | None = None) -> MalformedResponse:
    """A [`MalformedResponse`][pride.MalformedResponse] naming what could not be read."""
    detail = f": {exc}" if exc is not None else ""
    return MalformedResponse(f"{provider}: {what}{detail}", provider=provider)
