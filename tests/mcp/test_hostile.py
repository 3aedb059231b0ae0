"""Servers that misbehave: each is a start failure or a crash with a clear error, never a hang.

The fake server (fake_server.py) is hand-written JSON-RPC without the SDK, so
it starts in milliseconds.
"""

from __future__ import annotations

import logging

import psutil
import pytest
import trio

from pride import Branch, BranchStopped, Session
from pride.mcp import McpServer, McpServerError, McpServerSpec

from .conftest import fake_command
from .support import Waiter


async def test_a_command_that_cannot_run_fails_the_spawn() -> None:
    """The error names the command; the name stays free; the session goes on."""
    async with Session() as session:
        with pytest.raises(McpServerError, match="cannot run '/no/such/server'"):
            await session.spawn_mcp("ghost", command=["/no/such/server"])
        assert session.services == ()
        await session.spawn_mcp("ghost", command=fake_command("garbage"))


async def test_a_server_that_exits_at_once_reports_its_code_and_stderr() -> None:
    async with Session() as session:
        with pytest.raises(McpServerError) as failed:
            await session.spawn_mcp("bad", command=fake_command("exit"))
    message = str(failed.value)
    assert "exited with code 2" in message
    assert "missing configuration FAKE_TOKEN" in message


async def test_a_server_that_never_answers_times_out() -> None:
    async with Session() as session:
        with pytest.raises(McpServerError, match="did not initialise"):
            await session.spawn_mcp("mute", command=fake_command("silent"), init_timeout=0.5)


async def test_an_endless_line_breaks_the_connection_not_the_memory() -> None:
    """A message over max_message_bytes is a crash of the child (here: temporary, not restarted)."""
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp(
            "flood", command=fake_command("huge"), max_message_bytes=4096, restart="temporary"
        )
        with pytest.raises(McpServerError, match="over 4096 bytes"):
            await server.call_tool("ping")
        stopped = await waiter.wait_for(lambda s: isinstance(s, BranchStopped))
        assert stopped.reason == "crash"
        assert "over 4096 bytes" in (stopped.error or "")
        assert not server.running


async def test_lines_that_are_not_json_rpc_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    async with Session() as session:
        server = await session.spawn_mcp("noisy", command=fake_command("garbage"))
        result = await server.call_tool("ping")
        assert result.content[0].text == "pong"
    assert any("not JSON-RPC" in record.getMessage() for record in caplog.records)


async def test_bad_lines_past_the_first_twenty_are_counted_when_the_server_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server writes two bad lines before each message it reads: 15 calls and
    the three messages of its start make 36. The first 20 are logged one by one,
    and one line counts the rest when its incarnation ends. Before, the last of
    the 20 said further ones were not logged, and how many there were was said
    nowhere."""
    caplog.set_level(logging.WARNING, "pride.mcp")
    async with Session() as session:
        server = await session.spawn_mcp("noisy", command=fake_command("garbage"))
        for _ in range(15):
            await server.call_tool("ping")
    said = [record.getMessage() for record in caplog.records if record.name == "pride.mcp"]
    assert len([text for text in said if "wrote a line that is not JSON-RPC" in text]) == 20
    [counted] = [text for text in said if "more lines of MCP server 'noisy'" in text]
    assert counted.startswith("16 more lines of MCP server 'noisy' that are not JSON-RPC")
    assert counted.endswith("(36 in all)")


async def test_odd_tool_names_and_schemas(caplog: pytest.LogCaptureFixture) -> None:
    """Names are made valid, bad schemas are not offered, long descriptions are cut."""
    caplog.set_level(logging.WARNING, "pride.mcp")
    async with Session() as session:
        server = await session.spawn_mcp("odd", command=fake_command("names"))
        branch = await session.spawn(Branch(name="b"))
        names = branch.register_mcp(server)
        assert names == ("files_read", "long", "ping")
        assert branch.acts.get("files_read").remote_name == "files.read"
        assert len(branch.acts.get("long").description) < 8_100
    text = caplog.text
    assert "'not-an-object' is not offered" in text
    assert "'broken-schema' is not offered" in text


async def test_a_stubborn_server_is_killed_within_the_grace_period() -> None:
    """It ignores the end of its input and SIGTERM: SIGKILL ends it; no process is left."""
    async with Session(grace=0.2) as session:
        server = await session.spawn_mcp("mule", command=fake_command("stubborn"))
        pid = server.pid
        with trio.fail_after(10):  # grace, then SIGTERM, then a second, then SIGKILL
            await session.stop()
    assert not psutil.pid_exists(pid)


def test_spec_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        McpServerSpec(name="x")
    with pytest.raises(ValueError, match="exactly one of"):
        McpServerSpec(name="x", command=["a"], url="http://127.0.0.1/mcp")
    with pytest.raises(ValueError, match="argv list"):
        McpServerSpec(name="x", command="python server.py")
    with pytest.raises(ValueError, match="http"):
        McpServerSpec(name="x", url="file:///etc/passwd")
    with pytest.raises(ValueError, match="init_timeout"):
        McpServerSpec(name="x", command=["a"], init_timeout=0)
    with pytest.raises(ValueError, match="headers are for HTTP"):
        McpServerSpec(name="x", command=["a"], headers={"a": "b"})
    spec = McpServerSpec(name="x", url="http://127.0.0.1:1/mcp", headers={"Authorization": "k-1"})
    assert "k-1" not in repr(spec) and "k-1" not in repr(McpServer(spec))
