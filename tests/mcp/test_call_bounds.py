"""What bounds one call to an MCP server child, with the defaults (``call_timeout``
None): a tool that never answers, a result of tens of megabytes or of thousands of
content blocks. The server is the hand-written fake (``fake_server.py``: no SDK, it
starts fast), a real subprocess over stdio.

A call that never answers is bounded by the turn's own bounds: its ``max_duration``
(a cancel-scope deadline) and its caller's cancellation (``ask(timeout=...)``). Either
way the server is sent ``notifications/cancelled`` for the request, the turn ends at
once with ``RunFailed``, and the same server process serves the next call.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from mcp import types

from pride import (
    ActionCall,
    ActionRequest,
    Branch,
    Budget,
    BudgetExceeded,
    MessageAdded,
    Run,
    RunFailed,
    Session,
    TurnCancelled,
)
from pride.llm import ToolCall
from pride.mcp import MAX_CONTENT_BLOCKS, McpToolError

from .conftest import fake_command
from .support import Agent, Waiter


def _text(result: types.CallToolResult) -> str:
    [part] = result.content
    assert isinstance(part, types.TextContent)
    return part.text


class _Ended:
    """The turns' terminal ``RunFailed`` signals, and an event set at the first."""

    def __init__(self, session: Session) -> None:
        self.failed: list[RunFailed] = []
        self.event = trio.Event()
        session.observe(RunFailed, handler=self._add)

    def _add(self, signal: RunFailed) -> None:
        self.failed.append(signal)
        self.event.set()


async def _unanswered(session: Session) -> tuple[Any, Branch, _Ended]:
    server = await session.spawn_mcp("mute", command=fake_command("mute"))
    agent = Agent([ToolCall("never", {}, id="c1")])
    branch = await session.spawn(Branch(name="agent", chat_model=agent.model, tools=[server]))
    return server, branch, _Ended(session)


async def _served_on(server: Any, pid: int) -> None:
    """The server read one ``notifications/cancelled`` and still serves, same process."""
    cancelled = json.loads(_text(await server.call_tool("cancellations")))
    assert len(cancelled) == 1, cancelled
    assert _text(await server.call_tool("ping")) == "pong"
    assert server.pid == pid
    statistics = server.statistics()
    assert (statistics.starts, statistics.cancelled, statistics.in_flight) == (1, 1, 0)


async def test_a_call_never_answered_ends_at_the_turn_s_max_duration() -> None:
    async with Session() as session:
        server, branch, ended = await _unanswered(session)
        pid = server.pid
        with trio.fail_after(10):  # a hang guard; the turn ends 0.3 s after it starts
            with pytest.raises(BudgetExceeded) as caught:
                await session.ask(branch, Run("go", budget=Budget(max_duration=0.3)))
            assert caught.value.limit == "max_duration"
            [end] = ended.failed  # published before the caller was answered
            assert end.error_type == "BudgetExceeded"
            await _served_on(server, pid)
            # The branch serves on too: its next turn's call is answered.
            [response] = await branch.act(ActionCall("ping", {}))
            assert response.output == "pong"


async def test_a_call_never_answered_ends_when_its_caller_gives_up() -> None:
    async with Session() as session:
        server, branch, ended = await _unanswered(session)
        pid = server.pid
        with trio.fail_after(10):
            with pytest.raises(trio.TooSlowError):
                await session.ask(branch, Run("go"), timeout=0.3)
        # The caller is answered as it gives up; the turn, cancelled, ends at once after.
        with trio.fail_after(1):
            await ended.event.wait()
        [end] = ended.failed
        assert end.cancelled
        with trio.fail_after(10):
            await _served_on(server, pid)


async def test_a_call_never_answered_holds_no_other_call_and_ends_when_cancelled() -> None:
    """While the turn waits on its call, the same server answers another caller; then
    ``reply.cancel()`` ends the turn (RunFailed, cancelled) and the server is told."""
    async with Session() as session:
        server, branch, ended = await _unanswered(session)
        waiter = Waiter(session)
        pid = server.pid
        with trio.fail_after(10):
            reply = await session.send(branch, Run("go"))
            await waiter.wait_for(
                lambda s: isinstance(s, MessageAdded) and isinstance(s.message, ActionRequest)
            )
            await trio.testing.wait_all_tasks_blocked()  # "never" is written, waiting
            assert server.statistics().in_flight == 1
            assert _text(await server.call_tool("ping")) == "pong"
            assert not ended.failed  # the turn still waits on its call
            reply.cancel()
            with pytest.raises(TurnCancelled):
                await reply.result()
            [end] = ended.failed
            assert end.cancelled
            await _served_on(server, pid)


async def test_a_result_of_too_many_content_blocks_is_refused_naming_the_bound() -> None:
    """Before: the SDK validated every block on the event loop, and 500,000 one-letter
    blocks (14 MB, within max_message_bytes) held the whole process for 5.3 s. Now a
    result over MAX_CONTENT_BLOCKS is an McpToolError saying how many it had and what
    pride takes; the model reads it; one at the bound is served; the server serves on."""
    async with Session() as session:
        server = await session.spawn_mcp("bulky", command=fake_command("bulky"))
        branch = await session.spawn(Branch(name="agent", tools=[server]))
        pid = server.pid
        with trio.fail_after(10):
            with pytest.raises(McpToolError) as caught:
                await server.call_tool("blocks", {"count": MAX_CONTENT_BLOCKS + 1})
            assert str(caught.value) == (
                f"MCP server 'bulky', call of 'blocks': the result has "
                f"{MAX_CONTENT_BLOCKS + 1} content blocks, more than pride takes "
                f"({MAX_CONTENT_BLOCKS}); it was dropped"
            )
            [response] = await branch.act(ActionCall("images", {"count": 10 * MAX_CONTENT_BLOCKS}))
            assert response.error is not None and "more than pride takes" in response.error
            served = await server.call_tool("blocks", {"count": MAX_CONTENT_BLOCKS})
            assert len(served.content) == MAX_CONTENT_BLOCKS
            assert _text(await server.call_tool("ping")) == "pong"
        assert server.pid == pid and server.statistics().starts == 1


async def test_a_result_over_max_message_bytes_is_a_crash_and_the_branch_serves_on() -> None:
    """A 20 MB answer (the default max_message_bytes is 16 MiB) is never read whole: the
    call fails with McpServerError naming the bound, the server restarts (the message
    broke its connection mid-stream), and the branch's next call goes to the new one."""
    async with Session() as session:
        server = await session.spawn_mcp("bulky", command=fake_command("bulky"))
        branch = await session.spawn(Branch(name="agent", tools=[server]))
        pid = server.pid
        with trio.fail_after(10):
            [response] = await branch.act(ActionCall("big", {"bytes": 20_000_000}))
            assert response.error is not None
            assert "sent a message over 16777216 bytes (max_message_bytes)" in response.error
            [answered] = await branch.act(ActionCall("ping", {}))  # waits for the restart
        assert answered.output == "pong"
        assert server.pid != pid and server.statistics().starts == 2
