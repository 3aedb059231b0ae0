"""Issue 36, item 3: what pride serves over MCP is strict JSON, NaN or not.

The SDK's own ``ClientSession`` talks to ``build_server`` over the SDK's in-memory
streams, in this trio run (see test_serve_hostile.py).
"""

from __future__ import annotations

import math
from typing import Any

from mcp import types

from pride import Branch, ScriptedModel, Session
from pride.messages.codec import parse_json

from .test_serve_hostile import served


async def spread(branch: Branch) -> list[Any]:
    """Figures an operation may well return."""
    return [math.nan, math.inf, 1.5]


async def test_issue36_a_result_s_non_finite_numbers_are_served_as_null() -> None:
    """A result that is not text or an object is served as strict JSON text."""
    async with Session() as session:
        helper = await session.spawn(Branch(name="helper", chat_model=ScriptedModel(["x"])))
        helper.register_operation("spread", spread)
        async with served(session) as (client, _, _):
            result = await client.call_tool("helper_spread", {})
    assert not result.isError, result
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert parse_json(text.text) == [None, None, 1.5]
