"""run: the turn's messages streamed as produced, the tool loop, early exit, loop control."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pride
from pride import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Branch,
    Instruction,
    LoopBreak,
    LoopDirective,
    Run,
    RunEnd,
    RunFailed,
    ScriptedModel,
)
from pride.llm import ScriptedReply, ToolCall
from pride.operations.act import MAX_CALLS_PER_REPLY
from tests.helpers import Recorder
from tests.operations.support import add, kinds, pairs


def _shape(items: list[Any]) -> list[str]:
    """Item kinds, with consecutive text chunks collapsed to one "chunks" entry."""
    shape: list[str] = []
    for item in items:
        kind = "chunks" if isinstance(item, str) else type(item).__name__
        if not (shape and shape[-1] == kind == "chunks"):
            shape.append(kind)
    return shape


async def test_run_streams_messages_as_they_are_produced() -> None:
    """Instruction, then the tool round, then the streamed reply and its AssistantResponse."""
    model = ScriptedModel(
        [ToolCall("add", {"a": 1, "b": 2}, id="c1"), "The sum is 3."], chunk_size=4
    )
    async with Branch(chat_model=model, tools=[add]) as branch:
        async with branch.run("add 1 and 2") as items:
            received = [item async for item in items]
    assert _shape(received) == [
        "Instruction",
        "ActionRequest",
        "ActionResponse",
        "chunks",
        "AssistantResponse",
    ]
    assert "".join(item for item in received if isinstance(item, str)) == "The sum is 3."
    assert received[-1].text == "The sum is 3."
    assert list(branch.messages) == [item for item in received if not isinstance(item, str)]
    assert [tool["name"] for tool in model.calls[0].tools] == ["add"]
    assert model.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "3"}


async def test_run_through_ask_returns_the_items_without_chunks() -> None:
    """Via ask (and pride.stream on a Run command) the same messages come back."""
    replies = [ScriptedReply("Adding.", (ToolCall("add", {"a": 2, "b": 2}),)), "4"]
    async with Branch(chat_model=ScriptedModel(replies + replies)) as branch:
        branch.register_tools(add)
        items = await pride.ask(branch, Run("2+2"))
        async with pride.stream(branch, Run("2+2 again")) as streamed:
            again = [item async for item in streamed if not isinstance(item, str)]
    expected = [Instruction, AssistantResponse, ActionRequest, ActionResponse, AssistantResponse]
    assert [type(item) for item in items] == expected
    assert [type(item) for item in again] == expected
    assert items[-1].text == "4"


async def test_run_stops_cleanly_when_the_consumer_leaves_early() -> None:
    """Leaving after the first item ends the turn with RunEnd; the branch keeps serving."""
    recorder = Recorder()
    model = ScriptedModel(["a long reply that streams in many chunks"] * 2, chunk_size=2)
    async with Branch(chat_model=model, observer=recorder) as branch:
        async with branch.run("hello") as items:
            async for item in items:
                assert isinstance(item, Instruction)
                break
        async with branch.run("again") as items:
            received = [item async for item in items]
    assert _shape(received) == ["Instruction", "chunks", "AssistantResponse"]
    assert len(recorder.of(RunEnd)) == 2 and not recorder.of(RunFailed)


async def test_leaving_during_a_tool_call_still_answers_the_request() -> None:
    """A tool cut short by the consumer leaving gets an ActionResponse saying it did not run."""
    entered = trio.Event()

    async def slow(x: int) -> int:
        """Never finishes on its own."""
        entered.set()
        await trio.sleep_forever()
        return x

    model = ScriptedModel([ToolCall("slow", {"x": 1}, id="s1"), "unused"])
    async with Branch(chat_model=model, tools=[slow]) as branch:
        async with branch.run("go") as items:
            async for item in items:
                if isinstance(item, ActionRequest):
                    break
        [(request, response)] = pairs(branch.messages)
    assert request.call_id == response.call_id == "s1"
    assert response.error is not None and "not executed" in response.error
    assert kinds(branch.messages) == ["Instruction", "ActionRequest", "ActionResponse"]


async def test_cancel_ends_the_stream_and_break_fails_it() -> None:
    """CANCEL after an item ends the stream cleanly; BREAK raises LoopBreak from the loop."""
    recorder = Recorder()
    model = ScriptedModel(["first reply, streamed", "second reply, streamed"], chunk_size=3)
    async with Branch(chat_model=model, observer=recorder) as branch:
        async with branch.run("one") as items:
            cancelled = []
            async for item in items:
                cancelled.append(item)
                branch.control(LoopDirective.CANCEL)
        with pytest.raises(LoopBreak):
            async with branch.run("two") as items:
                async for _ in items:
                    branch.control(LoopDirective.BREAK, reason="stop")
    # honoured after the item it reacts to, or at the latest after the next one
    assert isinstance(cancelled[0], Instruction) and len(cancelled) <= 2
    assert not any(isinstance(item, AssistantResponse) for item in cancelled)
    assert [type(s) for s in recorder.signals if isinstance(s, RunEnd | RunFailed)] == [
        RunEnd,
        RunFailed,
    ]


async def test_cancel_through_ask_returns_the_items_so_far() -> None:
    """Without a consumer, a CANCEL ends run early and it returns what it had."""
    holder: dict[str, Branch] = {}

    def reply(request: Any) -> Any:
        holder["branch"].control(LoopDirective.CANCEL)
        return ToolCall("add", {"a": 1, "b": 1})

    async with Branch(chat_model=ScriptedModel(reply), tools=[add]) as branch:
        holder["branch"] = branch
        items = await pride.ask(branch, Run("x"))
    assert [type(item) for item in items] == [Instruction, ActionRequest]
    assert kinds(branch.messages) == ["Instruction", "ActionRequest", "ActionResponse"]


async def test_max_rounds_turns_tools_off_for_the_last_call() -> None:
    """After max_rounds rounds the model is called with tool_choice="none"."""
    model = ScriptedModel(lambda request: ToolCall("add", {"a": 1, "b": 1}))
    async with Branch(chat_model=model, tools=[add]) as branch:
        items = await pride.ask(branch, Run("loop", max_rounds=1))
    assert [request.tool_choice for request in model.calls] == [None, "none"]
    assert isinstance(items[-1], AssistantResponse) and "not executed" in items[-1].text
    with pytest.raises(ValueError, match="max_rounds"):
        async with Branch(chat_model=model) as branch:
            await pride.ask(branch, Run("x", max_rounds=-1))


async def test_the_tool_calls_of_one_streamed_reply_are_bounded() -> None:
    """A Run's reply asking for more tool calls than MAX_CALLS_PER_REPLY runs the first
    that many (each streamed with its response) and notes the rest in the reply."""
    cap = MAX_CALLS_PER_REPLY
    model = ScriptedModel([[ToolCall("add", {"a": 1, "b": 2})] * (cap + 5), "3"])
    async with Branch(chat_model=model, tools=[add]) as branch:
        items = await pride.ask(branch, Run("add"))
    assert sum(isinstance(item, ActionResponse) for item in items) == cap
    assert "5 further tool calls were not run" in items[1].text
