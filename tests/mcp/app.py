"""The app the tests serve: ``pride mcp tests/mcp/app.py:build --expose helper``."""

from __future__ import annotations

from typing import Any

import trio

from pride import ActionCall, Branch, RunFailed, ScriptedModel, Session
from pride.llm import ModelRequest
from pride.tools import report_progress

cancelled: list[str] = []


async def steps(count: int) -> str:
    """Work in ``count`` steps, reporting each.

    Args:
        count: How many steps.
    """
    for step in range(1, count + 1):
        await report_progress(step, total=count, message=f"step {step}")
        await trio.sleep(0)  # a long count is a long turn, cancellable at each step
    return f"{count} steps done"


async def reply(request: ModelRequest) -> str:
    text = str(request.messages[-1]["content"])
    if "slow" in text:
        await trio.sleep(60)  # a long model call, for cancellation
    return f"echo: {text}"


async def crunch(branch: Branch, count: int) -> str:
    """Run the steps tool inside this turn (its progress reaches the MCP client).

    Args:
        count: How many steps.
    """
    [response] = await branch.act(ActionCall("steps", {"count": count}))
    return str(response.output)


async def stats(branch: Branch) -> dict[str, Any]:
    """How many of this session's turns were cancelled."""
    return {"cancelled": len(cancelled)}


async def build(session: Session) -> None:
    session.observe(
        RunFailed, handler=lambda s: cancelled.append(str(s.turn_id)) if s.cancelled else None
    )
    session.register_operation("stats", stats)
    session.register_operation("crunch", crunch)
    await session.spawn(Branch(name="helper", chat_model=ScriptedModel(reply), tools=[steps]))
    await session.spawn(Branch(name="private", chat_model=ScriptedModel(reply)))
