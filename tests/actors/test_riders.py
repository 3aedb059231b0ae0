"""Commit riders (`pride.actors.riders`): a sender's record of an outcome, handed to
the actor with the envelope and called right before the turn's barriers (its
commit), once, with the outcome the caller gets."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import pytest
import trio

from pride import Act, ActionCall, Branch, Chat, ScriptedModel, Tool, TurnCancelled, send
from pride.actors.riders import riding
from tests.helpers import echo_model


class Log:
    """What ran, in order: rider calls and barrier passes."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def rider(self, turn_id: UUID | None, result: Any, failure: BaseException | None) -> None:
        self.events.append(("rider", turn_id, result, type(failure).__name__ if failure else None))

    async def barrier(self, state: Any) -> None:
        self.events.append(("barrier",))


async def test_a_turn_calls_its_rider_once_right_before_its_barriers() -> None:
    log = Log()
    async with Branch(chat_model=echo_model()) as branch:
        branch.actor.add_turn_barrier(log.barrier)
        with riding(log.rider):
            reply = await send(branch, Chat("hi"))
        assert await reply.result() == "re: hi"
        await branch.chat("no rider")  # an envelope made outside the block carries none
    assert log.events == [("rider", reply.turn_id, "re: hi", None), ("barrier",), ("barrier",)]


async def test_a_failed_turn_calls_it_with_the_failure() -> None:
    log = Log()

    def broken(request: Any) -> str:
        raise ValueError("no luck")

    async with Branch(chat_model=ScriptedModel(broken)) as branch:
        with riding(log.rider):
            reply = await send(branch, Chat("hi"))
        with pytest.raises(ValueError):
            await reply.result()
    assert log.events == [("rider", reply.turn_id, None, "ValueError")]


async def test_a_dropped_envelope_never_calls_it() -> None:
    log = Log()
    hold = trio.Event()

    async def slow(request: Any) -> str:
        await hold.wait()
        return "late"

    async with Branch(chat_model=ScriptedModel(slow)) as branch:
        first = await send(branch, Chat("first"))
        with riding(log.rider):
            queued = await send(branch, Chat("queued"))
        queued.cancel()
        with pytest.raises(TurnCancelled):
            await queued.result()
        hold.set()
        assert await first.result() == "late"
    assert log.events == []


async def test_a_successful_act_calls_it_before_its_commit() -> None:
    log = Log()

    def ping() -> str:
        """Answer pong."""
        return "pong"

    async with Branch(chat_model=echo_model(), tools=[Tool(ping)]) as branch:
        branch.actor.add_turn_barrier(log.barrier)
        with riding(log.rider):
            reply = await send(branch, Act((ActionCall("ping"),)))
        [response] = await reply.result()
    assert response.output == "pong"
    assert [event[0] for event in log.events] == ["rider", "barrier"]


async def test_a_raising_rider_is_logged_and_the_outcome_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def rider(turn_id: UUID | None, result: Any, failure: BaseException | None) -> None:
        raise RuntimeError("rider broke")

    async with Branch(chat_model=echo_model()) as branch:
        with riding(rider), caplog.at_level(logging.ERROR, logger="pride.actor"):
            reply = await send(branch, Chat("hi"))
            assert await reply.result() == "re: hi"
    assert "commit rider" in caplog.text and "rider broke" in caplog.text
