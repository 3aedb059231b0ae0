"""A loopback HTTP server speaking the OpenAI and Anthropic APIs, for tests.

A real HTTP/1.1 server (h11 on trio sockets, on 127.0.0.1): a client under test goes
through its whole HTTP stack (pooling, chunked transfer, SSE, timeouts). It serves
``POST /v1/chat/completions``, ``/v1/responses`` (OpenAI) and ``/v1/messages``
(Anthropic), plain and streamed, from a script; faults on demand ([`Fault`][pride.testing.Fault]).
Anthropic replies carry signed thinking (``require_thinking=True`` refuses what
the API refuses: `pride.testing._thinking`) and cache prompts (`pride.testing._caching`).

Pitfall: trio's ``MockClock`` with autojump advances virtual time whenever all
tasks are blocked, including on real socket I/O, so tests talking to this
server should run on the real clock (with small retry delays).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import h11
import trio

from ._caching import PromptCache
from ._faults import Fault
from ._floods import endless_parts, send_endless, send_trickle
from ._formats import document, render_events
from ._responses import IssuedReasoning
from ._thinking import ThinkingSigner, thinking_refusal
from ._wire import anthropic_error, as_reply, echo, openai_error

__all__ = ["LoopbackServer", "RecordedRequest", "openai_server"]

logger = logging.getLogger("pride.testing")

#: Bytes read from a socket at a time.
RECEIVE_SIZE = 65536

_ROUTES = {
    "/v1/chat/completions": "openai",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
}


@attrs.frozen
class RecordedRequest:
    """One request the loopback server received.

    Attributes:
        method: the HTTP method.
        path: the request path without the query (``/v1/chat/completions``).
        headers: request headers, names lower-cased (credentials included:
            this is your own test server).
        body: the decoded JSON body, or ``None`` when it was not JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _Request:
    __slots__ = ("body", "headers", "method", "path")

    def __init__(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body


class LoopbackServer:
    """The running server; get one from [`openai_server`][pride.testing.openai_server].

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"``, the ``base_url`` for pride
            models (OpenAI and Anthropic alike) and for the ``openai`` SDK.
        root_url: ``"http://127.0.0.1:PORT"``, the ``base_url`` for the
            ``anthropic`` SDK (which adds ``/v1`` itself).
        requests: every request received, in order (when recording).
        request_count: how many requests were received (always counted).
        disconnects: clients that hung up on a
            [`Fault.stall_stream`][pride.testing.Fault.stall_stream], an endless
            fault or a [`Fault.trickle`][pride.testing.Fault.trickle].
        errors: exceptions raised by script callables or bad script items
            (each answered with HTTP 500, or the connection closed, and logged).
        issued_reasoning: the ``encrypted_content`` of every reasoning item
            the Responses endpoint sent. A request sending back reasoning
            that is not among them is refused with HTTP 400, as the real API
            refuses reasoning it cannot decrypt; so a test sees that pride
            sends reasoning back unchanged.
        require_thinking: refuse what Anthropic's API refuses while thinking
            is on (see [`openai_server`][pride.testing.openai_server]).
        refusals: the reasons of the requests refused for their thinking, in
            order (each answered HTTP 400, no script item used).
    """

    def __init__(
        self, script: Any, *, chunk_size: int, record: bool, require_thinking: bool = False
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
        self._items: list[Any] | None = None
        self._function: Callable[[Any], Any] | None = None
        if callable(script):
            self._function = script
        elif script is not None:
            if isinstance(script, str | bytes) or not isinstance(script, Sequence):
                raise TypeError("script must be a list of items, a callable, or None")
            self._items = list(script)
        self._used = 0
        self.chunk_size = chunk_size
        self.record = record
        self.base_url = ""
        self.root_url = ""
        self.requests: list[RecordedRequest] = []
        self.request_count = 0
        self.disconnects = 0
        self.errors: list[Exception] = []
        self._reasoning = IssuedReasoning()
        self.issued_reasoning = self._reasoning.tokens
        self.require_thinking = require_thinking
        self.refusals: list[str] = []
        self._signer = ThinkingSigner()
        self._cache = PromptCache()
        self._changed = trio.Event()

    def _bind(self, host: str, port: int) -> None:
        self.root_url = f"http://{host}:{port}"
        self.base_url = f"{self.root_url}/v1"

    def add(self, *items: Any) -> None:
        """Append items to a list script (or start one if the server echoed)."""
        if self._function is not None:
            raise TypeError("this server's script is a callable; it cannot take items")
        if self._items is None:
            self._items = []
        self._items.extend(items)

    async def wait_for_disconnects(self, count: int = 1) -> None:
        """Wait until at least ``count`` clients hung up on a stalled stream."""
        while self.disconnects < count:
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- one connection -----------------------------------------------------------------

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """Serve requests on one connection until it closes (keep-alive aware)."""
        conn = h11.Connection(h11.SERVER)
        try:
            async with stream:
                while True:
                    request = await self._read_request(conn, stream)
                    if request is None:
                        return
                    keep_open = await self._dispatch(conn, stream, request)
                    if not keep_open or conn.our_state is not h11.DONE:
                        return
                    if conn.their_state is not h11.DONE:
                        return
                    conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError) as exc:
            logger.debug("loopback server: connection ended: %r", exc)
        except Exception as exc:  # a bad script item: keep serving, but say so
            logger.exception("loopback server: a request failed; closing its connection")
            self.errors.append(exc)

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> _Request | None:
        head: h11.Request | None = None
        chunks: list[bytes] = []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(RECEIVE_SIZE))
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
        assert head is not None
        raw = b"".join(chunks)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in head.headers}
        path = head.target.decode("latin-1").partition("?")[0]
        request = _Request(head.method.decode("ascii"), path, headers, body)
        self.request_count += 1
        if self.record:
            self.requests.append(RecordedRequest(request.method, path, headers, body))
        return request

    async def _send(self, conn: h11.Connection, stream: trio.SocketStream, *events: Any) -> None:
        await stream.send_all(b"".join(conn.send(event) or b"" for event in events))

    async def _send_json(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        status: int,
        body: Any,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        head = [
            ("content-type", "application/json"),
            ("content-length", str(len(data))),
            *headers,
        ]
        await self._send(
            conn,
            stream,
            h11.Response(status_code=status, headers=head),
            h11.Data(data=data),
            h11.EndOfMessage(),
        )

    def _next_item(self, request: _Request) -> Any:
        if self._function is not None:
            return self._function(request.body)
        if self._items is None:
            return echo(request.body)
        if self._used >= len(self._items):
            message = (
                f"loopback server script exhausted: it has {len(self._items)} items and "
                f"this is request {self.request_count}"
            )
            return Fault("exhausted", code=400, body=message)
        item = self._items[self._used]
        self._used += 1
        return item

    async def _dispatch(
        self, conn: h11.Connection, stream: trio.SocketStream, request: _Request
    ) -> bool:
        """Answer one request; return whether the connection may be kept open."""
        wire = _ROUTES.get(request.path)
        error = anthropic_error if wire == "anthropic" else openai_error
        if wire is None or request.method != "POST":
            message = f"loopback server: no route for {request.method} {request.path}"
            await self._send_json(conn, stream, 404, error(404, message))
            return True
        if wire == "responses":
            refusal = self._reasoning.refusal(request.body)
            if refusal is not None:
                await self._send_json(conn, stream, 400, openai_error(400, refusal))
                return True
        if wire == "anthropic" and self.require_thinking:
            refusal = thinking_refusal(request.body, self._signer)
            if refusal is not None:  # as the API: refused before the model runs, and kept
                self.refusals.append(refusal)
                await self._send_json(conn, stream, 400, anthropic_error(400, refusal))
                return True
        try:
            item = self._next_item(request)
            if callable(item) and not isinstance(item, Fault):
                item = item(request.body)
            if inspect.isawaitable(item):
                item = await item
            if not isinstance(item, Fault):  # normalised here, so a bad item fails early
                item = as_reply(echo(request.body) if item is None else item)
        except Exception as exc:
            logger.exception(
                "loopback server: the script failed for request %d", self.request_count
            )
            self.errors.append(exc)
            await self._send_json(conn, stream, 500, error(500, f"loopback script failed: {exc}"))
            return True
        if isinstance(item, Fault):
            return await self._fault(conn, stream, request, item, wire)
        return await self._reply(conn, stream, request, item, wire)

    async def _reply(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        request: _Request,
        item: Any,
        wire: str,
        *,
        cut_after: int | None = None,
        stall_after: int | None = None,
    ) -> bool:
        body = request.body
        reply = self._cache.cached(as_reply(echo(body) if item is None else item), body, wire)
        streaming = isinstance(body, dict) and body.get("stream") is True
        if not streaming:
            doc = document(reply, body, wire, self._reasoning, signer=self._signer)
            if cut_after is None:
                await self._send_json(conn, stream, 200, doc)
                return True
            data = json.dumps(doc).encode()
            head = [("content-type", "application/json"), ("content-length", str(len(data)))]
            await self._send(conn, stream, h11.Response(status_code=200, headers=head))
            await stream.send_all(data[: len(data) // 2])
            return False  # the caller closes the connection: the body is cut short
        events = render_events(
            reply, body, wire, self.chunk_size, self._reasoning, signer=self._signer
        )
        head = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
        await self._send(conn, stream, h11.Response(status_code=200, headers=head))
        if stall_after is not None:
            try:
                for event in events[:stall_after]:
                    await self._send(conn, stream, h11.Data(data=event))
            except trio.BrokenResourceError:
                pass  # the client hung up before the stall began: that is the hang-up
            else:
                await self._wait_for_hangup(stream)
            self._hung_up()
            return False
        for index, event in enumerate(events):
            if index == cut_after:
                return False
            await self._send(conn, stream, h11.Data(data=event))
        if cut_after is not None:
            return False
        await self._send(conn, stream, h11.EndOfMessage())
        return True

    def _render(
        self, request: _Request, item: Any, wire: str
    ) -> tuple[list[tuple[str, str]], bytes]:
        """The head and the whole body of the reply to ``request`` (plain or an event stream)."""
        body = request.body
        reply = self._cache.cached(as_reply(echo(body) if item is None else item), body, wire)
        if isinstance(body, dict) and body.get("stream") is True:
            events = b"".join(
                render_events(
                    reply, body, wire, self.chunk_size, self._reasoning, signer=self._signer
                )
            )
            return [("content-type", "text/event-stream"), ("cache-control", "no-cache")], events
        doc = document(reply, body, wire, self._reasoning, signer=self._signer)
        data = json.dumps(doc).encode()
        return [("content-type", "application/json"), ("content-length", str(len(data)))], data

    def _hung_up(self) -> None:
        self.disconnects += 1
        self._notify()

    async def _wait_for_hangup(self, stream: trio.SocketStream) -> None:
        try:
            while await stream.receive_some(RECEIVE_SIZE):
                pass
        except trio.BrokenResourceError:
            pass  # a reset is a hang-up too

    async def _fault(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        request: _Request,
        fault: Fault,
        wire: str,
    ) -> bool:
        error = anthropic_error if wire == "anthropic" else openai_error
        if fault.kind in ("status", "exhausted"):
            if fault.kind == "exhausted":
                logger.warning("%s", fault.body)
            body = fault.body
            if body is None or fault.kind == "exhausted":
                body = error(fault.code, str(body or f"loopback: simulated HTTP {fault.code}"))
            elif isinstance(body, str):
                body = body.encode()
            headers = []
            if fault.retry_after is not None:
                headers.append(("retry-after", str(fault.retry_after)))
            await self._send_json(conn, stream, fault.code, body, headers)
            return True
        if fault.kind == "slow_first_byte":
            await trio.sleep(fault.seconds)
            return await self._reply(conn, stream, request, fault.reply, wire)
        if fault.kind == "cut_stream":
            return await self._reply(
                conn, stream, request, fault.reply, wire, cut_after=fault.after_chunks
            )
        if fault.kind == "stall_stream":
            return await self._reply(
                conn, stream, request, fault.reply, wire, stall_after=fault.after_chunks
            )
        if fault.kind == "raw":
            body = fault.body
            if isinstance(body, str):
                body = body.encode()
            elif not isinstance(body, bytes):
                body = json.dumps(body).encode()
            head = [
                ("content-type", fault.content_type),
                ("content-length", str(len(body))),
                *fault.headers,
            ]
            await self._send(
                conn,
                stream,
                h11.Response(status_code=fault.code, headers=head),
                h11.Data(data=body),
                h11.EndOfMessage(),
            )
            return True
        if fault.kind in ("endless_body", "endless_line", "endless_events"):
            parts = endless_parts(fault.kind.removeprefix("endless_"), wire)
            await send_endless(conn, stream, parts, fault.content_length)
            self._hung_up()
            return False
        if fault.kind == "trickle":
            head, body = self._render(request, fault.reply, wire)
            if not await send_trickle(conn, stream, head, body, fault.seconds):
                self._hung_up()
                return False
            return True
        if fault.kind == "malformed_json":
            await self._send_json(conn, stream, 200, b'{"choices": [{"message": {"content": "x"')
            return True
        if fault.kind == "malformed_sse":
            head = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]
            events = [
                b'data: {"choices": [{"index": 0, "delta": {"con\n\n',
                b"data: [DONE]\n\n",
            ]
            await self._send(
                conn,
                stream,
                h11.Response(status_code=200, headers=head),
                *(h11.Data(data=e) for e in events),
                h11.EndOfMessage(),
            )
            return True
        raise ValueError(f"unknown fault kind {fault.kind!r}")


@asynccontextmanager
async def openai_server(
    script: Any = None,
    *,
    chunk_size: int = 8,
    record: bool = True,
    host: str = "127.0.0.1",
    port: int = 0,
    require_thinking: bool = False,
) -> AsyncIterator[LoopbackServer]:
    """Run a loopback OpenAI- (chat completions, Responses) and Anthropic-compatible server.

    ```python
    async with openai_server(["hello", Fault.status(429, retry_after=0), "again"]) as server:
        model = iModel("openai/test", base_url=server.base_url, api_key="test")
        ...
    assert len(server.requests) == 3
    ```

    Args:
        script: what to answer, one item per request, in order: a ``str``
            (text), a [`ToolCall`][pride.llm.ToolCall] or a list of them, a
            [`ScriptedReply`][pride.llm.ScriptedReply] (text, tool calls, usage), a
            [`Fault`][pride.testing.Fault], or a callable taking the request's JSON body and
            returning one of those (sync or async). Or one such callable for
            every request. ``None`` echoes the last user message. A list
            that runs out answers HTTP 400 saying so (not retried by clients).
        chunk_size: characters of text per streamed event.
        record: keep every request in ``server.requests`` (turn off for
            benchmarks; ``request_count`` is always kept).
        host: the address to bind (loopback by default).
        port: the port; 0 picks a free one.
        require_thinking: act as Anthropic's API does while a request turns
            thinking on: refuse (HTTP 400, the API's error) a budget under
            1,024 tokens or not below ``max_tokens``, a thinking block this
            server did not sign or that was changed, and a request continuing a
            tool loop whose assistant turn does not open with its thinking
            block. Off by default: the server then checks nothing. Either way,
            a script's ``thinking`` goes out as signed thinking blocks.

    Yields:
        the [`LoopbackServer`][pride.testing.LoopbackServer], listening, with ``base_url`` set.

    The server runs in a nursery inside the current trio run and stops, with
    all its connections, when the block is left; an exception from the block
    propagates unchanged (not wrapped in an exception group).
    """
    server = LoopbackServer(
        script, chunk_size=chunk_size, record=record, require_thinking=require_thinking
    )
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            partial(trio.serve_tcp, server.serve_connection, port, host=host)
        )
        address = listeners[0].socket.getsockname()
        server._bind(address[0], address[1])
        try:
            yield server
        except BaseException as exc:  # re-raised below, outside the nursery
            body_error = exc
        finally:
            nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
