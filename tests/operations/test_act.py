"""act: direct tool execution, served in mailbox order but not a model turn."""

from __future__ import annotations

from typing import Any

import pytest

import pride
from pride import Act, ActionCall, Branch, MessageAdded, RunStart, ToolError
from tests.helpers import Recorder, echo_model
from tests.operations.support import add, explode, kinds, pairs


async def test_act_records_pairs_without_lifecycle_signals() -> None:
    """The facade and ask both record request/response pairs and emit no RunStart/RunEnd."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), tools=[add], observer=recorder) as branch:
        first = await branch.act({"function": "add", "arguments": {"a": 1, "b": 2}})
        second = await pride.ask(branch, Act([ActionCall("add", {"a": 2, "b": 2})]))
    assert [r.output for r in first + second] == [3, 4]
    assert [(q.function, r.output) for q, r in pairs(branch.messages)] == [("add", 3), ("add", 4)]
    assert set(recorder.kinds()) == {"MessageAdded"}
    assert all(signal.turn_id is None for signal in recorder.of(MessageAdded))


async def test_act_runs_several_calls_and_records_errors_as_responses() -> None:
    """A batch runs every call; a failing one is an error response, not an exception."""
    async with Branch(chat_model=echo_model(), tools=[add, explode]) as branch:
        responses = await branch.act(
            [
                ActionCall("add", {"a": 1, "b": 1}),
                ActionCall("explode", {"reason": "no"}),
                ActionCall("missing", {}),
            ]
        )
    assert responses[0].output == 2
    assert responses[1].error == "RuntimeError: no"
    assert responses[2].error is not None and "no tool named 'missing'" in responses[2].error
    assert kinds(branch.messages) == ["ActionRequest"] * 3 + ["ActionResponse"] * 3


async def test_act_inside_a_turn_runs_in_that_turns_scope() -> None:
    """Called from a turn, act joins it: its messages carry the turn id; no second RunStart."""
    recorder = Recorder()

    async def tool_step(branch: Branch) -> Any:
        return await branch.act(ActionCall("add", {"a": 5, "b": 5}))

    async with Branch(chat_model=echo_model(), tools=[add], observer=recorder) as branch:
        branch.register_operation("tool_step", tool_step)
        [response] = await branch.call("tool_step")
    assert response.output == 10
    [start] = recorder.of(RunStart)
    assert {signal.turn_id for signal in recorder.of(MessageAdded)} == {start.turn_id}


async def test_suppress_errors_false_raises_after_recording() -> None:
    """With suppress_errors=False a failed call raises ToolError; the pair is still recorded."""
    async with Branch(chat_model=echo_model(), tools=[explode]) as branch:
        with pytest.raises(ToolError, match="boom"):
            await branch.act(ActionCall("explode", {"reason": "boom"}), suppress_errors=False)
        assert await branch.chat("alive") == "re: alive"
    assert kinds(branch.messages) == ["ActionRequest", "ActionResponse"]


async def test_bad_strategy_is_a_clear_error() -> None:
    """An invalid max_concurrent is refused with ValueError and the actor keeps serving."""
    async with Branch(chat_model=echo_model(), tools=[add]) as branch:
        with pytest.raises(ValueError, match="max_concurrent"):
            await branch.act(ActionCall("add", {"a": 1, "b": 1}), max_concurrent=0)
        assert await branch.chat("ok") == "re: ok"
