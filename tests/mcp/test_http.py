"""MCP servers over streamable HTTP on 127.0.0.1: the same handle, the same tools.

One toolbox HTTP server (a real subprocess) is shared by the module's tests;
each test opens its own MCP session to it.
"""

from __future__ import annotations

import pytest
import trio

from pride import ActionCall, ActionResponse, Branch, Run, Session, ToolProgress, TurnCancelled
from pride.llm import ToolCall
from pride.mcp import McpServerError

from .conftest import refused_port
from .support import Agent, Waiter


async def test_list_call_and_progress_over_http(toolbox_url: str) -> None:
    agent = Agent(
        [
            ToolCall("add", {"a": 20, "b": 22}, id="c_add"),
            ToolCall("slow", {"seconds": 0.2, "steps": 2}, id="c_slow"),
            ToolCall("fail", {"message": "nope"}, id="c_fail"),
        ]
    )
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp(
            "web", url=toolbox_url, headers={"Authorization": "Bearer s3cret"}
        )
        assert server.pid is None and "s3cret" not in repr(server)
        assert {"add", "slow", "fail"} <= set(server.tool_names)
        branch = await session.spawn(Branch(name="agent", chat_model=agent.model))
        branch.register_mcp(server, include=["add", "slow", "fail"])
        await session.ask(branch, Run("go"))
    results = agent.tool_results()
    assert results["c_add"] == {"result": 42}
    assert results["c_slow"] == {"result": "slow done"}
    assert "nope" in results["c_fail"]["error"]
    assert [p.progress for p in waiter.of(ToolProgress)] == [1.0, 2.0]


async def test_two_turns_call_over_http_at_the_same_time(toolbox_url: str) -> None:
    """Overlapping requests each get their response (the SDK's own client loses some on trio)."""
    agents = [Agent([ToolCall("meet", {"group": "http-pair"}, id=f"m{i}")]) for i in range(2)]
    async with Session() as session:
        server = await session.spawn_mcp("web", url=toolbox_url)
        branches = []
        for index, agent in enumerate(agents):
            branch = await session.spawn(Branch(name=f"b{index}", chat_model=agent.model))
            branch.register_mcp(server, include=["meet"])
            branches.append(branch)
        async with trio.open_nursery() as nursery:
            for branch in branches:
                nursery.start_soon(session.ask, branch, Run("meet"))
        for _ in range(5):  # and a burst of overlapping direct calls
            async with trio.open_nursery() as nursery:
                for n in range(6):
                    nursery.start_soon(server.call_tool, "add", {"a": n, "b": 1})
        assert server.statistics().failed == 0
    for index, agent in enumerate(agents):
        assert agent.tool_results()[f"m{index}"] == {"result": "http-pair: 2 met"}


async def test_cancelling_a_turn_cancels_the_http_call(toolbox_url: str) -> None:
    agent = Agent([ToolCall("slow", {"seconds": 60, "steps": 60, "label": "http-doomed"})])
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("web", url=toolbox_url)
        branch = await session.spawn(Branch(name="agent", chat_model=agent.model))
        branch.register_mcp(server)
        reply = await session.send(branch, Run("go"))
        await waiter.wait_for(lambda s: isinstance(s, ToolProgress))
        reply.cancel()
        with pytest.raises(TurnCancelled):
            await reply.result()
        assert server.statistics().in_flight == 0
        response = next(m for m in branch.messages if isinstance(m, ActionResponse))
        assert response.error is not None
        seen = await branch.act(ActionCall("cancellations", {}))
        assert "http-doomed" in seen[0].output["result"]


async def test_an_unreachable_url_fails_the_spawn() -> None:
    async with Session() as session:
        with (
            refused_port() as port,
            trio.fail_after(20),
            pytest.raises(McpServerError, match="connection failed"),
        ):
            await session.spawn_mcp("gone", url=f"http://127.0.0.1:{port}/mcp")
        assert session.services == ()
