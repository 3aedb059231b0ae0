"""A reasoning model's tool loop over OpenAI's Responses API keeps its reasoning (issue 33).

The loopback server issues an encrypted reasoning item with each reply and,
as the real API does, refuses reasoning sent back that it never issued; so
these tests fail if pride drops the reasoning, edits it, or puts it out of
place. They run on the real clock (an autojump clock would jump during
socket I/O).
"""

from __future__ import annotations

from typing import Any

import pydantic
from openai.types.responses.response_create_params import (
    ResponseCreateParamsNonStreaming,
    ResponseCreateParamsStreaming,
)

import pride
from pride import Branch, Operate, Reasoning, iModel
from pride.llm import RetryPolicy, ToolCall
from pride.testing import openai_server
from tests.operations.support import add, kinds

FAST = RetryPolicy(max_retries=0)


def _responses(server: Any, **options: Any) -> iModel:
    return iModel(
        "openai/o4-mini", base_url=server.base_url, api_key="sk-test", retry=FAST, **options
    )


PLAIN = pydantic.TypeAdapter(ResponseCreateParamsNonStreaming)
STREAMED = pydantic.TypeAdapter(ResponseCreateParamsStreaming)


def _reasoning_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning items of a request, which is checked against the openai SDK's type."""
    (STREAMED if body.get("stream") else PLAIN).validate_python(body)
    return [item for item in body["input"] if item.get("type") == "reasoning"]


async def test_a_tool_loop_sends_the_reasoning_back_before_its_calls() -> None:
    """Call 2 carries call 1's reasoning item unchanged, right before the call it led to."""
    calls = [ToolCall("add", {"a": 1, "b": 2}, id="call_a"), ToolCall("add", {"a": 3, "b": 4})]
    async with openai_server([calls, "3 and 7"]) as server:
        async with Branch(chat_model=_responses(server), tools=[add]) as branch:
            result = await branch.operate("add both pairs", actions=True)
    assert result.output == "3 and 7"
    first, second = (request.body for request in server.requests)
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert _reasoning_of(first) == [] and first["tools"][0]["name"] == "add"
    [sent] = _reasoning_of(second)
    assert sent["encrypted_content"] in server.issued_reasoning and sent["id"].startswith("rs_")
    kinds_sent = [item.get("type") or item["role"] for item in second["input"]]
    assert kinds_sent == [
        "user",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    # The reasoning is conversation, recorded before the reply; never the answer's text.
    assert kinds(branch.messages) == [
        "Instruction",
        "Reasoning",
        "ActionRequest",
        "ActionRequest",
        "ActionResponse",
        "ActionResponse",
        "Reasoning",
        "AssistantResponse",
    ]
    reasoning = [m for m in branch.messages if isinstance(m, Reasoning)]
    assert {m.provider for m in reasoning} == {"openai_responses"}
    assert (reasoning[0].encrypted, reasoning[0].data["id"]) == (
        sent["encrypted_content"],
        sent["id"],
    )
    assert reasoning[1].encrypted in server.issued_reasoning
    assert all(m.text == "" for m in reasoning) and result.output == "3 and 7"


async def test_a_streamed_tool_loop_keeps_the_reasoning_too() -> None:
    """Over SSE, the finished reasoning item (output_item.done) is what goes back."""
    async with openai_server([ToolCall("add", {"a": 2, "b": 2}, id="c1"), "four"]) as server:
        async with Branch(chat_model=_responses(server), tools=[add]) as branch:
            async with pride.stream(branch, Operate("2+2", actions=True)) as chunks:
                text = "".join([chunk async for chunk in chunks if isinstance(chunk, str)])
    assert text == "four"
    second = server.requests[1].body
    assert second["stream"] is True
    [sent] = _reasoning_of(second)
    assert sent["encrypted_content"] in server.issued_reasoning


async def test_reasoning_survives_a_round_trip_and_the_next_turn_sends_it() -> None:
    """A branch restored from to_dict sends its recorded reasoning again on the next turn."""
    async with openai_server([ToolCall("add", {"a": 5, "b": 6}, id="c5"), "11", "ok"]) as server:
        async with Branch(chat_model=_responses(server), tools=[add]) as branch:
            await branch.operate("5+6", actions=True)
            data = branch.to_dict(mode="json")
        recorded = [m.encrypted for m in branch.messages if isinstance(m, Reasoning)]
        async with Branch.from_dict(data, chat_model=_responses(server)) as restored:
            await restored.communicate("thanks")
    assert len(recorded) == 2 and set(recorded) <= server.issued_reasoning
    third = server.requests[2].body
    assert [item["encrypted_content"] for item in _reasoning_of(third)] == recorded


async def test_chat_completions_leaves_responses_reasoning_out() -> None:
    """The same conversation moved to a chat-completions model sends no reasoning at all."""
    async with openai_server([ToolCall("add", {"a": 1, "b": 1}, id="c1"), "2", "fine"]) as server:
        async with Branch(chat_model=_responses(server), tools=[add]) as branch:
            await branch.operate("1+1", actions=True)
            chat = iModel("openai/gpt-4.1-mini", base_url=server.base_url, api_key="k", retry=FAST)
            await branch.communicate("and now?", chat_model=chat)
    moved = server.requests[2]
    assert moved.path == "/v1/chat/completions"
    for message in moved.body["messages"]:
        assert "reasoning_items" not in message
        assert message.get("content") or message.get("tool_calls")
    assert [m["role"] for m in moved.body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
