"""``pride mcp --http``'s door, attacked over real sockets: a real ``pride mcp``
subprocess on a free port, driven with raw httpx as a hostile client would.

Issue 36 item 13 (DNS rebinding): a foreign ``Host`` is refused with 421 and a
foreign ``Origin`` with 403 before the SDK sees the request; allow-lists open
them for a proxy. And the note beside it: a client whose POST connection closes
mid-call has its turn cancelled, as a ``notifications/cancelled`` would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

ANNOUNCE = "pride mcp: serving on "
ROOT = Path(__file__).parent.parent.parent
APP = "tests/mcp/app.py:build"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _initialize(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "1"},
        },
    }


async def _serve(*extra: str) -> AsyncIterator[str]:
    argv = [sys.executable, "-m", "pride.cli", "mcp", APP, "--expose", "helper", "--http", "0"]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            lambda task_status: trio.run_process(
                [*argv, *extra],
                cwd=str(ROOT),
                check=False,
                stdout=subprocess.PIPE,
                task_status=task_status,
            )
        )
        try:
            buffer = b""
            with trio.fail_after(60):  # the server's import time, under load
                while b"\n" not in buffer:
                    chunk = await process.stdout.receive_some(4096)
                    assert chunk, "pride mcp exited before announcing its URL"
                    buffer += chunk
            line = buffer.split(b"\n", 1)[0].decode()
            assert line.startswith(ANNOUNCE), line
            yield line.removeprefix(ANNOUNCE)
        finally:
            process.terminate()


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async for served in _serve():
        yield served


@pytest.fixture
async def proxied() -> AsyncIterator[str]:
    async for served in _serve(
        "--allow-host", "agents.example.com", "--allow-origin", "https://chat.example.com"
    ):
        yield served


async def _session(client: httpx.AsyncClient, url: str, **headers: str) -> str:
    """Initialise an MCP session as a client would; its session id."""
    response = await client.post(url, json=_initialize(), headers={**ACCEPT, **headers})
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    done = await client.post(
        url,
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**ACCEPT, "mcp-session-id": session_id, **headers},
    )
    assert done.status_code == 202, done.text
    return session_id


async def test_a_rebinding_page_is_refused_before_the_sdk_sees_it(url: str) -> None:
    """The attack of the issue: Host evil.example with a foreign Origin, then a call to
    ask_helper on a session the attacker could not have opened: each refused, no turn."""
    port = url.removeprefix("http://127.0.0.1:").removesuffix("/mcp")
    evil = {"host": f"evil.example:{port}", "origin": f"http://evil.example:{port}"}
    async with httpx.AsyncClient(timeout=30) as client:
        refused = await client.post(url, json=_initialize(), headers={**ACCEPT, **evil})
        assert refused.status_code == 421
        assert "mcp-session-id" not in refused.headers
        assert "--allow-host" in refused.text

        foreign = await client.post(
            url, json=_initialize(), headers={**ACCEPT, "origin": "http://evil.example"}
        )
        assert foreign.status_code == 403
        assert "--allow-origin" in foreign.text

        # A session opened legitimately, then a call to it from the rebound page.
        session_id = await _session(client, url)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ask_helper", "arguments": {"instruction": "leak"}},
        }
        for headers in (evil, {"host": evil["host"]}, {"origin": evil["origin"]}):
            stolen = await client.post(
                url, json=call, headers={**ACCEPT, "mcp-session-id": session_id, **headers}
            )
            assert stolen.status_code in (403, 421)
            assert "echo" not in stolen.text

        # The server's own names are answered: localhost as well as the address.
        local = await client.post(
            url, json=_initialize(), headers={**ACCEPT, "host": f"localhost:{port}"}
        )
        assert local.status_code == 200


async def test_a_proxy_s_name_and_a_chat_ui_s_origin_are_allowed_when_listed(
    proxied: str,
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await _session(
            client, proxied, host="agents.example.com", origin="https://chat.example.com"
        )
        assert session_id
        other = await client.post(
            proxied,
            json=_initialize(),
            headers={**ACCEPT, "host": "agents.example.com", "origin": "https://other.example"},
        )
        assert other.status_code == 403


async def test_a_body_over_the_limit_is_413_and_the_server_serves_on(url: str) -> None:
    from pride.mcp._door import MAX_BODY_BYTES

    async with httpx.AsyncClient(timeout=60) as client:
        huge = b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"x": "'
        huge += b"x" * (MAX_BODY_BYTES + 1) + b'"}}'
        response = await client.post(url, content=huge, headers=ACCEPT)
        assert response.status_code == 413
        assert await _session(client, url)  # still serving


async def test_a_client_that_disconnects_mid_call_has_its_turn_cancelled(url: str) -> None:
    """The client opens a long call (a tool reporting progress step by step), reads its
    first progress note (the turn runs), and closes the connection: the turn is
    cancelled, as helper_stats (served after it, in mailbox order) shows."""
    async with httpx.AsyncClient(timeout=30) as client:
        session_id = await _session(client, url)
        headers = {**ACCEPT, "mcp-session-id": session_id}
        call = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "helper_crunch",
                "arguments": {"count": 10_000_000},
                "_meta": {"progressToken": "p"},
            },
        }
        # Over a raw socket, which the client closes mid-answer (httpx would leave its
        # stream's generators to the garbage collector when left early).
        port = int(url.removeprefix("http://127.0.0.1:").removesuffix("/mcp"))
        body = json.dumps(call).encode()
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (
            f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{head}"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body
        with trio.fail_after(30):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(request)
                seen = b""
                while b"notifications/progress" not in seen:  # the turn is running
                    chunk = await stream.receive_some(65536)
                    assert chunk, seen
                    seen += chunk
            # closed: the client has gone
        stats = {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {"name": "helper_stats", "arguments": {}},
        }
        with trio.fail_after(30):
            answer = await client.post(url, json=stats, headers=headers)
        data = [line for line in answer.text.splitlines() if line.startswith("data:")]
        result = json.loads(data[-1].removeprefix("data:"))["result"]
        assert result["structuredContent"] == {"cancelled": 1}
