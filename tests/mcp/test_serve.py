"""pride as an MCP server: ``pride mcp APP --expose NAME`` driven by the SDK's client.

The server is a real subprocess (``python -m pride.cli mcp ...``) and the
client is the MCP SDK's own ``ClientSession`` over its ``stdio_client``.
"""

from __future__ import annotations

import functools
import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
import trio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

ANNOUNCE = "pride mcp: serving on "  # the documented line (docs/mcp.md)

ROOT = Path(__file__).parent.parent.parent
APP = "tests/mcp/app.py:build"


def _params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "pride.cli", "mcp", APP, *args],
        cwd=str(ROOT),
    )


class _Ids:
    """Wraps the client's write stream to learn the JSON-RPC id of each tools/call it sends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[Any] = []

    async def send(self, item: Any) -> None:
        root = item.message.root
        if isinstance(root, types.JSONRPCRequest) and root.method == "tools/call":
            self.calls.append(root.id)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _Ids:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


async def test_pride_serves_exposed_branches_over_stdio() -> None:
    """List (only what is exposed), call with progress, cancel one mid-turn."""
    async with stdio_client(_params("--expose", "helper")) as (read, write):
        ids = _Ids(write)
        async with ClientSession(read, ids) as client:  # type: ignore[arg-type]
            info = await client.initialize()
            assert info.serverInfo.name == "pride"
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(tools) == {"ask_helper", "helper_stats", "helper_crunch"}  # not "private"
            assert tools["helper_crunch"].inputSchema["required"] == ["count"]
            assert tools["ask_helper"].inputSchema["required"] == ["instruction"]

            result = await client.call_tool("ask_helper", {"instruction": "hello"})
            assert not result.isError
            assert result.content[0].text == "echo: hello"

            notes: list[tuple[float, str | None]] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                notes.append((done, message))

            result = await client.call_tool(
                "helper_crunch", {"count": 3}, progress_callback=progress
            )
            assert result.content[0].text == "3 steps done", result
            assert notes == [
                (1.0, "calling tool steps"),
                (2.0, "tool steps: 1/3: step 1"),
                (3.0, "tool steps: 2/3: step 2"),
                (4.0, "tool steps: 3/3: step 3"),
                (5.0, "tool steps answered"),
            ]
            notes.clear()
            await client.call_tool("ask_helper", {"instruction": "hi"}, progress_callback=progress)
            assert notes == [(1.0, "the model answered")]

            async def slow_call() -> None:
                await client.call_tool("ask_helper", {"instruction": "slow"})

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                while len(ids.calls) < 4:
                    await trio.sleep(0.01)  # the request is on its way; its id is known
                await client.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(
                                requestId=ids.calls[3], reason="test"
                            )
                        )
                    )
                )
                tg.cancel_scope.cancel()
            stats = await client.call_tool("helper_stats", {})
            assert stats.structuredContent == {"cancelled": 1}


async def test_a_name_that_is_not_a_branch_is_refused() -> None:
    process = await trio.run_process(
        [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "nobody"],
        cwd=str(ROOT),
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert process.returncode == 2
    [line] = process.stderr.decode().splitlines()
    assert line.startswith("pride mcp: --expose nobody: no branch 'nobody'")
    assert line.endswith("(branches: helper, private)"), line  # what it could have named


async def _announced(stream: trio.abc.ReceiveStream) -> str:
    """The URL from ``pride mcp``'s "serving on" line (the first line on its stdout)."""
    buffer = b""
    while b"\n" not in buffer:
        chunk = await stream.receive_some(4096)
        assert chunk, f"pride mcp exited before announcing its address (stdout: {buffer!r})"
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    assert line.startswith(ANNOUNCE), line
    return line[len(ANNOUNCE) :]


async def test_pride_serves_over_http_to_pride() -> None:
    """``--http 0``: streamable HTTP on a port the system chose, announced on stdout, here
    with pride itself as the client (nothing guesses a free port another process could take)."""
    from pride import Session

    argv = [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper", "--http", "0"]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(
                trio.run_process, argv, cwd=str(ROOT), check=False, stdout=subprocess.PIPE
            )
        )
        try:
            with trio.fail_after(30):  # the server takes its import time to listen
                url = await _announced(process.stdout)
            host, port = url.removeprefix("http://").removesuffix("/mcp").split(":")
            assert host == "127.0.0.1" and int(port) > 0
            async with Session() as session:
                server = await session.spawn_mcp("pride", url=url)
                assert set(server.tool_names) == {"ask_helper", "helper_stats", "helper_crunch"}
                result = await server.call_tool("ask_helper", {"instruction": "over http"})
                assert result.content[0].text == "echo: over http"
        finally:
            process.terminate()
    assert process.returncode == 0


async def test_a_port_in_use_is_refused_naming_the_address() -> None:
    """``--http PORT`` on a port another socket listens on: status 2, the address named."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper"]
        process = await trio.run_process(
            [*argv, "--http", str(port)],
            cwd=str(ROOT),
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert process.returncode == 2
    [line] = process.stderr.decode().splitlines()
    assert line.startswith(f"pride mcp: cannot serve MCP on 127.0.0.1:{port}"), line
    assert ANNOUNCE.encode() not in process.stdout


async def test_serve_mcp_reports_the_port_it_bound() -> None:
    """``serve_mcp(..., http=0)`` under ``nursery.start`` gives the endpoint's URL, real port
    included; a second server asked for that same port fails with OSError, not silently."""
    from pride import Branch, ScriptedModel, Session
    from pride.mcp import serve_mcp

    async with Session() as session:
        await session.spawn(Branch(name="helper", chat_model=ScriptedModel(["hello"])))
        async with trio.open_nursery() as nursery:
            url = await nursery.start(functools.partial(serve_mcp, session, ["helper"], http=0))
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            server = await session.spawn_mcp("self", url=url)
            result = await server.call_tool("ask_helper", {"instruction": "hi"})
            assert result.content[0].text == "hello"
            port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
            with pytest.raises(OSError):
                await nursery.start(functools.partial(serve_mcp, session, ["helper"], http=port))
            nursery.cancel_scope.cancel()


async def test_each_branch_is_described_by_what_its_application_says() -> None:
    """Issue 35 item 7: a client's model tells the agents apart by their tools'
    descriptions: the description given in the branch's metadata, else its system
    message (on one line, shortened), else a plain one naming the agent."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from pride import Branch, ScriptedModel, Session
    from pride.mcp import build_server

    long = "You review drafts.\n\n" + "Be thorough. " * 200
    async with Session() as session:
        for branch in (
            Branch(
                name="critic",
                system=long,
                metadata={"description": "Reviews drafts and lists their weak points."},
                chat_model=ScriptedModel(["ok"]),
            ),
            Branch(name="writer", system=long, chat_model=ScriptedModel(["ok"])),
            Branch(name="plain", chat_model=ScriptedModel(["ok"])),
        ):
            await session.spawn(branch)
        server = build_server(session, ["critic", "writer", "plain"])
        async with create_connected_server_and_client_session(server) as client:
            listed = await client.list_tools()
    described = {tool.name: tool.description or "" for tool in listed.tools}
    assert "Reviews drafts and lists their weak points." in described["ask_critic"]
    assert "You review drafts. Be thorough." in described["ask_writer"]
    assert "\n" not in described["ask_writer"] and len(described["ask_writer"]) < 1000
    assert described["ask_plain"].startswith("Ask the agent 'plain'.")
    assert len(set(described.values())) == 3
    for text in described.values():
        assert "remembers" in text  # every one says the conversation is kept


FLOOD = 10_000
"""tools/list requests a client writes without reading an answer (half a megabyte)."""


async def test_a_client_that_stops_reading_cannot_grow_the_server() -> None:
    """A client writes 10,000 requests and reads none of the answers. The SDK runs each
    request in a task that holds its answer until it is written, and pride read on: the
    process grew by ~15 KB a request (150 MB here, a gigabyte at 60,000). Now it stops
    reading past MAX_PENDING_REQUESTS (the client's writes wait), stays within 50 MB of
    where it started, and answers every request once the client reads."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=str(ROOT),
    )
    assert process.stdin is not None and process.stdout is not None
    stdout = process.stdout
    buffer = bytearray()

    async def line() -> bytes:
        while b"\n" not in buffer:
            chunk = await stdout.receive_some(1 << 20)
            assert chunk, "pride mcp closed its output"
            buffer.extend(chunk)
        end = buffer.index(b"\n")
        taken = bytes(buffer[:end])
        del buffer[: end + 1]
        return taken

    def message(body: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", **body}).encode() + b"\n"

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "flood", "version": "0"}
    try:
        with trio.fail_after(60):
            await process.stdin.send_all(
                message({"id": 0, "method": "initialize", "params": hello})
            )
            assert json.loads(await line())["id"] == 0
            await process.stdin.send_all(message({"method": "notifications/initialized"}))
            started = psutil.Process(process.pid).memory_info().rss
            flood = b"".join(
                message({"id": n, "method": "tools/list"}) for n in range(1, FLOOD + 1)
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(process.stdin.send_all, flood)
                with trio.move_on_after(5):  # an observation window, not a synchronisation
                    while psutil.Process(process.pid).memory_info().rss - started < 50e6:
                        await trio.sleep(0.1)
                grown = psutil.Process(process.pid).memory_info().rss - started
                answered = {json.loads(await line())["id"] for _ in range(FLOOD)}
            assert grown < 50e6, f"grew by {grown / 1e6:.0f} MB"
            assert answered == set(range(1, FLOOD + 1))
    finally:
        process.kill()
        await process.wait()


async def test_a_client_writing_bad_lines_cannot_flood_the_log() -> None:
    """A client writes 20,000 lines that are not MCP messages (text, a JSON-RPC batch,
    which MCP no longer has, a message of no JSON-RPC shape). Each was skipped with a
    warning of its whole validation error: ~9 MB of standard error here, without
    bound for a client that keeps writing. Now the first few are logged, short, and
    the rest counted (a line a minute, and one at the end of the input); the request
    after them is answered, as before."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(ROOT),
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    logged = bytearray()

    async def drain() -> None:
        while chunk := await stderr.receive_some(1 << 20):
            logged.extend(chunk)

    def message(body: dict[str, Any]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", **body}).encode() + b"\n"

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "noise", "version": "0"}
    tools_list = {"id": 1, "method": "tools/list"}
    bad = [b"not json at all\n", b"[" + message(tools_list).strip() + b"]\n", b'{"a": 1}\n']
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                await stdin.send_all(message({"id": 0, "method": "initialize", "params": hello}))
                await stdin.send_all(message({"method": "notifications/initialized"}))
                await stdin.send_all(b"".join(bad[n % 3] for n in range(20_000)))
                await stdin.send_all(message(tools_list))
                answers = [json.loads(line) for line in await _lines(stdout, 2)]
                await stdin.aclose()
                assert await process.wait() == 0
        assert [answer["id"] for answer in answers] == [0, 1]
        text = logged.decode()
        assert len(logged) < 20_000, f"{len(logged)} bytes logged"
        assert "more lines of the MCP client that are not JSON-RPC" in text, text[-2000:]
        assert "(20000 in all)" in text, text[-2000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _lines(stream: trio.abc.ReceiveStream, count: int) -> list[bytes]:
    """The first ``count`` lines of ``stream``."""
    buffer = bytearray()
    while buffer.count(b"\n") < count:
        chunk = await stream.receive_some(1 << 20)
        assert chunk, f"the stream ended after {bytes(buffer)!r}"
        buffer.extend(chunk)
    return bytes(buffer).split(b"\n")[:count]


def _post(port: int, body: dict[str, Any], session_id: str | None = None) -> bytes:
    data = json.dumps({"jsonrpc": "2.0", **body}).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(data)}\r\n"
    )
    if session_id is not None:
        head += f"mcp-session-id: {session_id}\r\nmcp-protocol-version: 2025-06-18\r\n"
    return head.encode() + b"\r\n" + data


async def _initialized(port: int) -> str:
    """The MCP session id of an ``initialize`` sent over a raw connection of its own
    (closed once the answer's head is read: the session outlives it)."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "stalled", "version": "0"}
    with trio.socket.socket() as opening:
        await opening.connect(("127.0.0.1", port))
        await opening.send(_post(port, {"id": 0, "method": "initialize", "params": hello}))
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await opening.recv(65536)
            assert chunk, head
            head += chunk
    [sid] = [
        line.split(b":", 1)[1].strip().decode()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"mcp-session-id:")
    ]
    return sid


async def test_sigterm_is_not_held_by_an_http_client_that_stops_reading() -> None:
    """An HTTP client starts a call with a progress token and reads nothing of its
    answer. hypercorn's write waits, shielded, for as long as the connection stays
    open: the handler stuck in it held its call, and hypercorn waits for every
    request, so after SIGTERM ``pride mcp --http`` never exited. Each write now
    waits in a task of the server's (as ``pride serve``'s do), so SIGTERM ends the
    process at once, with 0, the stalled client still connected."""
    from pride import Session

    argv = [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper", "--http", "0"]
    process = await trio.lowlevel.open_process(
        argv, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    stalled = trio.socket.socket()
    try:
        with trio.fail_after(60):
            url = await _announced(process.stdout)
            port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
            sid = await _initialized(port)
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            await stalled.connect(("127.0.0.1", port))
            call: dict[str, Any] = {"name": "helper_crunch", "arguments": {"count": 100_000}}
            call["_meta"] = {"progressToken": 7}
            await stalled.send(_post(port, {"id": 1, "method": "tools/call", "params": call}, sid))
            async with Session() as session:
                server = await session.spawn_mcp("pride", url=url)
                # Answered once the crunch turn before it in the mailbox has ended:
                # its progress (far more than the socket buffers hold) is on its way.
                await server.call_tool("helper_stats", {})
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
    finally:
        stalled.close()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_an_http_client_that_reads_nothing_past_send_timeout_has_its_call_cancelled() -> None:
    """A client starts a long call with a progress token and reads nothing of its
    answer: its progress fills the socket buffers, and past ``send_timeout`` (0.5 s
    here, 30 s by default) the client is taken for gone, which cancels its call's turn,
    as a client whose connection closed has its turn cancelled. Before: the stall was
    logged and the turn ran on to its end for nobody."""
    from pride import RunEnd, RunFailed, Session
    from pride.mcp import serve_mcp
    from tests.mcp.app import build

    ended: list[RunEnd | RunFailed] = []
    done = trio.Event()

    def on_end(event: RunEnd | RunFailed) -> None:
        if event.branch_name == "helper":
            ended.append(event)
            done.set()

    async with Session() as session:
        await build(session)
        session.observe(RunEnd, RunFailed, handler=on_end)
        async with trio.open_nursery() as nursery:
            serving = functools.partial(serve_mcp, session, ["helper"], http=0, send_timeout=0.5)
            url = await nursery.start(serving)
            port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
            sid = await _initialized(port)
            with trio.socket.socket() as stalled:
                stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                await stalled.connect(("127.0.0.1", port))
                call: dict[str, Any] = {"name": "helper_crunch", "arguments": {"count": 10**6}}
                call["_meta"] = {"progressToken": 7}
                request = {"id": 1, "method": "tools/call", "params": call}
                await stalled.send(_post(port, request, sid))
                with trio.fail_after(30):  # a hang guard; the turn ends ~0.5 s after the stall
                    await done.wait()
            nursery.cancel_scope.cancel()
    [end] = ended
    assert isinstance(end, RunFailed) and end.error_type == "TurnCancelled", end
