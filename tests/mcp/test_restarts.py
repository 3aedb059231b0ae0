"""A call made while its server restarts waits for it (bounded); tools=[server] registers.

Against the hand-written fake server (no SDK import: it starts fast), whose
restarts the test holds and releases through a file, so "the call came while
the server was restarting" is certain, not a race.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from pride import ActionCall, Branch, BranchStarted, BranchStopped, Session
from pride.mcp import McpServer, McpUnavailable

from .conftest import fake_command
from .support import Waiter


def _crashy(tmp_path: Path) -> tuple[list[str], Path]:
    release = tmp_path / "release"
    return [*fake_command("crashy"), str(tmp_path / "started"), str(release)], release


def _crashed(signal: object) -> bool:
    return isinstance(signal, BranchStopped) and signal.reason == "crash"


async def _crash(branch: Branch, waiter: Waiter) -> None:
    """Make the server exit in a call, and wait until the session saw the crash."""
    response = (await branch.act(ActionCall("crash", {})))[0]
    assert response.error is not None and "McpServerError" in response.error
    await waiter.wait_for(_crashed)


async def test_a_call_during_a_restart_waits_for_the_new_server(tmp_path: Path) -> None:
    """The call is held while the server restarts, then answered by the new process."""
    command, release = _crashy(tmp_path)
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("fake", command=command)
        branch = await session.spawn(Branch(name="b", tools=[session.mcp("fake")]))
        assert set(branch.tools) == {"ping", "crash"}
        first = server.pid
        await _crash(branch, waiter)
        answers = []

        async def call() -> None:
            answers.append((await branch.act(ActionCall("ping", {})))[0])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            assert not answers and server.statistics().waited_for_restart == 1
            assert not server.running
            release.touch()
        assert answers[0].error is None and answers[0].output == "pong"
        assert server.pid not in (None, first)
        assert [s.restart for s in waiter.of(BranchStarted) if s.branch_name == "fake"] == [
            False,
            True,
        ]


async def test_a_restart_that_takes_too_long_fails_the_call_saying_so(tmp_path: Path) -> None:
    """Past ``restart_wait`` the call is an error response naming the wait; serving goes on."""
    command, release = _crashy(tmp_path)
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("fake", command=command, restart_wait=0.2)
        branch = await session.spawn(Branch(name="b"))
        branch.register_mcp(server)
        await _crash(branch, waiter)
        late = (await branch.act(ActionCall("ping", {})))[0]
        assert late.error is not None and late.error.startswith("McpUnavailable:")
        assert "is restarting after a crash" in late.error
        assert "not back within 0.2s (restart_wait)" in late.error
        release.touch()
        await waiter.wait_for(lambda s: isinstance(s, BranchStarted) and s.restart)
        assert (await branch.act(ActionCall("ping", {})))[0].output == "pong"


async def test_a_crashed_temporary_server_fails_calls_at_once(tmp_path: Path) -> None:
    """Nobody restarts a temporary server: no wait, and the error says why."""
    command, _ = _crashy(tmp_path)
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("fake", command=command, restart="temporary")
        branch = await session.spawn(Branch(name="b", tools=[server]))
        await _crash(branch, waiter)
        with trio.fail_after(1):  # far below restart_wait: it did not wait
            with pytest.raises(McpUnavailable, match="being temporary, is not restarted"):
                await server.call_tool("ping")
        assert server.statistics().waited_for_restart == 0


async def test_tools_takes_server_handles_beside_callables() -> None:
    """``Branch(tools=[handle, fn])`` and ``register_tools`` register a server's tools
    as ``register_mcp`` does; a clash is refused with the fix in the message."""

    def double(x: int) -> int:
        """Double x."""
        return 2 * x

    async with Session() as session:
        server = await session.spawn_mcp("fake", command=fake_command("garbage"))
        assert isinstance(session.mcp("fake"), McpServer)
        branch = await session.spawn(Branch(name="b", tools=[session.mcp("fake"), double]))
        assert set(branch.tools) == {"ping", "double"}
        assert (await branch.act(ActionCall("ping", {})))[0].output == "pong"
        other = await session.spawn(Branch(name="c"))
        other.register_tools(server)
        assert set(other.tools) == {"ping"}
        with pytest.raises(ValueError, match="pass prefix="):
            other.register_tools([server])
