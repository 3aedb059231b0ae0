"""The streamable-HTTP transport: JSON-RPC over POSTs (and one GET stream), on trio.

Why not the SDK's ``streamable_http_client``: under trio it loses responses
when calls overlap. Measured here with SDK 1.30 against its own FastMCP
server: six concurrent ``call_tool`` calls lost at least one response in 10
of 10 runs under trio and in 0 of 10 under asyncio (two concurrent calls: 3
to 6 runs in 8 lost one), the POST answered ``200`` and its SSE stream never
delivered the response. So pride speaks the transport itself, in a few
plainly structured tasks, and keeps the SDK for the protocol
(``JSONRPCMessage``, ``ClientSession``):

* each message is POSTed with the session id and protocol version headers;
  ``202`` means accepted; a JSON body is one message; an SSE body carries
  the request's notifications (progress) and then its response, and is read
  to its end by the task that sent the request; a reply that ends without the
  request's response (a ``202``, an event cut short, a body that is not
  JSON-RPC) answers the request with an error, since nothing else would;
* one GET stream, opened after initialisation, carries messages the server
  sends outside any request (``405``: the server has none); refused as busy
  (``503``/``429``, a bound on streams), ended by the server or broken (a
  reset), it is opened again after a bounded backoff that honours
  ``Retry-After``, until the connection closes;
* ``DELETE`` ends the session on close (bounded, best effort).

Every body is read raw and bounded as it arrives (``max_message_bytes`` for
one message, one SSE line or one SSE event): nothing compressed is asked for,
and a body in a coding not asked for is refused unread.

Requests are sent concurrently over one pooled ``httpx.AsyncClient`` (no TCP
connection per request). A transport failure (connection refused or reset),
a ``404`` for the session, or a message over ``max_message_bytes`` breaks the
connection: a crash of the child. Any other HTTP error answers only the
request that got it (a JSON-RPC error the call raises).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import trio
from mcp import types
from mcp.shared.message import SessionMessage

from ..llm import LimitExceeded, SseParser, parse_retry_after
from ._errors import McpServerError
from ._spec import McpServerSpec
from ._wire import Unreadable, read_message

__all__ = ["DELETE_WAIT", "GET_RETRY_FIRST", "GET_RETRY_MAX", "HTTP_TIMEOUT", "http_transport"]

log = logging.getLogger("pride.mcp")

HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""The SDK's recommended timeouts: 30 s to connect and write, 300 s to read (SSE streams idle)."""

DELETE_WAIT = 2.0
"""Seconds the closing ``DELETE`` may take."""

GET_RETRY_FIRST = 1.0
"""Seconds before asking again for a GET stream refused as busy or ended, the first
time (doubled at each such stream in a row after it, up to `GET_RETRY_MAX`)."""

GET_RETRY_MAX = 60.0
"""The longest wait before asking again for a refused GET stream (a longer
``Retry-After`` is cut to it)."""

_SESSION = "mcp-session-id"
_VERSION = "mcp-protocol-version"


class _Connection:
    """One HTTP session with the server: the client, its ids, and where messages go."""

    def __init__(
        self,
        spec: McpServerSpec,
        client: httpx.AsyncClient,
        reader: Any,
        on_broken: Callable[[McpServerError], None],
        scope: trio.CancelScope,
    ) -> None:
        assert spec.url is not None
        self.spec = spec
        self.url = spec.url
        self.client = client
        self.reader = reader
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.error: McpServerError | None = None
        self.posts: dict[str, trio.CancelScope] = {}  # request id -> its POST, while open
        self._on_broken = on_broken
        self._scope = scope

    def headers(self, accept: str) -> dict[str, str]:
        headers = {"Accept": accept}
        if self.session_id is not None:
            headers[_SESSION] = self.session_id
        if self.protocol_version is not None:
            headers[_VERSION] = self.protocol_version
        return headers

    def broken(self, text: str) -> None:
        if self.error is None:
            self.error = McpServerError(f"MCP server {self.spec.name!r}: {text}")
            self._on_broken(self.error)
        self._scope.cancel()

    async def deliver(self, data: bytes | str, *, initialize: bool = False) -> Any:
        if len(data) > self.spec.max_message_bytes:
            self.broken(f"sent a message over {self.spec.max_message_bytes} bytes")
            return None
        try:
            message = await read_message(data)
        except Unreadable as exc:
            log.warning(
                "MCP server %r sent data that is not JSON-RPC (ignored): %.200r (%s)",
                self.spec.name,
                data,
                exc,
            )
            return None
        if initialize and isinstance(message.root, types.JSONRPCResponse):
            version = (message.root.result or {}).get("protocolVersion")
            if isinstance(version, str):
                self.protocol_version = version
        await self.reader.send(SessionMessage(message))
        return message

    async def post(self, message: SessionMessage) -> None:
        """POST one message and hand on whatever comes back (a JSON body or SSE events).

        A request's POST ends when its call is cancelled (`cancel`), not at the
        read timeout: an unanswered one held a pooled connection for 300 s.
        """
        root = message.message.root
        if not isinstance(root, types.JSONRPCRequest):
            await self._post(message, None)
            return
        key = str(root.id)
        with trio.CancelScope() as scope:
            self.posts[key] = scope
            try:
                await self._post(message, root.id)
            finally:
                self.posts.pop(key, None)

    def cancel(self, request_id: Any) -> None:
        """End the POST of the request ``request_id``, if it is still open."""
        scope = self.posts.get(str(request_id))
        if scope is not None:
            scope.cancel()

    async def _post(self, message: SessionMessage, request_id: Any) -> None:
        root = message.message.root
        initialize = isinstance(root, types.JSONRPCRequest) and root.method == "initialize"
        body = message.message.model_dump_json(by_alias=True, exclude_none=True)
        headers = self.headers("application/json, text/event-stream")
        headers["Content-Type"] = "application/json"
        try:
            async with self.client.stream("POST", self.url, content=body, headers=headers) as reply:
                coding = reply.headers.get("content-encoding", "identity").strip().lower()
                if coding not in ("", "identity"):
                    await self._refuse(request_id, f"a content-encoding not asked for: {coding!r}")
                    return
                if reply.status_code == 404 and self.session_id is not None:
                    self.broken("the server ended the session (HTTP 404)")
                    return
                if reply.status_code >= 300:
                    await self._refuse(request_id, f"HTTP {reply.status_code} from the server")
                    return
                if initialize:
                    self.session_id = reply.headers.get(_SESSION)
                kind = reply.headers.get("content-type", "").split(";")[0].strip().lower()
                answered = False  # a 202 is right for a notification; a request waits in vain
                if reply.status_code == 202:
                    pass
                elif kind == "text/event-stream":
                    answered = await self._events(reply, request_id, initialize=initialize)
                elif kind == "application/json":
                    data = await _read_capped(reply, self.spec.max_message_bytes)
                    answered = _answers(await self.deliver(data, initialize=initialize), request_id)
                else:
                    await self._refuse(request_id, f"an unexpected content type {kind!r}")
                    return
            if request_id is not None and not answered and self.error is None:
                # Nothing else would ever answer it (pride does not resume SSE streams).
                await self._refuse(request_id, "the server's reply ended without an answer")
        except httpx.TransportError as exc:
            self.broken(f"the connection failed: {type(exc).__name__}: {exc}")
        except _TooLarge:
            self.broken(f"sent a message over {self.spec.max_message_bytes} bytes")

    async def listen(self) -> None:
        """The GET stream: messages the server sends outside any request, for as long
        as the connection is open.

        A stream that ends is opened again: refused as busy (503 or 429: a bound on
        streams such as ``pride mcp --max-watchers`` is reached), ended by the
        server (200, then the body's end), or broken at the transport level (a
        reset, an idle read timing out). Each time after a wait: the server's
        ``Retry-After`` or a backoff doubling from `GET_RETRY_FIRST` with each
        stream in a row that ended so, whichever is longer, never more than
        `GET_RETRY_MAX`; a stream that stayed open `GET_RETRY_MAX` seconds or
        more is opened again after `GET_RETRY_FIRST` and starts the backoff
        again, so a server ending every stream at once is asked ever more
        slowly, never in a loop. The first of a row is a warning (and every
        tenth after it; the others are at debug level), and the stream opening
        after refusals is said at info level; the end of a stream that served
        that long is routine (a proxy's cut, an idle read timing out), logged
        at debug level. A 404 for the session breaks the
        connection, as a POST's does; any other refusal (405: the server has
        none) is final.
        """
        tries = 0  # streams in a row refused, or ended before GET_RETRY_MAX seconds
        refused = False
        while True:
            began = trio.current_time()
            ended = await self._listen_once(tries if refused else 0)
            if ended is None:
                return
            hint, why, refused = ended
            lasted = trio.current_time() - began
            if not refused and lasted >= GET_RETRY_MAX:
                # It served a good while: its end says nothing of the server, and is
                # routine (a proxy's cut, an idle read timing out), not a warning.
                tries = 0
                log.debug(
                    "MCP server %r: its GET stream ended after %.0f s (%s); again in %g s",
                    self.spec.name,
                    lasted,
                    why,
                    GET_RETRY_FIRST,
                )
                await trio.sleep(GET_RETRY_FIRST)
                continue
            tries += 1
            backoff = GET_RETRY_FIRST * 2 ** min(tries - 1, 16)
            delay = min(GET_RETRY_MAX, max(hint, backoff))
            if tries % 10 != 1:
                log.debug("MCP server %r: GET stream ended; again in %g s", self.spec.name, delay)
            else:
                # A refusal and an end read alike but for their verbs.
                verb, run, again = (
                    ("was refused", "as busy", "asking again")
                    if refused
                    else ("ended", "in a row", "opening it again")
                )
                log.warning(
                    "MCP server %r: its GET stream %s %d time(s) %s (%s); %s in %g s "
                    "(every %g s at most, while connected): no list-change notices until then",
                    self.spec.name,
                    verb,
                    tries,
                    run,
                    why,
                    again,
                    delay,
                    GET_RETRY_MAX,
                )
            await trio.sleep(delay)

    async def _listen_once(self, refusals: int) -> tuple[float, str, bool] | None:
        """One GET stream, read to its end: None when done with (the server has none,
        or the connection broke), else the seconds the server asked to wait (0: it
        named none), why the stream ended, and whether it was refused as busy."""
        try:
            async with self.client.stream(
                "GET", self.url, headers=self.headers("text/event-stream")
            ) as reply:
                if reply.status_code in (429, 503):
                    text = (await _read_some(reply, 300)).decode("utf-8", "replace")
                    why = f"HTTP {reply.status_code}: {text.strip()!r}"
                    return parse_retry_after(reply.headers) or 0.0, why, True
                if reply.status_code == 404 and self.session_id is not None:
                    self.broken("the server ended the session (HTTP 404 to its GET stream)")
                    return None
                if reply.status_code != 200:
                    log.debug(
                        "MCP server %r: no GET stream (HTTP %d)", self.spec.name, reply.status_code
                    )
                    return None
                if refusals:
                    log.info(
                        "MCP server %r: the GET stream opened after %d refusal(s)",
                        self.spec.name,
                        refusals,
                    )
                await self._events(reply)
        except httpx.TransportError as exc:
            return 0.0, f"{type(exc).__name__}: {exc}", False
        except _TooLarge:
            self.broken(f"sent a message over {self.spec.max_message_bytes} bytes")
            return None
        return 0.0, "the server ended it", False

    async def _events(
        self, reply: httpx.Response, request_id: Any = None, *, initialize: bool = False
    ) -> bool:
        """Read an SSE body to its end, delivering each event's data as one message;
        True if one of them answered ``request_id``.

        Parsed by pride.llm's bounded `SseParser`, as provider streams are:
        httpx's own line iterator holds a line whole however long it grows (an
        endless line took the process past 500 MB), so the bound is checked on
        every read instead, and a line or an event past ``max_message_bytes``
        drops the stream at once.
        """
        parser = SseParser(self.spec.max_message_bytes)
        answered = False
        async with _raw_body(reply) as body:
            while chunk := await body.read():
                try:
                    events = parser.feed(chunk)
                except LimitExceeded:
                    raise _TooLarge from None
                for data in events:
                    message = await self.deliver(data, initialize=initialize)
                    answered = answered or _answers(message, request_id)
        for data in parser.close():
            message = await self.deliver(data, initialize=initialize)
            answered = answered or _answers(message, request_id)
        return answered

    async def _refuse(self, request_id: Any, why: str) -> None:
        log.warning("MCP server %r: %s", self.spec.name, why)
        if request_id is None:
            return
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(code=types.INTERNAL_ERROR, message=why),
        )
        await self.reader.send(SessionMessage(types.JSONRPCMessage(error)))

    async def end_session(self) -> None:
        if self.session_id is None:
            return
        with contextlib.suppress(httpx.HTTPError):
            await self.client.delete(self.url, headers=self.headers("application/json"))


class _TooLarge(Exception):
    pass


async def _read_some(reply: httpx.Response, limit: int) -> bytes:
    """At most about ``limit`` bytes of a body (a refusal's reason, for the log); the
    rest is dropped with the connection."""
    data = bytearray()
    async with _raw_body(reply) as body:
        while len(data) < limit and (chunk := await body.read()):
            data += chunk
    return bytes(data[:limit])


def _answers(message: types.JSONRPCMessage | None, request_id: Any) -> bool:
    """True if ``message`` is the response (or error) to the request ``request_id``."""
    if request_id is None or message is None:
        return False
    root = message.root
    # The SDK matches "3" to 3 as well.
    kinds = types.JSONRPCResponse | types.JSONRPCError
    return isinstance(root, kinds) and str(root.id) == str(request_id)


async def _read_capped(reply: httpx.Response, limit: int) -> bytes:
    data = bytearray()
    async with _raw_body(reply) as body:
        while chunk := await body.read():
            data += chunk
            if len(data) > limit:
                raise _TooLarge
    return bytes(data)


class _RawBody:
    """A response's raw bytes, read one network chunk at a time."""

    def __init__(self, reply: httpx.Response) -> None:
        self._reply = reply
        self._raw = reply.aiter_raw()
        self.finished = False

    async def read(self) -> bytes:
        """The next chunk; ``b""`` at the end."""
        chunk = await anext(self._raw, b"")
        self.finished = not chunk
        return chunk

    async def close(self) -> None:
        """Drop the connection of a body left part-way, and end httpx's readers.

        httpx reads a body through a chain of async generators that do not
        close the ones they iterate (trio warns about each one left to the
        garbage collector); as pride.llm's reader does, the response is closed
        first and the raw iterator then run to its end, which fails at once.
        """
        if self.finished:
            return
        self.finished = True
        await self._reply.aclose()
        with contextlib.suppress(Exception):
            async for _ in self._raw:
                pass


@contextlib.asynccontextmanager
async def _raw_body(reply: httpx.Response) -> AsyncIterator[_RawBody]:
    body = _RawBody(reply)
    try:
        yield body
    finally:
        with trio.move_on_after(DELETE_WAIT, shield=True):
            await body.close()


@contextlib.asynccontextmanager
async def http_transport(
    spec: McpServerSpec, on_broken: Callable[[McpServerError], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """Connect to ``spec.url``; yield ``(read_stream, write_stream)`` for a ClientSession.

    Raises:
        McpServerError: the connection broke while the body ran (see the module docstring).
    """
    reader, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes, writer = anyio.create_memory_object_stream[SessionMessage](0)
    # Bodies are read raw and bounded as they arrive; a compressed one would inflate a
    # whole network read at once (a small bomb, megabytes past the bound), so none is asked for.
    headers = {"Accept-Encoding": "identity", **(spec.headers or {})}
    async with httpx.AsyncClient(
        headers=headers, timeout=HTTP_TIMEOUT, follow_redirects=False
    ) as client:
        connection: _Connection | None = None
        try:
            async with trio.open_nursery() as nursery:
                connection = _Connection(spec, client, reader, on_broken, nursery.cancel_scope)
                nursery.start_soon(_send_all, connection, writer, nursery)
                try:
                    yield session_reads, session_writes
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            with trio.move_on_after(DELETE_WAIT) as bound:
                bound.shield = True
                if connection is not None and connection.error is None:
                    await connection.end_session()
            for stream in (reader, session_reads, session_writes, writer):
                await stream.aclose()
        if connection is not None and connection.error is not None:
            raise connection.error


async def _send_all(connection: _Connection, writer: Any, nursery: trio.Nursery) -> None:
    """POST what the session writes: requests concurrently, other messages in order."""
    async with writer:
        async for message in writer:
            root = message.message.root
            if isinstance(root, types.JSONRPCRequest):
                nursery.start_soon(connection.post, message)
                continue
            await connection.post(message)
            if not isinstance(root, types.JSONRPCNotification):
                continue
            if root.method == "notifications/initialized":
                nursery.start_soon(connection.listen)
            elif root.method == "notifications/cancelled" and root.params:
                connection.cancel(root.params.get("requestId"))  # the server has been told
