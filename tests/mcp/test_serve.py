"""pride as an MCP server: ``pride mcp APP --expose NAME`` driven by the SDK's client.

The server is a real subprocess (``python -m pride.cli mcp ...``) and the
client is the MCP SDK's own ``ClientSession`` over its ``stdio_client``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import anyio
import trio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

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
    assert b"nobody" in process.stderr


async def test_pride_serves_over_http_to_pride() -> None:
    """``--http PORT``: streamable HTTP on 127.0.0.1, here with pride itself as the client."""
    from pride import Session

    from .conftest import free_port

    port = free_port()
    argv = [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper"]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(
                trio.run_process, [*argv, "--http", str(port)], cwd=str(ROOT), check=False
            )
        )
        try:
            async with Session() as session:
                with trio.fail_after(30):
                    while True:  # the server takes its import time to listen
                        try:
                            await (await trio.open_tcp_stream("127.0.0.1", port)).aclose()
                            break
                        except OSError:
                            await trio.sleep(0.05)
                    server = await session.spawn_mcp("pride", url=f"http://127.0.0.1:{port}/mcp")
                assert set(server.tool_names) == {"ask_helper", "helper_stats", "helper_crunch"}
                result = await server.call_tool("ask_helper", {"instruction": "over http"})
                assert result.content[0].text == "echo: over http"
        finally:
            process.terminate()
    assert process.returncode == 0
