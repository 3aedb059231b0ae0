"""The verbs over real HTTP: pride's client against the loopback server, native tool calls.

These run on the real clock (an autojump clock would jump during socket I/O).
"""

from __future__ import annotations

import json
from typing import Any

import pride
from pride import Branch, Communicate, Operate, OperateResult, iModel
from pride.llm import RetryPolicy, ToolCall
from pride.testing import openai_server
from tests.operations.support import Answer, add, kinds, pairs

FAST = RetryPolicy(max_retries=0)


def _openai(server: Any) -> iModel:
    return iModel("openai/gpt-test", base_url=server.base_url, api_key="sk-test", retry=FAST)


def _anthropic(server: Any) -> iModel:
    return iModel("anthropic/claude-test", base_url=server.base_url, api_key="sk-test", retry=FAST)


async def test_chat_and_communicate_over_http() -> None:
    """chat records nothing, communicate records two messages; the system prompt is sent."""
    async with openai_server(["plain", '{"value": 8}']) as server:
        async with Branch(chat_model=_openai(server), system="Be exact.") as branch:
            assert await branch.chat("hi") == "plain"
            assert len(branch.messages) == 1
            result = await pride.ask(branch, Communicate("eight", response_format=Answer))
    assert result == Answer(8)
    assert kinds(branch.messages) == ["System", "Instruction", "AssistantResponse"]
    first, second = (request.body for request in server.requests)
    assert first["messages"][0] == {"role": "system", "content": "Be exact."}
    assert second["response_format"]["json_schema"]["name"] == "Answer"


async def test_operate_with_native_tool_calls_over_http() -> None:
    """Two native tool calls run, their results go back as tool messages, the answer parses."""
    calls = [ToolCall("add", {"a": 1, "b": 2}, id="call_x"), ToolCall("add", {"a": 3, "b": 4})]
    async with openai_server([calls, '{"value": 10}']) as server:
        async with Branch(chat_model=_openai(server), tools=[add]) as branch:
            result = await branch.operate("sum both", response_format=Answer, actions=True)
    assert isinstance(result, OperateResult) and result.output == Answer(10)
    assert [r.output for r in result.action_responses] == [3, 7]
    assert len(pairs(branch.messages)) == 2
    first, second = (request.body for request in server.requests)
    assert first["tools"][0]["function"]["name"] == "add"
    assistant, *tools = second["messages"][-3:]
    assert len(assistant["tool_calls"]) == 2
    assert assistant["tool_calls"][0]["id"] == "call_x"
    assert [(t["role"], t["content"]) for t in tools] == [("tool", "3"), ("tool", "7")]
    assert tools[0]["tool_call_id"] == "call_x"


async def test_operate_streams_over_sse() -> None:
    """Through pride.stream, operate's replies arrive as SSE text chunks; tools still run."""
    async with openai_server([ToolCall("add", {"a": 2, "b": 2}), "four, it is"]) as server:
        async with Branch(chat_model=_openai(server), tools=[add]) as branch:
            async with pride.stream(branch, Operate("2+2", actions=True)) as chunks:
                text = "".join([chunk async for chunk in chunks])
    assert text == "four, it is"
    assert all(request.body.get("stream") is True for request in server.requests)
    assert kinds(branch.messages)[-1] == "AssistantResponse"


async def test_react_with_native_tool_calls_over_http() -> None:
    """ReAct's rounds call tools natively over HTTP, then the answer step answers."""
    script = [
        ToolCall("add", {"a": 20, "b": 22}, id="r1"),
        json.dumps({"analysis": "20 + 22 = 42", "extension_needed": False}),
        json.dumps({"answer": "42"}),
    ]
    async with openai_server(script) as server:
        async with Branch(chat_model=_openai(server), tools=[add]) as branch:
            answer = await branch.ReAct("What is 20 + 22?")
    assert answer == "42"
    assert [(q.call_id, r.output) for q, r in pairs(branch.messages)] == [("r1", 42)]
    bodies = [request.body for request in server.requests]
    assert "tools" in bodies[0] and "tools" not in bodies[2]
    assert bodies[1]["messages"][-1] == {"role": "tool", "tool_call_id": "r1", "content": "42"}


async def test_operate_with_native_tool_calls_over_the_anthropic_wire() -> None:
    """On the Messages API, tool calls go back as tool_use/tool_result blocks, none empty."""
    async with openai_server([[ToolCall("add", {"a": 5, "b": 6}, id="tu_1")], "eleven"]) as server:
        async with Branch(chat_model=_anthropic(server), tools=[add], system="s") as branch:
            result = await branch.operate("5+6", actions=True)
    assert result.output == "eleven"
    second = server.requests[1].body
    assert second["system"] == [
        {"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}
    ]
    assistant, user = second["messages"][-2:]
    assert assistant["content"] == [
        {"type": "tool_use", "id": "tu_1", "name": "add", "input": {"a": 5, "b": 6}}
    ]
    assert user["content"][0]["type"] == "tool_result" and user["content"][0]["content"] == "11"
    for message in second["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            assert block.get("type") != "text" or block["text"]
