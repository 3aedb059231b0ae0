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

Then a long tool list (issue 36): a server offering 10,000 tools, each with
a schema of its own (tests/mcp/fake_server.py's ``many`` mode), is started,
registered on a branch and made to send ``notifications/tools/list_changed``;
a trio instrument times every task step and reports the longest, the event
loop's longest stall, in each phase (the first step of the run, which imports
the MCP SDK, is left out). Before issue 36 they were 7.8 s at start and
25.9 s per ``list_changed`` (the schema checks and the registrations ran on
the event loop, the registrations recounting every tool); the target is that
no phase stalls the loop for longer than 100 ms. Registering the tools on a
branch (``register_mcp``, one synchronous call by the application) is shown
for information.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks._harness import Stats, figure_line, measure_interleaved, ratio_line
from pride import ActionCall, Branch, Session

TOOLBOX = Path(__file__).parent.parent / "examples" / "mcp_servers" / "toolbox.py"
MANY = Path(__file__).parent.parent / "tests" / "mcp" / "fake_server.py"
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


class _LongestStep(trio.abc.Instrument):
    """The longest task step (the event loop's longest stall) since the last reset."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._started = time.perf_counter()

    def reset(self) -> None:
        self.longest = 0.0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.longest = max(self.longest, time.perf_counter() - self._started)


async def _long_list(smoke: bool) -> None:
    count = 200 if smoke else 10_000
    import pride.mcp  # noqa: F401  (the SDK's import is not a stall of the listing)

    probe = _LongestStep()
    trio.lowlevel.add_instrument(probe)
    try:
        async with Session("bench-mcp-list") as session:
            started = time.perf_counter()
            command = [sys.executable, str(MANY), "many", str(count)]
            server = await session.spawn_mcp("many", command=command, init_timeout=300)
            at_start, start_seconds = probe.longest, time.perf_counter() - started
            branch = await session.spawn(Branch(name="lister"))
            await trio.lowlevel.checkpoint()
            probe.reset()
            branch.register_mcp(server)
            await trio.lowlevel.checkpoint()  # the step that registered has ended
            registering = probe.longest
            before = server.listings
            probe.reset()
            started = time.perf_counter()
            await branch.act(ActionCall("relist", {}))
            await server.wait_listing(before + 1)
            on_change, change_seconds = probe.longest, time.perf_counter() - started
    finally:
        trio.lowlevel.remove_instrument(probe)
    print(
        f"  a list of {count:,} tools: start {start_seconds:.2f} s, list_changed "
        f"{change_seconds:.2f} s (wall time)"
    )
    for label, stall in [
        (f"longest event-loop stall, start with {count:,} tools", at_start),
        (f"longest event-loop stall, list_changed of {count:,} tools", on_change),
    ]:
        print(figure_line(label, stall * 1000, "ms", "<= 100", stall <= 0.1))
    print(
        figure_line("register_mcp (one synchronous call)", registering * 1000, "ms", "(info)", True)
    )


def main(smoke: bool) -> None:
    """Run the comparison and the long list, each in its own trio run, and print the figures."""
    trio.run(_main, smoke)
    trio.run(_long_list, smoke)
