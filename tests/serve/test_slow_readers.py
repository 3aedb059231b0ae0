"""``pride serve`` and a client that stops reading its answer.

A client may keep its connection open and read nothing: a program that
breaks out of a stream's loop without closing it, a laptop put to sleep.
Once the socket's buffers are full, a write to it waits for as long as the
client lives (hypercorn shields each write, so not even a shutdown could end
it). These tests run the server in their own process (`conftest.in_process`)
with a short ``send_timeout``, and a raw socket that reads nothing, its
receive buffer shrunk so it fills at once.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import trio

from pride import Branch, RunEnd, RunFailed, ScriptedModel, Session, Signal
from pride.llm import ModelRequest
from pride.serve import Grant, ServeOptions, Server, Tokens

from .conftest import TOKEN, in_process

FLOOD = "x" * (16 * 1024 * 1024)
"""The answer to ``flood``: far more than the socket buffers of both ends hold."""


def _script(request: ModelRequest) -> str:
    last = request.messages[-1].get("content")
    return FLOOD if last == "flood" else f"echo: {last}"


def agent() -> Branch:
    """``writer``: ``flood`` answers `FLOOD` (a stream of it in 64-character items)."""
    return Branch(name="writer", chat_model=ScriptedModel(_script, chunk_size=64, keep_calls=0))


async def reads_nothing(url: str, path: str, body: dict[str, Any]) -> trio.SocketStream:
    """A connection that sends ``POST path`` with ``body`` and never reads a byte."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = trio.socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    await sock.connect((host, int(port)))
    stream = trio.SocketStream(sock)
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    await stream.send_all(head.encode() + data)
    return stream


async def test_a_stream_nobody_reads_is_cancelled_and_its_branch_serves_on() -> None:
    """A turn streamed to a client that reads nothing waited on the client forever,
    its branch busy (every other request to it waited too); past ``send_timeout``
    the client is taken for gone: the turn is cancelled and the branch serves on."""
    async with Session("slow-readers") as session:
        await session.spawn(agent())
        failed: list[RunFailed] = []
        ended = trio.Event()

        def on_failed(signal: Signal) -> None:
            assert isinstance(signal, RunFailed)
            failed.append(signal)
            ended.set()

        session.observe(RunFailed, handler=on_failed)
        options = ServeOptions(port=0, send_timeout=1.0)
        async with in_process(session, options) as (_, url):
            command = {"command": {"type": "Run", "instruction": "flood"}}
            async with await reads_nothing(url, "/v1/branches/writer/stream", command):
                with trio.fail_after(20):
                    await ended.wait()
                assert failed[0].branch_name == "writer" and failed[0].cancelled, failed
                headers = {"Authorization": f"Bearer {TOKEN}"}
                async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                    body = {"command": {"type": "ChatAndRecord", "instruction": "next"}}
                    answer = await http.post("/v1/branches/writer/ask", json=body)
                assert answer.json()["result"] == "echo: next", answer.text


async def test_the_server_stops_within_its_grace_though_a_client_reads_nothing() -> None:
    """An answer written to a client that reads nothing held the server open after
    ``shutdown`` (SIGTERM's drain) for as long as that client kept its connection;
    it now stops within its grace period and the margin for last answers."""
    async with Session("slow-readers") as session:
        await session.spawn(agent())
        answered = trio.Event()
        session.observe(RunEnd, handler=lambda _: answered.set())
        server = Server(session, ServeOptions(port=0), Tokens([(TOKEN, Grant("test"))]), grace=1)
        stopped = trio.Event()

        async def run(task_status: trio.TaskStatus[str]) -> None:
            try:
                await server.run(task_status=task_status)
            finally:
                stopped.set()

        async with trio.open_nursery() as nursery:
            url = await nursery.start(run)
            command = {"command": {"type": "ChatAndRecord", "instruction": "flood"}}
            async with await reads_nothing(url, "/v1/branches/writer/ask", command):
                await answered.wait()  # its answer is being written, and never read
                server.shutdown()
                with trio.move_on_after(15) as late:
                    await stopped.wait()
            # Closing the connection (leaving the block) let a server still serving go.
            assert not late.cancelled_caught, "the server waited on a client that reads nothing"
