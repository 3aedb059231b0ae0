"""MCP tool-call overhead: a call through pride over stdio vs the bare SDK's ``call_tool``.

Both sides call the ``echo`` tool of the example toolbox server
(examples/mcp_servers/toolbox.py), each over its own stdio subprocess of it,
in the same trio run, with alternating samples. The bare side is the SDK
alone: ``ClientSession.call_tool`` over the SDK's own ``stdio_client``.
pride's tool call is what a turn runs for each call the model makes: the
branch's action manager (hooks, progress binding, outcome), the MCP tool
(argument validation against the server's schema, result mapping), the call
channel to the server's supervised task and pride's stdio transport. For
context, ``branch.act`` adds the branch's mailbox and the recording of the
ActionRequest/ActionResponse pair (the turn's own cost, see bench_turns).

Target (issue 17): pride's tool call <= 1.1x the bare SDK's, per call.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from pride import ActionCall, Branch, Session

TOOLBOX = Path(__file__).parent.parent / "examples" / "mcp_servers" / "toolbox.py"
ARGUMENTS = {"text": "a short benchmark payload"}


async def _main(smoke: bool) -> None:
    ops, repeats = (5, 1) if smoke else (40, 25)
    params = StdioServerParameters(command=sys.executable, args=[str(TOOLBOX)])
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as bare_session,
        Session("bench-mcp") as session,
    ):
        async with trio.open_nursery() as nursery:  # both servers start at once
            nursery.start_soon(bare_session.initialize)
            server = await session.spawn_mcp("toolbox", command=[sys.executable, str(TOOLBOX)])
        await bare_session.list_tools()  # the SDK caches output schemas from the listing
        branch = await session.spawn(Branch(name="bench"))
        branch.register_mcp(server, include=["echo"])
        call = ActionCall("echo", ARGUMENTS)

        async def bare(n: int) -> None:
            for _ in range(n):
                result = await bare_session.call_tool("echo", ARGUMENTS)
                assert not result.isError

        async def through_pride(n: int) -> None:
            for _ in range(n):
                [response] = await branch.act(call)
                assert response.error is None

        async def tool_call(n: int) -> None:
            for _ in range(n):
                [outcome] = await branch.acts.execute([call])
                assert outcome.error is None

        names = {
            "bare SDK call_tool over stdio (per call)": (bare, ops),
            "pride tool call (action manager -> MCP tool)": (tool_call, ops),
            "pride branch.act (mailbox, records the pair)": (through_pride, ops),
        }
        stats = await measure_interleaved(names, repeats=repeats, warmup=1)
    bare_stats, tool_stats, act_stats = stats.values()
    for line in stats.values():
        print(line.line("us"))

    def paired(side: Stats) -> float:
        return statistics.median(
            p / b for p, b in zip(side.samples, bare_stats.samples, strict=True)
        )

    tool, act = paired(tool_stats), paired(act_stats)
    print(ratio_line("pride tool call / bare SDK call_tool", tool, "<= 1.10", tool <= 1.10))
    print(ratio_line("pride branch.act / bare SDK call_tool", act, "(info)", True))


def main(smoke: bool) -> None:
    """Run the comparison in its own trio run and print the figures."""
    trio.run(_main, smoke)
