"""Tests for the OpenAI chat-completions endpoint, against the loopback server."""

from __future__ import annotations

import json

import pytest

from pride import ReasoningDelta
from pride.errors import MalformedResponse, ProviderConnectionError
from pride.llm import (
    ModelRequest,
    RetryPolicy,
    ScriptedReply,
    ToolCall,
    Usage,
    estimate_text_tokens,
    iModel,
)
from pride.testing import Fault, openai_server

KEY = "sk-test-openai-0123456789abcdef"
FAST = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0)
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SCHEMA = {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}


def _request(**kwargs) -> ModelRequest:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    return ModelRequest(messages=messages, **kwargs)


def _model(server, spec: str = "openai/gpt-4.1-mini", **kwargs) -> iModel:
    return iModel(spec, base_url=server.base_url, api_key=KEY, retry=FAST, **kwargs)


async def test_plain_call_sends_the_wire_format_and_normalises_the_reply():
    """A plain call posts model and messages with a bearer key and reads text and usage."""
    usage = Usage(input_tokens=1000, output_tokens=500, cached_tokens=200)
    async with openai_server([ScriptedReply("Hello!", usage=usage)]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
    assert (reply.text, reply.tool_calls, reply.finish_reason) == ("Hello!", (), "stop")
    assert (reply.provider, reply.model) == ("openai", "gpt-4.1-mini")
    assert reply.usage.input_tokens == 1000 and reply.usage.cached_tokens == 200
    # gpt-4.1-mini: 800 fresh at $0.40, 200 cached at $0.10, 500 out at $1.60 per million
    assert reply.usage.cost_usd == pytest.approx((800 * 0.40 + 200 * 0.10 + 500 * 1.60) / 1e6)
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "gpt-4.1-mini"
    assert sent.body["messages"] == _request().messages
    assert "stream" not in sent.body and "tools" not in sent.body


async def test_request_options_are_merged_over_the_model_options():
    """A request's options override the model's request options in the body."""
    async with openai_server(["ok"]) as server:
        async with _model(server, temperature=0.5, top_p=0.9) as model:
            await model.invoke(_request(options={"temperature": 0.1, "max_tokens": 5}))
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.1, 0.9, 5)


async def test_tools_go_out_as_functions_and_tool_calls_come_back():
    """Neutral tool specs become OpenAI functions; tool_calls are decoded with their ids."""
    calls = [ToolCall("get_weather", {"city": "Oslo"}, id="call_1"), ToolCall("noop", {})]
    async with openai_server([calls, "x"]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request(tools=[TOOL], tool_choice="required"))
            await model.invoke(_request(tools=[TOOL], tool_choice="get_weather"))
    assert reply.tool_calls == tuple(calls)
    assert reply.finish_reason == "tool_calls" and reply.text == ""
    first, second = (r.body for r in server.requests)
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": TOOL["parameters"],
            },
        }
    ]
    assert first["tool_choice"] == "required"
    assert second["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


async def test_undecodable_tool_arguments_are_reported_not_dropped():
    """Arguments that are not a JSON object give arguments={} and arguments_error."""
    body = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{oops"},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "g", "arguments": "[1]"},
                        },
                    ],
                },
            }
        ],
    }
    async with openai_server([Fault.raw(body)]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
    bad, wrong_type = reply.tool_calls
    assert bad.arguments == {} and "not valid JSON" in (bad.arguments_error or "")
    assert wrong_type.arguments == {} and "JSON object" in (wrong_type.arguments_error or "")


async def test_structured_output_uses_json_schema_natively():
    """response_format becomes OpenAI's json_schema response format (strict off)."""
    async with openai_server(['{"n": 3}']) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request(response_format=SCHEMA))
    assert json.loads(reply.text) == {"n": 3}
    assert server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA["schema"], "strict": False},
    }
    assert server.requests[0].body["messages"] == _request().messages


async def test_structured_output_falls_back_to_a_system_instruction():
    """Without native support, the schema is appended to (or becomes) the system message."""
    async with openai_server(["{}", "{}"]) as server:
        async with _model(server, "acme/m1") as model:
            await model.invoke(_request(response_format=SCHEMA))
            bare = ModelRequest(
                messages=[{"role": "user", "content": "hi"}], response_format=SCHEMA
            )
            await model.invoke(bare)
    with_system, without_system = (r.body for r in server.requests)
    assert "response_format" not in with_system
    system = with_system["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
    assert '"n":{"type":"integer"}' in system["content"] and "```json" in system["content"]
    assert without_system["messages"][0]["role"] == "system"
    assert without_system["messages"][1] == {"role": "user", "content": "hi"}


async def test_streaming_yields_deltas_and_assembles_the_response():
    """Streaming asks for usage, yields text deltas in order and ends with the full reply."""
    usage = Usage(input_tokens=12, output_tokens=7)
    async with openai_server(
        [ScriptedReply("The quick brown fox", usage=usage)], chunk_size=5
    ) as server:
        async with _model(server) as model:
            async with model.stream(_request()) as stream:
                deltas = [delta async for delta in stream]
    assert deltas == ["The q", "uick ", "brown", " fox"]
    assert stream.response.text == "The quick brown fox"
    assert stream.response.finish_reason == "stop"
    assert (stream.response.usage.input_tokens, stream.response.usage.output_tokens) == (12, 7)
    body = server.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert server.requests[0].headers["accept"] == "text/event-stream"


async def test_streamed_tool_calls_are_assembled_from_deltas():
    """Tool-call deltas (id and name first, arguments in pieces) become whole ToolCalls."""
    calls = [ToolCall("get_weather", {"city": "Oslo", "days": 3}, id="call_a"), ToolCall("b", {})]
    async with openai_server([ScriptedReply("checking", tool_calls=calls)]) as server:
        async with _model(server) as model:
            async with model.stream(_request(tools=[TOOL])) as stream:
                text = "".join([delta async for delta in stream])
    assert text == "checking"
    assert stream.response.tool_calls == tuple(calls)
    assert stream.response.finish_reason == "tool_calls"


async def test_openrouter_cost_comes_from_the_provider():
    """OpenRouter is asked for usage accounting and its reported cost is used."""
    usage = Usage(input_tokens=10, output_tokens=5, cost_usd=0.0042)
    async with openai_server([ScriptedReply("ok", usage=usage)]) as server:
        async with _model(server, "openrouter/anthropic/claude-sonnet-4") as model:
            reply = await model.invoke(_request())
    assert reply.usage.cost_usd == 0.0042
    assert server.requests[0].body["usage"] == {"include": True}
    assert server.requests[0].body["model"] == "anthropic/claude-sonnet-4"


async def test_unpriced_models_have_no_cost():
    """A model missing from the price table reports cost_usd=None."""
    async with openai_server(["ok"]) as server:
        async with _model(server, "acme/m1") as model:
            reply = await model.invoke(_request())
    assert reply.usage.cost_usd is None and reply.usage.input_tokens > 0


async def test_a_reply_without_choices_is_malformed():
    """A 200 whose JSON lacks choices[0].message raises MalformedResponse."""
    async with openai_server([Fault.raw({"id": "x"})]) as server:
        async with _model(server) as model:
            with pytest.raises(MalformedResponse, match=r"choices\[0\]"):
                await model.invoke(_request())
    assert server.request_count == 1


async def test_statistics_sum_usage_over_calls():
    """statistics() counts calls and sums usage across plain and streamed calls."""
    replies = [ScriptedReply("a", usage=Usage(1, 2)), ScriptedReply("b", usage=Usage(3, 4))]
    async with openai_server(replies) as server:
        async with _model(server, "acme/m1") as model:
            await model.invoke(_request())
            async with model.stream(_request()) as stream:
                async for _ in stream:
                    pass
    stats = model.statistics()
    assert (stats.calls, stats.retries, stats.failures, stats.in_flight) == (2, 0, 0, 0)
    assert stats.usage == Usage(4, 6)


async def test_reasoning_tokens_are_read_from_usage_and_priced_as_output():
    """completion_tokens_details.reasoning_tokens become Usage.reasoning_tokens; they are
    part of the output tokens, and billed as output."""
    usage = Usage(input_tokens=1000, output_tokens=500, cached_tokens=200, reasoning_tokens=300)
    async with openai_server([ScriptedReply("ok", usage=usage)]) as server:
        async with _model(server, "openai/o4-mini") as model:
            reply = await model.invoke(_request())
            statistics = model.statistics()
    assert (reply.usage.output_tokens, reply.usage.reasoning_tokens) == (500, 300)
    assert reply.usage.cost_usd == pytest.approx((800 * 1.10 + 200 * 0.275 + 500 * 4.40) / 1e6)
    assert statistics.usage.reasoning_tokens == 300


def test_usage_by_kind_adds_up():
    """Summed usages sum every kind of token."""
    one = Usage(10, 5, cached_tokens=2, cache_write_tokens=3, reasoning_tokens=4)
    total = one + one
    assert (total.cache_write_tokens, total.reasoning_tokens) == (6, 8)


def _deepseek_chunk(delta: dict, finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + json.dumps({"id": "c", "model": "deepseek-reasoner", "choices": [choice]})


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_compatible_servers_reasoning_is_read_apart_and_never_sent_back(field):
    """DeepSeek and vLLM send a reasoning model's thinking as ``reasoning_content``,
    OpenRouter and Ollama as ``reasoning``: it is read as Reasoning (plain) and streamed
    as ReasoningDelta items, never the answer's text; the stream counts it as output
    (a stream cut while the model thinks spent it), and it renders into no request:
    those servers refuse it sent back."""
    plain = {
        "id": "c",
        "model": "deepseek-reasoner",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "4", field: "2 and 2 make 4."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 9},
    }
    events = [
        _deepseek_chunk({"role": "assistant", "content": None, field: "2 and 2 "}),
        _deepseek_chunk({field: "make 4."}),
        _deepseek_chunk({"content": "4"}),
        _deepseek_chunk({}, "stop"),
        "data: [DONE]",
    ]
    stream = Fault.raw("\n\n".join(events) + "\n\n", content_type="text/event-stream")
    cut = Fault.raw("\n\n".join(events[:2]) + "\n\n", content_type="text/event-stream")
    async with openai_server([Fault.raw(plain), stream, cut]) as server:
        async with _model(server, "openai/deepseek-reasoner") as model:
            whole = await model.invoke(_request())
            async with model.stream(_request()) as streamed:
                items = [item async for item in streamed]
            with pytest.raises(ProviderConnectionError):
                async with model.stream(_request()) as cut_short:
                    async for _ in cut_short:
                        pass
    for reply in (whole, streamed.response):
        [kept] = reply.reasoning
        assert (reply.text, kept.text, kept.provider) == ("4", "2 and 2 make 4.", "openai_chat")
        assert kept.to_openai() is None and kept.to_anthropic() is None
    assert items == [
        ReasoningDelta("2 and 2 ", provider="openai_chat"),
        ReasoningDelta("make 4.", provider="openai_chat"),
        "4",
    ]
    assert cut_short.usage.output_tokens == estimate_text_tokens("2 and 2 ") + estimate_text_tokens(
        "make 4."
    )
