"""Tests for the Anthropic Messages endpoint, against the loopback server."""

from __future__ import annotations

import pytest

from pride.errors import ServerError
from pride.llm import ModelRequest, RetryPolicy, ScriptedReply, ToolCall, Usage, iModel
from pride.testing import Fault, openai_server

KEY = "sk-ant-test-0123456789abcdef"
FAST = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0)
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SCHEMA = {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}


def _request(**kwargs) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "hi"}], system="Be brief.", **kwargs)


def _model(server, **kwargs) -> iModel:
    kwargs.setdefault("retry", FAST)
    return iModel(
        "anthropic/claude-sonnet-4-20250514", base_url=server.base_url, api_key=KEY, **kwargs
    )


async def test_plain_call_sends_the_messages_wire_format():
    """System text, max_tokens and the x-api-key header go out; text and usage come back."""
    usage = Usage(input_tokens=1000, output_tokens=100, cached_tokens=400)
    async with openai_server([ScriptedReply("Hello!", usage=usage)]) as server:
        async with _model(server, temperature=0) as model:
            reply = await model.invoke(_request())
    assert (reply.text, reply.finish_reason, reply.provider) == ("Hello!", "stop", "anthropic")
    assert reply.usage.input_tokens == 1000 and reply.usage.cached_tokens == 400
    # claude-sonnet-4: 600 fresh at $3, 400 cached at $0.30, 100 out at $15 per million
    assert reply.usage.cost_usd == pytest.approx((600 * 3 + 400 * 0.3 + 100 * 15) / 1e6)
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and "authorization" not in sent.headers
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.body == {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 4096,
        "temperature": 0,
        # one text block, to carry the default cache breakpoint (pride.llm._caching)
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }


async def test_max_tokens_from_options_wins():
    """A max_tokens request option replaces the default."""
    async with openai_server(["ok"]) as server:
        async with _model(server, max_tokens=50) as model:
            await model.invoke(_request())
    assert server.requests[0].body["max_tokens"] == 50


async def test_tools_become_input_schemas_and_tool_use_blocks_come_back():
    """Neutral tools go out with input_schema; tool_use blocks become ToolCalls."""
    call = ToolCall("get_weather", {"city": "Oslo"}, id="toolu_1")
    async with openai_server(
        [ScriptedReply("Let me check.", tool_calls=(call,)), "x", "y"]
    ) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request(tools=[TOOL], tool_choice="auto"))
            await model.invoke(_request(tools=[TOOL], tool_choice="required"))
            await model.invoke(_request(tools=[TOOL], tool_choice="get_weather"))
    assert (reply.text, reply.tool_calls, reply.finish_reason) == (
        "Let me check.",
        (call,),
        "tool_calls",
    )
    bodies = [r.body for r in server.requests]
    assert bodies[0]["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": TOOL["parameters"],
            "cache_control": {"type": "ephemeral"},  # the default policy's breakpoint
        }
    ]
    assert [b["tool_choice"] for b in bodies] == [
        {"type": "auto"},
        {"type": "any"},
        {"type": "tool", "name": "get_weather"},
    ]


async def test_structured_output_is_asked_for_in_the_system_text():
    """Anthropic has no JSON-schema mode: the schema is appended to the system text."""
    async with openai_server(['```json\n{"n": 1}\n```', "{}"]) as server:
        async with _model(server) as model:
            await model.invoke(_request(response_format=SCHEMA))
            no_system = ModelRequest([{"role": "user", "content": "hi"}], response_format=SCHEMA)
            await model.invoke(no_system)
    first, second = (r.body["system"][0]["text"] for r in server.requests)
    assert first.startswith("Be brief.\n\n")
    assert '"n":{"type":"integer"}' in first and "```json" in first
    assert "response_format" not in server.requests[0].body
    assert second.startswith("Answer with one JSON object")


async def test_streaming_text_and_tool_use_with_input_json_deltas():
    """Streamed text deltas are yielded; tool input arrives as JSON pieces and is assembled."""
    call = ToolCall("get_weather", {"city": "Oslo", "days": 2}, id="toolu_9")
    usage = Usage(input_tokens=30, output_tokens=9, cached_tokens=10)
    reply = ScriptedReply("Checking now", tool_calls=(call,), usage=usage)
    async with openai_server([reply], chunk_size=4) as server:
        async with _model(server) as model:
            async with model.stream(_request(tools=[TOOL])) as stream:
                deltas = [delta async for delta in stream]
    assert deltas == ["Chec", "king", " now"]
    response = stream.response
    assert (response.text, response.tool_calls) == ("Checking now", (call,))
    assert response.finish_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 9)
    assert response.usage.cached_tokens == 10
    assert server.requests[0].body["stream"] is True


async def test_an_error_event_in_the_stream_is_raised():
    """An Anthropic `error` event inside a 200 stream becomes the matching error."""
    events = (
        'event: message_start\ndata: {"type": "message_start", "message": {"model": "c"}}\n\n'
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n'
    )
    script = [Fault.raw(events, content_type="text/event-stream")]
    async with openai_server(script) as server:
        async with _model(server, retry=RetryPolicy.never()) as model:
            with pytest.raises(ServerError, match="Overloaded"):
                async with model.stream(_request()) as stream:
                    async for _ in stream:
                        pass


async def test_cache_writes_are_read_from_usage_and_priced_at_the_write_rate():
    """cache_creation_input_tokens become Usage.cache_write_tokens, priced at 1.25x input."""
    usage = Usage(input_tokens=1000, output_tokens=100, cached_tokens=400, cache_write_tokens=300)
    async with openai_server([ScriptedReply("Hi", usage=usage)]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
            statistics = model.statistics()
    assert (reply.usage.input_tokens, reply.usage.cached_tokens) == (1000, 400)
    assert reply.usage.cache_write_tokens == 300
    # claude-sonnet-4: 300 fresh at $3, 400 read at $0.30, 300 written at $3.75, 100 out at $15
    expected = (300 * 3 + 400 * 0.3 + 300 * 3.75 + 100 * 15) / 1e6
    assert reply.usage.cost_usd == pytest.approx(expected)
    assert statistics.usage.cache_write_tokens == 300
