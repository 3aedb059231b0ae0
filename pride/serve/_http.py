"""The HTTP plumbing of the front door, on bare ASGI: requests, bounded bodies, answers, SSE.

Everything a client sends is hostile here: a body is read in the chunks
hypercorn hands over, counted as it arrives and refused (413) once past the
limit, never gathered first; it must arrive whole within a deadline (408),
so a client trickling bytes holds a connection for bounded time; JSON is
parsed strictly by the codec's parser (no NaN, no integer past 64 bits, no
lone surrogate). Once a request's body is read, the only thing its client
can still send is its going away: `watch_disconnect` turns that into the
cancellation of the work answering it. A client that stays but reads
nothing is bounded too: an answer's writes wait at most ``send_timeout``
for it to take some (`pride._hypercorn.Writer`), then the client is taken
for gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

import trio

from ..errors import InvalidMessage
from ..messages.codec import dump_json, parse_json

__all__ = [
    "HttpError",
    "Receive",
    "Request",
    "Send",
    "Watch",
    "encode_sse",
    "json_bytes",
    "respond",
    "respond_json",
    "watch_disconnect",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

LINGER = 2.0
"""Seconds a refused body is still read (and dropped) after the refusal was answered,
so a client that sends its whole body before reading gets the answer rather than a
reset connection; a client that goes on sending past it is cut off."""


class HttpError(Exception):
    """A request refused before its work began: the status and what to say.

    ``kind`` is the error's type in the answer (``"InvalidMessage"``,
    ``"PayloadTooLarge"``, ...); ``headers`` go with the answer (``Retry-After``).
    ``close`` asks for the connection to be closed after the answer (its body
    was not read to the end).
    """

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        headers: Iterable[tuple[bytes, bytes]] = (),
        close: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = list(headers)
        self.close = close


class ClientGone(Exception):
    """The client disconnected before its request was read."""


class Request:
    """One HTTP request: its scope, the ASGI channels, and readers for what it carries."""

    __slots__ = ("_headers", "body_read", "method", "path", "query", "receive", "scope", "send")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self._headers: dict[bytes, bytes] | None = None
        self.body_read = False
        raw = scope.get("query_string", b"")
        self.query: dict[str, str] = (
            dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True)) if raw else {}
        )

    def header(self, name: bytes) -> bytes | None:
        """The value of header ``name`` (lowercase); with several, the last one."""
        headers = self._headers
        if headers is None:
            headers = self._headers = {key.lower(): value for key, value in self.scope["headers"]}
        return headers.get(name)

    @property
    def body_unread(self) -> bool:
        """True when the request declares a body and nothing has read it yet."""
        if self.body_read:
            return False
        length = self.header(b"content-length")
        return self.header(b"transfer-encoding") is not None or (
            length is not None and length.strip() not in (b"", b"0")
        )

    def header_count(self, name: bytes) -> int:
        """How many times header ``name`` (lowercase) was sent."""
        return sum(1 for key, _ in self.scope["headers"] if key.lower() == name)

    async def body(self, limit: int, timeout: float) -> bytes:
        """The request body, at most ``limit`` bytes, all of it within ``timeout`` seconds.

        Raises:
            HttpError: 413 past ``limit`` (a declared ``Content-Length`` is
                refused before anything is read); 408 when the body has not
                arrived within ``timeout``; 400 for a malformed length.
            ClientGone: the client disconnected first.
        """
        declared = self.header(b"content-length")
        if declared is not None:
            if not declared.isdigit() or self.header_count(b"content-length") > 1:
                raise HttpError(400, "InvalidMessage", "Content-Length is not one number")
            if int(declared) > limit:
                raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        with trio.move_on_after(timeout) as timer:
            while True:
                message = await self.receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                if chunk:
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if timer.cancelled_caught:
            raise HttpError(
                408,
                "RequestTimeout",
                f"the request body did not arrive within {timeout:g} s (--body-timeout)",
                close=True,
            )
        self.body_read = True
        return b"".join(chunks)

    async def json(self, limit: int, timeout: float) -> Any:
        """The body parsed as strict JSON (see `body`; ``Content-Type`` must be JSON).

        Raises:
            HttpError: 415 when the body is not declared JSON; 400 when it is
                not JSON (the codec's reason, ``request`` as the path); as `body`.
        """
        kind = (self.header(b"content-type") or b"").split(b";", 1)[0].strip().lower()
        if kind != b"application/json":
            raise HttpError(
                415,
                "UnsupportedMediaType",
                "send the body as JSON, with Content-Type: application/json",
                close=True,
            )
        raw = await self.body(limit, timeout)
        try:
            return parse_json(raw)
        except InvalidMessage as exc:
            where = "request" + exc.path.removeprefix("$")
            raise HttpError(400, "InvalidMessage", f"{where}: {exc.reason}") from None

    async def drain(self) -> None:
        """Read and drop what is left of the body, for at most `LINGER` seconds."""
        if self.body_read:
            return
        with trio.move_on_after(LINGER):
            while True:
                message = await self.receive()
                if message["type"] == "http.disconnect" or not message.get("more_body", False):
                    break
        self.body_read = True


def _too_large(limit: int) -> HttpError:
    return HttpError(
        413,
        "PayloadTooLarge",
        f"the request body is over {limit} bytes (--max-body-bytes)",
        close=True,
    )


def json_bytes(data: Any) -> bytes:
    """Compact strict JSON for ``data``, what it cannot carry replaced (see ``dump_json``)."""
    return dump_json(data, replace=True).encode()


async def respond(
    send: Send, status: int, body: bytes, content_type: bytes, headers: Iterable[Any] = ()
) -> None:
    """Send a whole answer: its status, headers and body."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def respond_json(send: Send, status: int, data: Any, headers: Iterable[Any] = ()) -> None:
    """Send ``data`` as a JSON answer."""
    await respond(send, status, json_bytes(data), b"application/json", headers)


SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),  # a reverse proxy must pass events on as they come
]


def encode_sse(event: str, data: Any) -> bytes:
    """One server-sent event: its name and its JSON data (one ``data`` line: JSON
    text escapes every newline, so it never needs more)."""
    return b"event: " + event.encode() + b"\ndata: " + json_bytes(data) + b"\n\n"


KEEPALIVE_COMMENT = b": keep-alive\n\n"


class Watch:
    """What `watch_disconnect` yields: ``gone`` turns True if the client went away."""

    __slots__ = ("gone", "scope", "watcher")

    def __init__(self) -> None:
        self.gone = False
        self.scope = trio.CancelScope()  # the work's: cancelled when the client goes
        self.watcher = trio.CancelScope()  # the watching task's: cancelled when the work ends


@contextlib.contextmanager
def watch_disconnect(request: Request, nursery: trio.Nursery) -> Iterator[Watch]:
    """Cancel the block when the client disconnects (``watch.gone`` then says so).

    Use it after the body has been read: the only message left for the
    request is ``http.disconnect``. The watching task runs in ``nursery`` (the
    server's), so the block raises its own exceptions, never a group; it ends
    with the block.
    """
    watch = Watch()
    nursery.start_soon(_watch, request, watch)
    try:
        with watch.scope:
            yield watch
    finally:
        watch.watcher.cancel()


async def _watch(request: Request, watch: Watch) -> None:
    with watch.watcher:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                watch.gone = True
                watch.scope.cancel()
                return
