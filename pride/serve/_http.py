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
for it to take some (`Writer`), then the client is taken for gone.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

import trio

from ..errors import InvalidMessage
from ..messages.codec import dump_json, parse_json

__all__ = [
    "AHEAD",
    "ClientStalled",
    "HttpError",
    "Receive",
    "Request",
    "Send",
    "Watch",
    "Writer",
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


class ClientStalled(Exception):
    """A write of an answer waited ``send_timeout`` seconds for the client to take
    its bytes: the client is taken for gone, and nothing more is written to it."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"the client took none of its answer for {timeout:g} s (send_timeout): taken for gone"
        )


AHEAD = 4
"""Writes a request may be ahead of its client: past them, it waits for the client
to take some (each wait bounded by ``send_timeout``). An answer of one or two
writes never waits until its end; a stream's turn stays within a few items of
what the client has taken."""


class Writer:
    """The ASGI ``send`` of one request: its writes made in order by a task of the server.

    hypercorn writes to the socket in a shielded cancel scope (so that no
    cancellation cuts an answer in half), and such a write waits for as long
    as a client that reads nothing keeps its connection open: a request's
    task stuck in it held its turn (a stream's branch stayed busy), its place
    and, since hypercorn waits for every request's task, the server's
    shutdown, however long the grace. So the request's writes go to a queue
    that one task in the server's ``nursery`` writes out, in order, and the
    request waits for that task only when it is `AHEAD` writes ahead and in
    `finish`: each such wait lasts at most ``timeout`` seconds without a
    write ending, past which `ClientStalled`, and the request unwinds as
    for a client gone (its turn cancelled). A write left waiting ends when
    hypercorn closes the connection: when the client leaves, or when the
    server stops (which it can, the request's task having ended).

    The request must end with `finish` (every write made) or `close` (what
    is not begun is dropped: a cancelled or failed request's), before it
    returns to hypercorn: one still writing after its app returned would
    find the answer closed under it. A write already begun is finished, as
    hypercorn's shield would have it.
    """

    __slots__ = (
        "_busy",
        "_closed",
        "_error",
        "_failed",
        "_nursery",
        "_progress",
        "_queue",
        "_running",
        "_send",
        "_stalled",
        "_timeout",
        "_work",
    )

    def __init__(self, send: Send, nursery: trio.Nursery, timeout: float) -> None:
        self._send = send
        self._nursery = nursery
        self._timeout = timeout
        self._queue: deque[MutableMapping[str, Any]] = deque()
        self._work = trio.lowlevel.ParkingLot()  # the writing task, waiting for a write
        self._progress = trio.lowlevel.ParkingLot()  # the request, waiting for one to end
        self._running = self._busy = False
        self._stalled = self._failed = self._closed = False
        self._error: Exception | None = None

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        """Queue ``message`` to be written after the ones before it.

        Raises:
            ClientStalled: the client took nothing for ``timeout`` seconds while
                this request waited for it, now or before.
            Exception: what hypercorn's own ``send`` raised for an earlier write.
        """
        self._check()
        self._queue.append(message)
        if self._running:
            self._work.unpark()
        else:
            self._running = True
            self._nursery.start_soon(self._write_all)
        while len(self._queue) + self._busy > AHEAD:
            await self._wait()

    async def finish(self) -> None:
        """Wait until every queued write is made.

        Raises:
            ClientStalled: the client took nothing for ``timeout`` seconds.
            Exception: what hypercorn's own ``send`` raised for a write.
        Cancellation: what is not begun stays queued; `close` drops it.
        """
        while self._queue or self._busy:
            await self._wait()
        self._check()

    def close(self) -> None:
        """Drop the writes not begun; a write begun is finished by its task."""
        self._closed = True
        self._queue.clear()
        self._work.unpark()

    def _check(self) -> None:
        if self._stalled:
            raise ClientStalled(self._timeout)
        if self._failed:
            error, self._error = self._error, None  # held by no frame once raised
            if error is not None:
                raise error
            raise RuntimeError(
                "an earlier write of this answer failed, or the server stopping cut it "
                "short: nothing more is written"
            )

    async def _wait(self) -> None:
        with trio.move_on_after(self._timeout) as waited:
            await self._progress.park()
        if waited.cancelled_caught:
            self._stalled = True
            raise ClientStalled(self._timeout)

    async def _write_all(self) -> None:
        queue = self._queue
        try:
            while not self._closed:
                if not queue:
                    await self._work.park()
                    continue
                message = queue.popleft()
                self._busy = True
                try:
                    await self._send(message)
                finally:
                    self._busy = False
                    self._progress.unpark_all()
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    return  # the answer is whole: nothing is written after it
        except Exception as exc:  # the request raises it at its next write or finish
            self._error, self._failed = exc, True
            queue.clear()
        except BaseException:  # the server's nursery cancelled: what is queued is not written
            self._failed = True
            queue.clear()
            raise
        finally:
            self._running = False


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
