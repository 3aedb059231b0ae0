"""``pride mcp`` serving the demo's team: an agent's reply of tool calls alone is said.

Issue 35, item 2: ``ask_planner`` (a ``ChatAndRecord`` turn, which runs no
tools) answered ``""`` with ``isError: false``, because the scripted planner
answers with a tool call. Real subprocess, the SDK's own client.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).parent.parent.parent


async def test_ask_planner_names_the_calls_it_did_not_run() -> None:
    """The answer is the note of the calls the planner asked for, never empty."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pride.cli", "mcp", "examples/demo.py:spawn_team", "--expose", "planner"],
        cwd=str(ROOT),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("ask_planner", {"instruction": "Brief me"})
    assert not result.isError
    [content] = result.content
    text = getattr(content, "text", "")
    assert text.startswith("(requested actions, not executed: ask_researcher("), text
