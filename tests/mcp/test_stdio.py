"""MCP servers over stdio as supervised children: tools, calls, cancellation, crashes.

Every test drives the example toolbox (examples/mcp_servers/toolbox.py,
written with the SDK's FastMCP) as a real subprocess. A start costs the
server's import time (~1 s), so each test covers one whole story.
"""

from __future__ import annotations

import psutil
import pytest
import trio

from pride import (
    ActionCall,
    ActionResponse,
    Branch,
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    MessageAdded,
    Run,
    RunEnd,
    RunFailed,
    Session,
    SessionFailed,
    SupervisorFailed,
    ToolProgress,
    TurnCancelled,
)
from pride.llm import ToolCall
from pride.mcp import McpServerError, McpTool

from .conftest import toolbox_command
from .support import Agent, Waiter


async def test_tools_are_ordinary_tools_and_errors_reach_the_model() -> None:
    """Listed with the server's schemas; called concurrently; isError and bad
    arguments become error responses the model sees in its next request."""
    agent = Agent(
        [
            ToolCall("tb_add", {"a": 2, "b": 3}, id="c_add"),
            ToolCall("tb_shout", {"text": "hi"}, id="c_shout"),
            ToolCall("tb_fail", {"message": "disk on fire"}, id="c_fail"),
            ToolCall("tb_add", {"a": "two"}, id="c_bad"),
            ToolCall("tb_picture", {}, id="c_pic"),
        ]
    )
    async with Session() as session:
        server = await session.spawn_mcp("toolbox", command=toolbox_command())
        assert session.mcp("toolbox") is server
        assert server.running and psutil.pid_exists(server.pid)
        branch = await session.spawn(Branch(name="agent", chat_model=agent.model))
        names = branch.register_mcp(server, prefix="tb_", exclude=["crash"])
        assert "tb_add" in names and "tb_crash" not in names
        tool = branch.acts.get("tb_add")
        assert isinstance(tool, McpTool) and tool.remote_name == "add"

        await session.ask(branch, Run("use the tools"))

        offered = {spec["name"]: spec for spec in agent.requests[0].tools}
        assert offered["tb_add"]["parameters"]["required"] == ["a", "b"]  # the server's schema
        assert offered["tb_add"]["parameters"]["properties"]["a"]["type"] == "integer"
        results = agent.tool_results()
        assert results["c_add"] == {"result": 5}  # structured content
        assert results["c_shout"] == {"result": "HI"}
        assert "disk on fire" in results["c_fail"]["error"]
        assert results["c_fail"]["error"].startswith("McpToolError")
        assert results["c_bad"]["error"].startswith("ToolArgumentError")
        assert results["c_pic"][0]["type"] == "image"
        assert results["c_pic"][0]["mime_type"] == "image/png"
        assert server.statistics().calls == 4  # the bad arguments were never sent

        with pytest.raises(ValueError, match="already registered"):
            branch.register_mcp(server, prefix="tb_")
        with pytest.raises(ValueError, match="no tool 'nope'"):
            branch.register_mcp(server, include=["nope"])
        with pytest.raises(TypeError, match="spawn_mcp"):
            branch.register_mcp(object())
        pid = server.pid
    assert not psutil.pid_exists(pid)


async def test_two_turns_call_one_server_at_the_same_time() -> None:
    """Calls from two branches' turns are in flight together over one connection."""
    async with Session() as session:
        server = await session.spawn_mcp("toolbox", command=toolbox_command())
        agents = [Agent([ToolCall("meet", {"group": "pair"}, id=f"m{i}")]) for i in range(2)]
        branches = []
        for index, agent in enumerate(agents):
            branch = await session.spawn(Branch(name=f"b{index}", chat_model=agent.model))
            branch.register_mcp(server, include=["meet"])
            branches.append(branch)
        async with trio.open_nursery() as nursery:  # meet returns only when both are in flight
            for branch in branches:
                nursery.start_soon(session.ask, branch, Run("meet"))
        for index, agent in enumerate(agents):
            assert agent.tool_results()[f"m{index}"] == {"result": "pair: 2 met"}


async def test_cancelling_a_turn_cancels_the_call_on_the_server() -> None:
    """The server is told, the call ends before the terminal signal, no process is left."""
    agent = Agent([ToolCall("slow", {"seconds": 60, "steps": 60, "label": "doomed"}, id="c1")])
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("toolbox", command=toolbox_command())
        branch = await session.spawn(Branch(name="agent", chat_model=agent.model))
        branch.register_mcp(server)
        in_flight_at_terminal: list[int] = []
        session.observe(
            RunFailed, handler=lambda _: in_flight_at_terminal.append(server.statistics().in_flight)
        )
        reply = await session.send(branch, Run("go"))
        await waiter.wait_for(lambda s: isinstance(s, ToolProgress))  # running on the server
        reply.cancel()
        with pytest.raises(TurnCancelled):
            await reply.result()
        assert in_flight_at_terminal == [0]
        response = next(m for m in branch.messages if isinstance(m, ActionResponse))
        assert response.error is not None and "not executed" in response.error
        assert server.statistics().cancelled == 1
        seen = await server.call_tool("cancellations")
        assert "doomed" in seen.structuredContent["result"]
        # The branch goes on: the next call works.
        assert (await branch.act(ActionCall("echo", {"text": "still here"})))[0].output == {
            "result": "still here"
        }
        pid = server.pid
    assert not psutil.pid_exists(pid)


async def test_a_crashed_server_restarts_then_intensity_fails_the_session() -> None:
    """Crash -> BranchRestarted, a new process, the next call succeeds; a crash
    past the intensity -> SupervisorFailed caused by the server's error."""
    with pytest.raises(SupervisorFailed) as failed:
        async with Session(max_restarts=1, period=60) as session:
            waiter = Waiter(session)
            server = await session.spawn_mcp("toolbox", command=toolbox_command())
            branch = await session.spawn(Branch(name="b"))
            branch.register_mcp(server)
            first = server.pid

            crashed = (await branch.act(ActionCall("crash", {"code": 3})))[0]
            assert crashed.error is not None and "McpServerError" in crashed.error
            await waiter.wait_for(lambda s: isinstance(s, BranchStarted) and s.restart)
            assert server.pid != first and not psutil.pid_exists(first)
            assert (await branch.act(ActionCall("add", {"a": 1, "b": 1})))[0].output == {
                "result": 2
            }
            stopped = next(s for s in waiter.of(BranchStopped) if s.reason == "crash")
            assert "exited with code 3" in stopped.error
            assert "crashing with exit code 3" in stopped.error  # the stderr tail
            assert len(waiter.of(BranchRestarted)) == 1

            second = server.pid
            await branch.act(ActionCall("crash", {"code": 4}))
            with trio.fail_after(10):
                await waiter.wait_for(lambda s: isinstance(s, SessionFailed))
    assert isinstance(failed.value.__cause__, McpServerError)
    assert "code 4" in str(failed.value.__cause__)
    assert not psutil.pid_exists(second)


async def test_progress_arrives_in_order_before_the_response_and_the_terminal() -> None:
    """MCP progress notifications become ToolProgress signals and Run stream items."""
    agent = Agent([ToolCall("slow", {"seconds": 0.3, "steps": 3}, id="c_slow")])
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("toolbox", command=toolbox_command())
        branch = await session.spawn(Branch(name="agent", chat_model=agent.model))
        branch.register_mcp(server, include="slow")
        async with branch.run("work") as items:
            streamed = [item async for item in items]
        progress = [item for item in streamed if isinstance(item, ToolProgress)]
        assert [(p.progress, p.total, p.message) for p in progress] == [
            (1.0, 3.0, "step 1 of 3"),
            (2.0, 3.0, "step 2 of 3"),
            (3.0, 3.0, "step 3 of 3"),
        ]
        response_at = next(i for i, x in enumerate(streamed) if isinstance(x, ActionResponse))
        assert all(streamed.index(p) < response_at for p in progress)

        kinds = [
            "progress"
            if isinstance(s, ToolProgress)
            else "response"
            if isinstance(s, MessageAdded) and isinstance(s.message, ActionResponse)
            else "end"
            if isinstance(s, RunEnd)
            else None
            for s in waiter.signals
        ]
        assert [k for k in kinds if k] == ["progress"] * 3 + ["response", "end"]
        signal = waiter.of(ToolProgress)[0]
        assert signal.call_id == "c_slow" and signal.function == "slow"
        assert signal.turn_id == waiter.of(RunEnd)[0].turn_id
        assert signal.branch_name == "agent"


async def test_tool_list_changes_are_followed() -> None:
    """notifications/tools/list_changed re-lists the tools and updates registrations."""
    async with Session() as session:
        server = await session.spawn_mcp("toolbox", command=toolbox_command())
        branch = await session.spawn(Branch(name="b"))
        branch.register_mcp(server, prefix="tb_", exclude=["crash"])
        before = server.listings
        await branch.act(ActionCall("tb_grow", {"name": "parrot"}))
        with trio.fail_after(10):
            await server.wait_listing(before + 1)
        assert "tb_parrot" in branch.tools and "tb_crash" not in branch.tools
        out = await branch.act(ActionCall("tb_parrot", {"text": "hello"}))
        assert out[0].output == {"result": "parrot: hello"}
