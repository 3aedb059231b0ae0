"""Tests for the OpenAI Responses endpoint, against the loopback server (issue 33, item 1)."""

from __future__ import annotations

import json
import logging

import pytest

from pride import Reasoning, ReasoningDelta
from pride.errors import BadRequest, RateLimited, ServerError
from pride.llm import ModelRequest, RetryPolicy, ScriptedReply, ToolCall, Usage, iModel
from pride.testing import Fault, openai_server

KEY = "sk-test-responses-0123456789abcdef"
TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SCHEMA = {"name": "answer", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}


def _request(**kwargs) -> ModelRequest:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    return ModelRequest(messages=messages, **kwargs)


def _model(server, spec: str = "openai/o4-mini", **kwargs) -> iModel:
    return iModel(spec, base_url=server.base_url, api_key=KEY, retry=RetryPolicy.never(), **kwargs)


class TestChoosingTheWireFormat:
    """openai_api: the Responses API for OpenAI's reasoning models, chat completions otherwise."""

    @pytest.mark.parametrize(
        ("spec", "api"),
        [
            ("openai/o4-mini", "responses"),
            ("openai/o3", "responses"),
            ("openai/gpt-5-mini", "responses"),
            ("openai/gpt-5-chat-latest", "chat_completions"),
            ("openai/gpt-4.1-mini", "chat_completions"),
            ("groq/o4-mini", "chat_completions"),
        ],
    )
    def test_the_default_follows_the_model(self, spec, api):
        """Reasoning families of the openai provider speak Responses; the rest chat completions."""
        assert iModel(spec, api_key=KEY).openai_api == api

    def test_an_explicit_choice_wins_and_survives_to_dict(self):
        """openai_api= picks either format for any OpenAI-format model; from_dict keeps it."""
        model = iModel("vllm/qwen3", base_url="http://127.0.0.1:1/v1", openai_api="responses")
        assert model.openai_api == "responses"
        assert iModel.from_dict(model.to_dict()).openai_api == "responses"
        chat = iModel("openai/o4-mini", api_key=KEY, openai_api="chat_completions")
        assert chat.to_dict()["openai_api"] == "chat_completions"

    def test_bad_choices_are_refused(self):
        """An unknown format, or one asked of an Anthropic model, is a ValueError."""
        with pytest.raises(ValueError, match="openai_api must be one of"):
            iModel("openai/o4-mini", api_key=KEY, openai_api="completions")
        with pytest.raises(ValueError, match="OpenAI-format models"):
            iModel("anthropic/claude-sonnet-4", api_key=KEY, openai_api="responses")


class TestReasoningOptions:
    """reasoning_effort and reasoning_summary are checked when the model is made (item 4)."""

    def test_bad_values_are_refused_naming_the_accepted_ones(self):
        """A value outside OpenAI's vocabulary is a ValueError, before anything is sent."""
        with pytest.raises(ValueError, match="reasoning_effort must be one of 'none'"):
            iModel("openai/o4-mini", api_key=KEY, reasoning_effort="extreme")
        with pytest.raises(ValueError, match="reasoning_summary must be one of 'auto'"):
            iModel("openai/o4-mini", api_key=KEY, reasoning_summary=True)

    def test_chat_completions_has_no_summaries(self):
        """A summary asked of a chat-completions model names the way to get one."""
        with pytest.raises(ValueError, match="openai_api='responses'"):
            iModel("openai/gpt-4.1-mini", api_key=KEY, reasoning_summary="auto")
        assert iModel("openai/gpt-4.1-mini", api_key=KEY, reasoning_effort="low")

    async def test_they_become_the_reasoning_object(self):
        """effort and summary go out as reasoning={...}; a call's options override the model's."""
        async with openai_server(["a", "b"]) as server:
            async with _model(server, reasoning_effort="low", reasoning_summary="auto") as model:
                await model.invoke(_request())
                await model.invoke(_request(options={"reasoning_effort": "high"}))
        first, second = (r.body for r in server.requests)
        assert first["reasoning"] == {"effort": "low", "summary": "auto"}
        assert second["reasoning"] == {"effort": "high", "summary": "auto"}
        assert "reasoning_effort" not in first and "reasoning_summary" not in first

    async def test_a_bad_per_call_value_is_refused_before_sending(self):
        """A call's own bad reasoning option (from a command, say) is BadRequest, unsent."""
        async with openai_server(["unused"]) as server:
            async with _model(server) as model:
                with pytest.raises(BadRequest, match="reasoning_effort must be one of"):
                    await model.invoke(_request(options={"reasoning_effort": 3}))
                with pytest.raises(BadRequest, match="reasoning_summary"):
                    async with model.stream(_request(options={"reasoning_summary": "x"})) as s:
                        async for _ in s:
                            pass
            chat = _model(server, "openai/gpt-4.1-mini")
            with pytest.raises(BadRequest, match="openai_api='responses'"):
                await chat.invoke(_request(options={"reasoning_summary": "auto"}))
        assert server.request_count == 0


async def test_a_plain_call_is_stateless_and_normalised():
    """POST /responses with store false, encrypted reasoning included, instructions and input."""
    usage = Usage(input_tokens=1000, output_tokens=500, cached_tokens=200, reasoning_tokens=320)
    async with openai_server([ScriptedReply("Hello!", usage=usage)]) as server:
        async with _model(server, max_tokens=64) as model:
            reply = await model.invoke(_request())
    assert (reply.text, reply.tool_calls, reply.finish_reason) == ("Hello!", (), "stop")
    assert (reply.provider, reply.model) == ("openai", "o4-mini")
    assert reply.usage == Usage(
        input_tokens=1000,
        output_tokens=500,
        cached_tokens=200,
        reasoning_tokens=320,
        # o4-mini: 800 fresh at $1.10, 200 cached at $0.275, 500 out at $4.40 per million
        cost_usd=pytest.approx((800 * 1.10 + 200 * 0.275 + 500 * 4.40) / 1e6),
    )
    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/responses")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "o4-mini",
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "max_output_tokens": 64,
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "hi"}],
    }


async def test_a_model_that_does_not_reason_asks_for_no_reasoning():
    """gpt-4.1 over the Responses API: store false, no include (it has no reasoning)."""
    async with openai_server(["ok"]) as server:
        async with _model(server, "openai/gpt-4.1-mini", openai_api="responses") as model:
            await model.invoke(_request())
    body = server.requests[0].body
    assert body["store"] is False and "include" not in body


async def test_storing_is_the_callers_choice():
    """store=True (with previous_response_id) goes as given and asks for no encrypted reasoning."""
    async with openai_server(["ok"]) as server:
        async with _model(server) as model:
            await model.invoke(_request(options={"store": True, "previous_response_id": "r1"}))
    body = server.requests[0].body
    assert (body["store"], body["previous_response_id"]) == (True, "r1")
    assert "include" not in body


async def test_tools_go_out_flat_and_function_calls_come_back():
    """Neutral tools become flat function tools (strict off); function_call items are read."""
    calls = [ToolCall("get_weather", {"city": "Oslo"}, id="call_1"), ToolCall("noop", {})]
    built_in = {"type": "web_search"}
    async with openai_server([ScriptedReply("Checking.", tool_calls=calls), "x"]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request(tools=[TOOL, built_in], tool_choice="required"))
            await model.invoke(_request(tools=[TOOL], tool_choice="get_weather"))
    assert reply.tool_calls == tuple(calls)
    assert (reply.text, reply.finish_reason) == ("Checking.", "tool_calls")
    first, second = (r.body for r in server.requests)
    assert first["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": TOOL["parameters"],
            "strict": False,
            "description": "Weather for a city.",
        },
        built_in,
    ]
    assert first["tool_choice"] == "required"
    assert second["tool_choice"] == {"type": "function", "name": "get_weather"}


async def test_a_tool_loop_conversation_becomes_input_items():
    """Assistant tool calls and tool results become function_call and function_call_output."""
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": [{"type": "text", "text": "look"}]},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    ]
    async with openai_server(["done"]) as server:
        async with _model(server) as model:
            await model.invoke(ModelRequest(messages=messages))
    assert server.requests[0].body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "look"}]},
        {"role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": '{"ok": true}'},
    ]


async def test_structured_output_is_text_format_with_a_json_schema():
    """response_format becomes text.format json_schema (strict off)."""
    async with openai_server(['{"n": 3}']) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request(response_format=SCHEMA))
    assert json.loads(reply.text) == {"n": 3}
    assert server.requests[0].body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "answer",
            "schema": SCHEMA["schema"],
            "strict": False,
        }
    }


async def test_a_stream_yields_text_deltas_and_assembles_calls_and_usage():
    """Typed SSE events: output_text deltas stream; function calls and usage are assembled."""
    call = ToolCall("get_weather", {"city": "Oslo"}, id="call_9")
    usage = Usage(input_tokens=40, output_tokens=12, cached_tokens=8, reasoning_tokens=5)
    reply = ScriptedReply("It is sunny in Oslo.", tool_calls=(call,), usage=usage)
    async with openai_server([reply], chunk_size=4) as server:
        async with _model(server) as model:
            async with model.stream(_request(tools=[TOOL])) as stream:
                deltas = [delta async for delta in stream]
    assert deltas == ["It i", "s su", "nny ", "in O", "slo."]
    response = stream.response
    assert response.text == "It is sunny in Oslo." and response.tool_calls == (call,)
    assert response.finish_reason == "tool_calls"
    assert (response.usage.cached_tokens, response.usage.reasoning_tokens) == (8, 5)
    assert server.requests[0].body["stream"] is True


def _response(**fields) -> dict:
    doc = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "o4-mini",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "partial", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    return {**doc, **fields}


async def test_an_incomplete_response_says_why():
    """status incomplete with max_output_tokens is finish_reason 'length'."""
    incomplete = _response(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    async with openai_server([Fault.raw(incomplete)]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
    assert (reply.text, reply.finish_reason) == ("partial", "length")


async def test_a_refusal_is_shown_not_dropped():
    """A refusal part is the reply's text (what the model said instead of an answer)."""
    message = {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    async with openai_server([Fault.raw(_response(output=[message]))]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
    assert reply.text == "I can't help with that."


async def test_failures_inside_a_reply_are_typed_provider_errors():
    """A failed response, a response.failed event and an error event raise pride's errors."""
    failed = _response(status="failed", error={"code": "server_error", "message": "boom"})
    failed_event = {"type": "response.failed", "sequence_number": 1, "response": failed}
    limited = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    sse = [
        Fault.raw(f"data: {json.dumps(event)}\n\n", content_type="text/event-stream")
        for event in (failed_event, limited)
    ]
    async with openai_server([Fault.raw(failed), *sse]) as server:
        async with _model(server) as model:
            with pytest.raises(ServerError, match="boom"):
                await model.invoke(_request())
            for error in (ServerError, RateLimited):
                with pytest.raises(error):
                    async with model.stream(_request()) as stream:
                        async for _ in stream:
                            pass


async def test_reasoning_sent_back_that_the_server_never_issued_is_refused():
    """The loopback server refuses unknown encrypted reasoning with a 400, as the API does."""
    forged = {"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "forged"}
    request = ModelRequest(messages=[{"role": "user", "content": "hi"}, forged])
    async with openai_server(["unused"]) as server:
        async with _model(server) as model:
            with pytest.raises(BadRequest, match="could not be verified"):
                await model.invoke(request)


async def test_reasoning_items_are_read_into_reasoning_messages():
    """Each reasoning item is a Reasoning: summary texts readable, id and encrypted kept."""
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "First, the city."},
            {"type": "summary_text", "text": "Then the tool."},
        ],
        "encrypted_content": "opaque==",
    }
    doc = _response(output=[reasoning, *_response()["output"]])
    async with openai_server([Fault.raw(doc)]) as server:
        async with _model(server) as model:
            reply = await model.invoke(_request())
    [kept] = reply.reasoning
    assert (kept.provider, kept.encrypted) == ("openai_responses", "opaque==")
    assert kept.text == "First, the city.\n\nThen the tool."
    assert kept.data == {"id": "rs_1", "summary": ["First, the city.", "Then the tool."]}
    assert reply.text == "partial"  # the reasoning is never the answer's text


def test_reasoning_goes_back_built_from_its_fields_alone():
    """A stored Reasoning (untrusted) renders only a well-formed item; chat gets nothing."""
    stored = Reasoning(
        provider="openai_responses",
        encrypted="opaque==",
        data={"id": "rs_1", "summary": ["ok", 7, {"type": "input_text"}], "type": "message"},
    )
    entry = stored.to_openai()
    assert entry == {
        "role": "assistant",
        "content": None,
        "reasoning_items": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "ok"}],
                "encrypted_content": "opaque==",
            }
        ],
    }
    assert Reasoning(provider="anthropic", reasoning="x", signature="s").to_openai() is None
    assert stored.to_anthropic() is None


async def test_a_request_it_cannot_build_is_refused_unsent():
    """A content part that is no object is BadRequest before anything is sent."""
    request = ModelRequest(messages=[{"role": "user", "content": ["not a part"]}])
    async with openai_server(["unused"]) as server:
        async with _model(server) as model:
            with pytest.raises(BadRequest, match="a content part must be an object"):
                await model.invoke(request)
    assert server.request_count == 0


async def test_a_native_reasoning_option_is_merged_under_the_checked_ones():
    """reasoning={...} given as Responses' own option wins over reasoning_effort."""
    async with openai_server(["a"]) as server:
        async with _model(server, reasoning_effort="low", reasoning={"effort": "high"}) as model:
            await model.invoke(_request())
    assert server.requests[0].body["reasoning"] == {"effort": "high"}


async def test_a_reasoning_summary_streams_as_reasoning_deltas():
    """Summary pieces are ReasoningDelta items, apart from the text; the item is kept whole."""
    reply = ScriptedReply("Sunny.", thinking="The user wants the weather.")
    async with openai_server([reply, reply, reply], chunk_size=5) as server:
        async with _model(server, reasoning_summary="auto") as model:
            async with model.stream(_request()) as stream:
                items = [item async for item in stream]
            plain = await model.invoke(_request())
            unasked = await model.invoke(_request(options={"reasoning_summary": None}))
    thought = [item for item in items if isinstance(item, ReasoningDelta)]
    assert "".join(item.text for item in thought) == "The user wants the weather."
    assert {item.provider for item in thought} == {"openai_responses"}
    assert "".join(item for item in items if isinstance(item, str)) == "Sunny."
    [kept] = stream.response.reasoning
    assert kept.text == "The user wants the weather." and kept.encrypted in server.issued_reasoning
    assert stream.response.text == plain.text == "Sunny."
    assert plain.reasoning[0].text == kept.text
    # Without a summary asked for, the API reports none: the reasoning is encrypted only.
    assert unasked.reasoning[0].text == "" and unasked.reasoning[0].encrypted


@pytest.mark.parametrize("store", [False, True])
async def test_reasoning_without_its_content_goes_back_only_to_a_stored_conversation(store, caplog):
    """A reasoning item that came back without ``encrypted_content`` (asked of a model
    pride did not know reasons, say) is only an id: the API finds it only when
    conversations are stored, and refuses it otherwise ("Item with id ... not found"),
    so a stateless request leaves it out (logged) and keeps the rest."""
    by_id = Reasoning(provider="openai_responses", data={"id": "rs_1", "summary": ["x"]})
    messages = [
        {"role": "user", "content": "hi"},
        by_id.to_openai(),
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]
    caplog.set_level(logging.INFO, logger="pride.llm")
    async with openai_server(["ok"]) as server:
        spec = "openai/my-deployment"
        async with _model(server, spec, openai_api="responses", store=store) as model:
            assert (await model.invoke(ModelRequest(messages=messages))).text == "ok"
    sent = server.requests[-1].body["input"]
    assert [i.get("id") for i in sent if i.get("type") == "reasoning"] == (["rs_1"] * store)
    assert [i.get("role") for i in sent if i.get("type") != "reasoning"] == [
        "user",
        "assistant",
        "user",
    ]
    left_out = [r for r in caplog.records if "left out 1 reasoning item" in r.getMessage()]
    assert len(left_out) == (not store)
