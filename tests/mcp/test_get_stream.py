"""pride's MCP client keeps its GET stream (the server's list-change notices) open
for as long as the session lives: a stream the server ends (200, then the body's
end) or that breaks at the transport level (a TCP reset) is opened again, after
the bounded backoff a stream refused as busy waits (1 s, doubling, 60 s at most).

Before, such a stream was logged at debug level and never opened again: the
client went without the server's notices for good. The server here is a small
streamable-HTTP MCP server on a real loopback socket in the test's own trio run
(h11, one request per connection), so the autojump clock runs the backoff's
seconds at once.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import h11
import pytest
import trio
import trio.testing

from pride import Session


class _Server:
    """Answers MCP's initialisation and ``tools/list``; each GET stream ends as
    ``ending`` says: ``"end"`` (200, then the body's end), ``"reset"`` (200, a
    comment, then a TCP reset), ``"late"`` (the first stream ends after
    ``held`` seconds, the others at once), or ``"gone"`` (the first stream ends at
    once, and each after it is 404: the session ended)."""

    def __init__(self, ending: str, held: float = 0.0) -> None:
        self.ending = ending
        self.held = held
        self.gets: list[float] = []  # when each GET stream was asked for
        self.asked = trio.Event()  # set at each GET, then replaced

    async def serve(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                return
        assert request is not None
        if request.method == b"GET":
            await self._get(connection, stream)
        elif request.method == b"POST":
            await self._post(connection, stream, json.loads(body))
        else:
            await _send(connection, stream, 200, b"")
        await stream.aclose()

    async def _post(
        self, connection: h11.Connection, stream: trio.SocketStream, message: dict[str, Any]
    ) -> None:
        if "id" not in message:
            await _send(connection, stream, 202, b"")
            return
        result: dict[str, Any] = {}
        if message["method"] == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "ends-its-streams", "version": "0"},
            }
        elif message["method"] == "tools/list":
            result = {"tools": []}
        answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        await _send(connection, stream, 200, answer.encode(), "application/json")

    async def _get(self, connection: h11.Connection, stream: trio.SocketStream) -> None:
        self.gets.append(trio.current_time())
        self.asked.set()
        self.asked = trio.Event()
        if self.ending == "gone" and len(self.gets) > 1:
            await _send(connection, stream, 404, b"no such session")
            return
        head = [("content-type", "text/event-stream"), ("mcp-session-id", "s1")]
        await stream.send_all(connection.send(h11.Response(status_code=200, headers=head)))
        if self.ending == "reset":
            await stream.send_all(connection.send(h11.Data(data=b": open\n\n")))
            linger = struct.pack("ii", 1, 0)  # closed with a reset, not a FIN
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            return
        if self.ending == "late" and len(self.gets) == 1:
            await trio.sleep(self.held)
        await stream.send_all(connection.send(h11.EndOfMessage()))

    async def wait_for_gets(self, count: int) -> None:
        while len(self.gets) < count:
            await self.asked.wait()


async def _send(
    connection: h11.Connection,
    stream: trio.SocketStream,
    status: int,
    body: bytes,
    kind: str = "text/plain",
) -> None:
    head = [
        ("content-type", kind),
        ("content-length", str(len(body))),
        ("mcp-session-id", "s1"),
        ("connection", "close"),
    ]
    data = connection.send(h11.Response(status_code=status, headers=head))
    data += connection.send(h11.Data(data=body)) + connection.send(h11.EndOfMessage())
    await stream.send_all(data)


async def _serving(server: _Server, nursery: trio.Nursery) -> str:
    serving = functools.partial(trio.serve_tcp, server.serve, 0, host="127.0.0.1")
    listeners = await nursery.start(serving)
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
async def nursery() -> AsyncIterator[trio.Nursery]:
    async with trio.open_nursery() as nursery:
        yield nursery
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("ending", ["end", "reset"])
async def test_a_get_stream_that_ends_is_opened_again_ever_more_slowly(
    ending: str, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A server ending every GET stream at once (or resetting its connection) is
    asked again 1 s, then 2 s, then 4 s after: the backoff of a refused stream,
    never a loop; and the client closing while it waits asks no more."""
    server = _Server(ending)
    url = await _serving(server, nursery)
    with trio.fail_after(60):
        async with Session() as clients:
            await clients.spawn_mcp("ends", url=url)
            await server.wait_for_gets(4)
        asked = len(server.gets)
    gaps = [later - earlier for earlier, later in itertools.pairwise(server.gets)]
    assert gaps[:3] == pytest.approx([1.0, 2.0, 4.0], abs=0.05)
    assert asked == 4 and len(server.gets) == 4


async def test_a_get_stream_that_served_a_while_is_opened_again_at_the_first_backoff(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A stream open 90 s (past the 60 s the backoff grows to) before its server
    ended it says nothing of a server in trouble, and no warning: the next is asked
    for 1 s after, and the backoff starts again for the streams that end at once
    (1 s, 2 s, ...), the first of which is a warning."""
    server = _Server("late", held=90.0)
    url = await _serving(server, nursery)
    warned: list[str] = []

    class Warned(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "GET stream" in record.getMessage():
                warned.append(record.getMessage())

    logger = logging.getLogger("pride.mcp")
    handler = Warned(logging.WARNING)
    logger.addHandler(handler)
    try:
        with trio.fail_after(200):
            async with Session() as clients:
                await clients.spawn_mcp("ends", url=url)
                await server.wait_for_gets(4)
    finally:
        logger.removeHandler(handler)
    gaps = [later - earlier for earlier, later in itertools.pairwise(server.gets)]
    assert gaps[:3] == pytest.approx([91.0, 1.0, 2.0], abs=0.05)
    assert len(warned) == 1 and "ended 1 time(s) in a row" in warned[0], warned


async def test_a_get_stream_answered_404_breaks_the_connection_as_a_post_s_does(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A 404 to the GET stream (opened again after the first ended) says the server
    ended the session: the connection
    breaks (a crash of the child, which its restart type decides about), as a 404
    to a POST does. Before, it was logged at debug level and the client sat on a
    session the server no longer had, without notices."""
    server = _Server("gone")
    url = await _serving(server, nursery)
    crashed = trio.Event()

    class Crash(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "404 to its GET stream" in record.getMessage():
                crashed.set()

    logger = logging.getLogger("pride")
    handler = Crash(logging.WARNING)
    logger.addHandler(handler)
    try:
        with trio.fail_after(60):
            async with Session() as clients:
                await clients.spawn_mcp("gone", url=url, restart="temporary")
                await crashed.wait()
    finally:
        logger.removeHandler(handler)
    assert len(server.gets) == 2
