"""An agent using an MCP server's tools: spawned, supervised and cancelled by pride.

``python examples/mcp_tools.py`` (needs the extra: ``pip install 'pride[mcp]'``)

The session starts the small MCP server in examples/mcp_servers/toolbox.py as
a supervised child (a subprocess speaking MCP over stdio), the agent's branch
registers its tools under a prefix, and a scripted "model" calls three of
them at once: one adds, one works in steps and reports progress, one fails.
The progress arrives as ``ToolProgress`` signals while the turn runs; the
failure is an error the model reads in its next request. Then a turn is
cancelled in the middle of a long call, and the server is told. Swap
``ScriptedModel(agent)`` for ``"openai/gpt-4.1-mini"`` to run it for real.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from pride import Branch, Run, ScriptedModel, Session, ToolProgress, TurnCancelled
from pride.llm import ModelRequest, ScriptedReply, ToolCall

TOOLBOX = Path(__file__).parent / "mcp_servers" / "toolbox.py"


def agent(request: ModelRequest) -> ScriptedReply | str:
    """A stand-in model: call tools first, then answer from what they returned."""
    messages = request.messages
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    if "long" in str(request.messages[-1].get("content")):
        return ScriptedReply(
            "", (ToolCall("tb_slow", {"seconds": 30, "steps": 60, "label": "long"}),)
        )
    if not results:
        return ScriptedReply(
            "Let me use the toolbox.",
            (
                ToolCall("tb_add", {"a": 19, "b": 23}, id="sum"),
                ToolCall("tb_slow", {"seconds": 0.3, "steps": 3}, id="work"),
                ToolCall("tb_fail", {"message": "the disk is full"}, id="oops"),
            ),
        )
    total = json.loads(results["sum"])["result"]
    error = json.loads(results["oops"])["error"]
    return f"19 + 23 = {total}; the slow tool finished; the failing one said: {error}"


async def main() -> None:
    async with Session(name="mcp-demo") as session:
        server = await session.spawn_mcp("toolbox", command=[sys.executable, str(TOOLBOX)])
        print(f"toolbox running as pid {server.pid}; its tools: {', '.join(server.tool_names)}")

        long_call_running = trio.Event()

        @session.observe(ToolProgress)
        def show(signal: ToolProgress) -> None:
            if signal.total == 60:  # the long job: running on the server now
                long_call_running.set()
                return
            print(f"  progress of {signal.function}: {signal.progress:g}/{signal.total:g}")

        branch = await session.spawn(Branch(name="agent", chat_model=ScriptedModel(agent)))
        names = branch.register_mcp(server, prefix="tb_", include=["add", "slow", "fail"])
        print(f"registered on the branch: {', '.join(names)}")

        items = await session.ask(branch, Run("Add 19 and 23, then do the slow job."))
        print(f"answer: {items[-1].text}")

        reply = await session.send(branch, Run("Now the long job."))
        await long_call_running.wait()  # the server is working on it: change our mind
        reply.cancel()
        try:
            await reply.result()
        except TurnCancelled:
            print("the long turn was cancelled")
        seen = await server.call_tool("cancellations")
        print(f"the server saw its call cancelled: {seen.structuredContent['result']}")
        pid = server.pid
    print(f"session closed; the server process {pid} has exited")


if __name__ == "__main__":
    trio.run(main)
