"""Reading a provider's reply within bounds: size, decompression and a deadline.

Problem: every byte a provider sends is untrusted. httpx reads a body whole
(``response.content``) and splits a stream into lines of any length, and its
gzip decoder inflates a whole network read at once, so a broken or hostile
provider can grow memory without limit (an endless line, a 200 MB body, a
small compressed bomb); and its timeouts are per read, so a reply trickled
one byte at a time never trips them.

Choice: read the raw bytes (``response.aiter_raw()``) here, inflate
``gzip``/``deflate`` at most `STEP_BYTES` at a time, count every
decoded byte against the bound of [`ResponseLimits`][pride.llm.ResponseLimits] that applies, and
make each network read under the call's deadline. Only the two codings that
can be bounded this way are asked for (``accept-encoding: gzip, deflate``),
and a reply in another coding is refused.

Beside the deadline, a call's other piece of state on the wire lives here:
`Exchange`, whether its request reached the provider (what a call without a
reply spent).
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import trio

__all__ = [
    "ACCEPT_ENCODING",
    "MAX_ERROR_BODY_BYTES",
    "NO_DEADLINE",
    "STEP_BYTES",
    "BodyReader",
    "Deadline",
    "Exchange",
    "LimitExceeded",
    "ResponseLimits",
    "UnreadableBody",
    "read_body",
    "read_prefix",
]

logger = logging.getLogger("pride.llm")

MiB = 1024 * 1024

#: The ``accept-encoding`` pride sends: the codings it can inflate within bounds.
ACCEPT_ENCODING = "gzip, deflate"

#: Most bytes inflated from a compressed body in one step.
STEP_BYTES = 256 * 1024

#: Bytes of an error body kept to read the provider's message (the rest is not read).
MAX_ERROR_BODY_BYTES = 64 * 1024


def _positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be a positive number of bytes, got {value!r}")


@attrs.frozen
class ResponseLimits:
    """How much of a provider's reply pride reads before it gives up.

    A reply past one of these bounds fails with
    [`ResponseTooLarge`][pride.ResponseTooLarge] (a ``MalformedResponse``, not
    retried) naming the bound, and the connection is closed at once; memory
    held for a reply stays within a small multiple of the bound. Sizes are in
    bytes, counted after decompression.

    Attributes:
        max_body_bytes: a whole plain (not streamed) reply body; 32 MiB by
            default, a hundred times the longest text reply of today's models.
        max_event_bytes: one server-sent event of a stream, and one line of
            it; 8 MiB (an event carries a few tokens, or an image at most).
        max_stream_bytes: a whole streamed reply, all events together; 64 MiB
            (about twice what a 128k-token reply takes as OpenAI chunks).
    """

    max_body_bytes: int = attrs.field(default=32 * MiB, validator=_positive)
    max_event_bytes: int = attrs.field(default=8 * MiB, validator=_positive)
    max_stream_bytes: int = attrs.field(default=64 * MiB, validator=_positive)


class LimitExceeded(Exception):
    """A bound of `ResponseLimits` was passed (turned into ``ResponseTooLarge``)."""

    def __init__(self, limit: str, allowed: int, what: str) -> None:
        self.limit = limit
        self.allowed = allowed
        super().__init__(f"{what} is larger than {limit}={allowed:,} bytes")


class UnreadableBody(Exception):
    """The body cannot be decoded (an unknown coding, a corrupt compressed stream)."""


class Exchange:
    """Whether a plain call's request reached its provider, over all its attempts.

    A provider bills the prompt it read whether or not its reply arrives, so a
    call that ends without a reply after its request was sent (cancelled,
    timed out, cut while its reply was read) spent that prompt, and one whose
    request never went (a connection refused, a name that did not resolve)
    spent nothing. Sent means the request's body was written whole: httpcore
    reports it through the request's ``trace`` extension (`trace`), after the
    connection was made and the headers went. An attempt the provider
    answered with an error status (a 429, a 400) was refused, not run:
    `refused` takes back what that attempt marked.

    Attributes:
        sent: some attempt's request was sent and not refused. An endpoint
            without HTTP (the scripted one) sets it itself once its request is
            taken in: a plain attribute, so that costs a turn no call.
    """

    __slots__ = ("_before", "sent")

    def __init__(self) -> None:
        self.sent = False
        self._before = False

    def attempt(self) -> None:
        """An attempt begins (what `refused` goes back to)."""
        self._before = self.sent

    def refused(self) -> None:
        """The provider answered this attempt with an error status: it did not run it."""
        self.sent = self._before

    async def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's ``trace`` extension: marks the body written whole as delivered."""
        if event.endswith(".send_request_body.complete"):  # http11. or http2.
            self.sent = True


@attrs.frozen
class Deadline:
    """When a model call must be over.

    Attributes:
        at: the trio time (``trio.current_time()``) of the end; ``inf`` for none.
        seconds: the allowance it was made from (the model's ``call_timeout``),
            for messages; ``None`` for none.
    """

    at: float = math.inf
    seconds: float | None = None

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """The deadline ``seconds`` from now (no deadline for ``None``)."""
        if seconds is None:
            return NO_DEADLINE
        return cls(trio.current_time() + seconds, seconds)


NO_DEADLINE = Deadline()


class _Inflater:
    """Bounded gzip/deflate inflation: at most `STEP_BYTES` per step."""

    def __init__(self, coding: str) -> None:
        self._raw_deflate_tried = coding != "deflate"
        wbits = zlib.MAX_WBITS | 16 if coding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._inflate = zlib.decompressobj(wbits)
        self._tail = b""

    def feed(self, data: bytes) -> bytes:
        """Inflate up to `STEP_BYTES` from ``data`` plus what is left over."""
        source = self._tail + data if self._tail else data
        try:
            out = self._inflate.decompress(source, STEP_BYTES)
        except zlib.error:
            if self._raw_deflate_tried:
                raise UnreadableBody("the compressed body is truncated or corrupt") from None
            # "deflate" is zlib-wrapped by the standard, raw by some servers (as httpx does).
            self._raw_deflate_tried = True
            self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
            return self.feed(data)
        self._raw_deflate_tried = True
        self._tail = self._inflate.unconsumed_tail
        return out

    @property
    def pending(self) -> bool:
        return bool(self._tail)

    def finish(self) -> None:
        """Check, at the end of the body, that the compressed stream was complete."""
        if not self._inflate.eof:
            raise UnreadableBody("the compressed body is truncated or corrupt")


class BodyReader:
    """The decoded chunks of a response body, each network read within the deadline.

    Args:
        response: a response opened with ``stream=True``.
        deadline: when the call must be over; a read still waiting then stops
            and `read` raises ``trio.TooSlowError``. ``None`` when the caller
            bounds the reads itself (a coroutine can hold one cancel scope
            across all of them; an async generator cannot across its yields).

    Raises:
        UnreadableBody: the body's coding is not one pride asked for.
    """

    def __init__(self, response: httpx.Response, deadline: Deadline | None) -> None:
        coding = response.headers.get("content-encoding", "identity").strip().lower()
        if coding not in ("identity", "", "gzip", "x-gzip", "deflate"):
            raise UnreadableBody(f"the body's content-encoding {coding!r} was not asked for")
        self._response = response
        self.content_type = response.headers.get("content-type", "")
        self._raw: AsyncIterator[bytes] = response.aiter_raw()
        self._inflater = None if coding in ("identity", "") else _Inflater(coding)
        self._deadline = None if deadline is None else deadline.at
        self.finished = False
        declared = response.headers.get("content-length")
        #: The length the server declared, when it is known before inflation.
        self.declared_length = (
            int(declared) if self._inflater is None and declared and declared.isdigit() else None
        )

    async def read(self) -> bytes:
        """The next decoded chunk; ``b""`` at the end of the body.

        Raises:
            trio.TooSlowError: the deadline passed while waiting for bytes.
            UnreadableBody: the compressed body is corrupt.
            httpx.HTTPError: the transport failed.
        """
        inflater = self._inflater
        while True:
            if inflater is not None and inflater.pending:
                out = inflater.feed(b"")
                if out:
                    return out
            if self.finished:
                return b""
            data = await self._next_raw()
            if not data:
                self.finished = True
                if inflater is not None and not inflater.pending:
                    inflater.finish()
                continue
            if inflater is None:
                return data
            out = inflater.feed(data)
            if out:
                return out

    async def _next_raw(self) -> bytes:
        if self._deadline is None:
            return await anext(self._raw, b"")
        with trio.move_on_at(self._deadline):
            return await anext(self._raw, b"")
        raise trio.TooSlowError

    async def aclose(self) -> None:
        """Close the response; when the body was not read to its end, drop the connection.

        httpx reads a body through a chain of async generators that do not
        close the ones they iterate, so closing only the outermost would leave
        the inner ones to the garbage collector, and trio warns about each. So
        the response is closed first (dropping the connection at once), and the
        raw iterator is then run to its end: the read on the closed connection
        fails and every layer finishes by that exception.
        """
        await self._response.aclose()
        if self.finished:
            return
        self.finished = True
        try:
            async for _ in self._raw:
                pass
        except Exception as exc:  # the expected end of a read on a closed response
            logger.debug("closing a half-read response ended its read with %r", exc)


async def read_body(reader: BodyReader, limit: int, *, name: str = "max_body_bytes") -> bytearray:
    """The whole decoded body, which must not exceed ``limit`` bytes.

    A declared ``content-length`` above ``limit`` is refused before reading;
    otherwise it is not trusted, and the bytes themselves are counted.

    Raises:
        LimitExceeded: the body is larger than ``limit``.
    """
    if reader.declared_length is not None and reader.declared_length > limit:
        raise LimitExceeded(name, limit, f"the reply body ({reader.declared_length:,} bytes)")
    buffer = bytearray()
    while chunk := await reader.read():
        buffer += chunk
        if len(buffer) > limit:
            raise LimitExceeded(name, limit, "the reply body")
    return buffer


async def read_prefix(reader: BodyReader, limit: int) -> bytes:
    """At most ``limit`` decoded bytes from the start of the body (for error bodies)."""
    buffer = bytearray()
    while len(buffer) < limit and (chunk := await reader.read()):
        buffer += chunk
    return bytes(buffer[:limit])
