"""Tests for ``pride.cli._status``: what ``pride run``'s status line says of the tree."""

from __future__ import annotations

import io

import trio
import trio.testing
from rich.console import Console

from pride import Branch, Chat, ScriptedModel, Session
from pride.cli._status import StatusLine, describe_usage, turns_in_flight
from pride.llm import ModelRequest, ScriptedReply, Usage as CallUsage
from pride.messages import Usage


async def test_the_status_line_names_the_turns_in_flight_and_the_cost() -> None:
    """While a turn runs its branch is named; afterwards tokens and cost are counted."""
    release = trio.Event()

    async def held(request: ModelRequest) -> ScriptedReply:
        await release.wait()
        return ScriptedReply("ok", usage=CallUsage(20, 10, 0, 0.05))

    async with Session() as root:
        team = await root.spawn_session("team")
        ada = await team.spawn(Branch(name="ada", chat_model=ScriptedModel(held)))
        status = StatusLine(root, Console(file=io.StringIO(), width=200))
        reply = await root.send("ada", Chat("q"))
        await trio.testing.wait_all_tasks_blocked()  # the turn waits on the model
        assert ada.active_turn_id == reply.turn_id
        assert turns_in_flight(root) == ["ada"]
        assert "1 running (ada)" in status.render().plain
        release.set()
        await reply.result()
        line = status.render().plain
    assert "running" not in line
    assert "turns 1 done, 0 failed" in line and "tokens 30" in line and "$0.0500" in line


def test_usage_is_described_with_its_cost_only_when_known() -> None:
    """A usage reads as tokens in and out, plus the cost when a model reported one."""
    assert describe_usage(Usage(1000, 234, None)) == "1,234 tokens (1,000 in, 234 out)"
    assert describe_usage(Usage(1, 2, 0.0123)) == "3 tokens (1 in, 2 out), $0.0123"
