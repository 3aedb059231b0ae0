"""act: direct tool execution, served in mailbox order but not a model turn."""

from __future__ import annotations

import re
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


async def test_an_act_command_reads_call_mappings_as_the_facade_does() -> None:
    """``Act(({"function": ..., "arguments": ...},))`` is the same command as with
    ActionCalls (before, the mapping reached the actor and failed there with an
    AttributeError)."""
    command = Act(({"function": "add", "arguments": {"a": 2, "b": 3}, "call_id": "c1"},))
    assert command.action_requests == (ActionCall("add", {"a": 2, "b": 3}, "c1"),)
    async with Branch(chat_model=echo_model(), tools=[add]) as branch:
        responses = await pride.ask(branch, command)
    assert [response.output for response in responses] == [5]


@pytest.mark.parametrize(
    ("requests", "named"),
    [
        ({"function": "add"}, "a sequence of calls"),
        ("add", "a sequence of calls"),
        (ActionCall("add"), "a sequence of calls"),
        ([ActionCall("add"), 42], "call 1 of Act is a int"),
        ([{"arguments": {}}], 'needs a "function"'),
        ([{"function": 7}], 'needs a "function"'),
        ([{"function": "add", "arguments": [1, 2]}], '"arguments" of call 0 (add) must be'),
        ([{"function": "add", "call_id": 3}], '"call_id" of call 0 (add)'),
    ],
)
def test_a_malformed_act_is_refused_where_it_is_made_naming_the_call(
    requests: Any, named: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(named)):
        Act(requests)


async def test_the_facade_refuses_a_malformed_call_with_a_type_error() -> None:
    async with Branch(chat_model=echo_model(), tools=[add]) as branch:
        with pytest.raises(TypeError, match='needs a "function"'):
            await branch.act({"arguments": {}})
        assert await branch.act({"function": "add", "arguments": {"a": 1, "b": 1}})
