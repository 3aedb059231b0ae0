"""The one place where HTTP and provider failures become pride exceptions.

Every endpoint goes through `translating` (transport failures, the
call's deadline, unreadable or oversized replies) and
`error_for_status` / `error_for_payload` (the provider said no),
so the mapping below is the whole story:

======================================  ==================================
what happened                           raised
======================================  ==================================
HTTP 429                                ``RateLimited`` (``retry_after``)
HTTP 401, 403                           ``AuthenticationFailed``
HTTP 404                                ``EndpointNotFound``
HTTP 408                                ``ProviderTimeout``
other HTTP 4xx                          ``BadRequest``
HTTP 5xx (incl. Anthropic 529)          ``ServerError``
``httpx.TimeoutException``              ``ProviderTimeout``
the call's ``call_timeout`` ran out     ``ProviderTimeout``
connect/read/write error, cut stream    ``ProviderConnectionError``
unreadable JSON or SSE, wrong shape     ``MalformedResponse`` (``path``)
past a bound of ``ResponseLimits``      ``ResponseTooLarge``
bad ``base_url`` scheme, client bug     ``ProviderError`` (not retried)
======================================  ==================================

Each is chained with ``from`` to the original. Messages say where to look:
the provider, the endpoint URL that was called (scheme, host and path: never
a query string or credentials), the HTTP status and the provider's own error
text; never a credential: provider text is scrubbed of anything that looks
like a key, and the ``httpx.Request`` kept on a chained httpx exception has
its credential headers replaced.
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
import trio

from pride.errors import (
    AuthenticationFailed,
    BadRequest,
    EndpointNotFound,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ResponseTooLarge,
    ServerError,
)

from ._reading import Deadline, LimitExceeded, UnreadableBody
from ._shape import WrongShape

__all__ = [
    "error_for_payload",
    "error_for_status",
    "malformed",
    "not_sent",
    "parse_retry_after",
    "public_url",
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


def _scrub(exc: httpx.HTTPError, secret: str | None) -> None:
    """Scrub ``exc``, which the pride error is chained to, and the errors it chains.

    Their messages are shown in every traceback of the pride error, and httpx's,
    httpcore's and h11's quote what the server sent (``illegal header line:
    bytearray(b'...')``): a server echoing the key there put it in the
    traceback, though the pride error's own message was redacted. So each
    text argument of the chain is redacted as the message is, and the request
    an httpx error carries loses its credential headers.
    """
    _scrub_request(exc)
    seen: set[int] = set()
    chained: list[BaseException] = [exc]
    while chained:
        error = chained.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        args = error.args
        scrubbed = tuple(redact(arg, secret) if isinstance(arg, str) else arg for arg in args)
        if scrubbed != args:
            error.args = scrubbed
        chained.extend(e for e in (error.__cause__, error.__context__) if e is not None)


def public_url(url: str) -> str:
    """``url`` as shown in messages: scheme, host, port and path; no credentials, no query.

    A query string or a ``user:password@`` part may hold a credential (some
    providers take the key as a query parameter).
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        return "<an invalid URL>"
    host = parsed.host
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = f":{parsed.port}" if parsed.port is not None else ""
    return f"{parsed.scheme}://{host}{port}{parsed.path}"


def _seconds(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g} s"


def _timeout_message(
    provider: str, url: str, exc: httpx.TimeoutException, timeout: float | None
) -> str:
    name = type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return f"{provider}: could not connect to {url} within timeout={_seconds(timeout)} ({name})"
    if isinstance(exc, httpx.ReadTimeout):
        return (
            f"{provider}: POST {url} sent nothing for {_seconds(timeout)} ({name}): the server "
            "took the request but did not answer in time; if the model is slow to start, "
            "give the model a larger timeout="
        )
    return f"{provider}: no progress within timeout={_seconds(timeout)} for POST {url} ({name})"


@contextmanager
def translating(
    provider: str,
    url: str,
    *,
    secret: str | None = None,
    timeout: float | None = None,
    deadline: Deadline | None = None,
) -> Iterator[None]:
    """Translate failures raised inside the block into pride exceptions.

    Args:
        provider: the provider name, for the message.
        url: the public URL called (see `public_url`), for the message.
        secret: the API key in use, removed from any text that echoes it.
        timeout: the per-operation timeout, for the message.
        deadline: the call's deadline, for the message.

    Raises:
        ProviderTimeout: for ``httpx.TimeoutException``, and for
            ``trio.TooSlowError`` (the call's deadline passed).
        ProviderConnectionError: for other transport failures (including a
            connection closed before the body ended).
        MalformedResponse: for a body that cannot be decoded, and for JSON
            of the wrong shape (``WrongShape``, its path kept).
        ResponseTooLarge: for a reply past a bound (``LimitExceeded``).
        ProviderError: for a request httpx cannot send (bad URL scheme).

    ``trio.Cancelled`` and pride's own errors pass through untouched.
    """
    where: dict[str, Any] = {"provider": provider, "url": url}
    try:
        yield
    except httpx.TimeoutException as exc:
        _scrub(exc, secret)
        raise ProviderTimeout(_timeout_message(provider, url, exc, timeout), **where) from exc
    except trio.TooSlowError as exc:
        allowance = _seconds(deadline.seconds if deadline is not None else None)
        raise ProviderTimeout(
            f"{provider}: no complete reply from POST {url} within call_timeout={allowance} "
            "(the time allowed for the whole call, however slowly the bytes arrive)",
            **where,
        ) from exc
    except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:
        _scrub(exc, secret)
        raise ProviderError(
            f"{provider}: cannot send the request to {url}: {redact(str(exc), secret)}", **where
        ) from exc
    except httpx.DecodingError as exc:
        _scrub(exc, secret)
        raise malformed(provider, url, "the body could not be decoded", exc) from exc
    except httpx.HTTPError as exc:  # TransportError, TooManyRedirects, ...
        _scrub(exc, secret)
        raise ProviderConnectionError(
            f"{provider}: connection failed for POST {url} "
            f"({type(exc).__name__}: {redact(str(exc), secret)})",
            **where,
        ) from exc
    except LimitExceeded as exc:
        raise ResponseTooLarge(
            f"{provider}: the reply from POST {url} is too large: {exc}; reading stopped "
            "(raise the model's ResponseLimits if this provider's replies are that large)",
            limit=exc.limit,
            allowed=exc.allowed,
            **where,
        ) from exc
    except UnreadableBody as exc:
        raise malformed(provider, url, str(exc)) from exc
    except WrongShape as exc:
        raise malformed(
            provider, url, f"the JSON has the wrong shape: {exc}", path=exc.path
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
    """The provider's error text from an OpenAI- or Anthropic-shaped error body (whole:
    cut it only once it is redacted, or a key across the cut is kept in part)."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return text


def _shown(text: str, secret: str | None) -> str:
    """A provider's text as an exception keeps it: redacted, then cut to
    `MAX_MESSAGE_CHARS` (in that order: a key the cut went through would be
    found by neither its value nor its shape, and kept up to the cut)."""
    return redact(text, secret)[:MAX_MESSAGE_CHARS]


def error_for_status(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    url: str,
    model: str | None = None,
    secret: str | None = None,
) -> ProviderError:
    """Build the exception for an HTTP error response (status >= 400).

    Args:
        status: the HTTP status code.
        body: the response body (an error JSON document, usually).
        headers: the response headers (``Retry-After`` is read on 429).
        provider: the provider name.
        url: the public URL that answered.
        model: the model name that was asked for (named on a 404).
        secret: the API key in use, removed from the provider's text.

    Returns:
        the matching [`ProviderError`][pride.ProviderError] subclass, to be raised
        by the caller.
    """
    provider_message = _shown(_message_from_body(body), secret)
    said = provider_message or "(the body gave no error message)"
    message = f"{provider}: HTTP {status} from POST {url}: {said}"
    kwargs: dict[str, Any] = {
        "status": status,
        "provider_message": provider_message,
        "provider": provider,
        "url": url,
    }
    if status == 429:
        return RateLimited(message, retry_after=parse_retry_after(headers), **kwargs)
    if status in (401, 403):
        return AuthenticationFailed(message, **kwargs)
    if status == 404:
        asked = f" {model!r}" if model else ""
        return EndpointNotFound(
            f"{message.rstrip('.')}. Nothing answers there: the base URL or the model name is "
            "likely wrong (an OpenAI-compatible base URL usually ends in /v1; check the model "
            f"name{asked})",
            **kwargs,
        )
    if status == 408:
        return ProviderTimeout(message, **kwargs)
    if 400 <= status < 500:
        return BadRequest(message, **kwargs)
    if status >= 500:
        return ServerError(message, **kwargs)
    return MalformedResponse(f"{provider}: unexpected HTTP status {status} from {url}", **kwargs)


_PAYLOAD_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "rate_limit_error": RateLimited,
    "rate_limit_exceeded": RateLimited,
    "authentication_error": AuthenticationFailed,
    "permission_error": AuthenticationFailed,
    "invalid_request_error": BadRequest,
    "not_found_error": EndpointNotFound,
    "request_too_large": BadRequest,
    "timeout_error": ProviderTimeout,
}


def error_for_payload(
    error: Any, *, provider: str, url: str, secret: str | None = None
) -> ProviderError:
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
    provider_message = _shown(text, secret)
    cls = _PAYLOAD_ERROR_TYPES.get(kind, ServerError)
    return cls(
        f"{provider}: error in the stream from POST {url}: {provider_message}",
        provider_message=provider_message,
        provider=provider,
        url=url,
    )


def malformed(
    provider: str,
    url: str | None,
    what: str,
    exc: Exception | None = None,
    *,
    path: str | None = None,
) -> MalformedResponse:
    """A [`MalformedResponse`][pride.MalformedResponse] naming what could not be read, and where."""
    detail = f": {exc}" if exc is not None else ""
    source = f" from POST {url}" if url else ""
    return MalformedResponse(
        f"{provider}: unreadable reply{source}: {what}{detail}",
        provider=provider,
        url=url,
        path=path,
    )


def not_sent(provider: str, url: str, why: str) -> BadRequest:
    """The [`BadRequest`][pride.BadRequest] for a request refused before it was sent
    (a bad option of the call's own: what the API would refuse, without the round trip)."""
    return BadRequest(
        f"{provider}: the request was not sent to POST {url}: {why}",
        provider_message=why,
        provider=provider,
        url=url,
    )
