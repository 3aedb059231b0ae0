"""The loopback server's Responses API, checked by the official openai SDK's own types.

Each plain reply is validated as ``openai.types.responses.Response`` and each
streamed event as a ``ResponseStreamEvent`` (pydantic validation, not the
SDK's lenient construction), and the SDK's client reads both, its stream
helper accumulating the events into the final response (issue 33, item 7).
"""

from __future__ import annotations

import json

import httpx
import openai
import pydantic
import pytest
import trio
from openai.types.responses import Response, ResponseStreamEvent

from pride.llm import ScriptedReply, ToolCall, Usage
from pride.testing import openai_server

EVENTS = pydantic.TypeAdapter(ResponseStreamEvent)
CALL = ToolCall("get_weather", {"city": "Oslo"}, id="call_1")
REPLY = ScriptedReply(
    "Let me check.",
    tool_calls=(CALL,),
    usage=Usage(input_tokens=30, output_tokens=9, cached_tokens=4, reasoning_tokens=6),
)
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        "strict": False,
    }
]


def _body(**extra) -> dict:
    return {
        "model": "o4-mini",
        "input": [{"role": "user", "content": "weather?"}],
        "tools": TOOLS,
        "store": False,
        "include": ["reasoning.encrypted_content"],
        **extra,
    }


def _events(raw: str) -> list[dict]:
    """The data of each event of an SSE body, checked against its ``event:`` line."""
    events = []
    for block in raw.strip().split("\n\n"):
        kind, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert kind == f"event: {event['type']}"
        events.append(event)
    return events


async def test_a_plain_reply_is_an_sdk_response():
    """The reply validates as Response: reasoning item, message, function call and usage."""
    async with openai_server([REPLY]) as server, httpx.AsyncClient() as client:
        raw = await client.post(f"{server.base_url}/responses", json=_body())
    response = Response.model_validate(raw.json())
    reasoning, message, call = response.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    assert reasoning.encrypted_content in server.issued_reasoning
    assert message.type == "message" and message.content[0].text == "Let me check."
    assert (call.type, call.call_id, call.name, json.loads(call.arguments)) == (
        "function_call",
        "call_1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert response.usage is not None
    assert response.usage.input_tokens_details.cached_tokens == 4
    assert response.usage.output_tokens_details.reasoning_tokens == 6
    assert response.status == "completed" and response.store is False


async def test_every_streamed_event_is_an_sdk_stream_event():
    """Each SSE event validates as a ResponseStreamEvent, numbered in order, completed last."""
    reply = ScriptedReply("It is sunny.", tool_calls=(CALL,), thinking="Check the weather.")
    body = _body(stream=True, reasoning={"effort": "low", "summary": "auto"})
    async with openai_server([reply], chunk_size=5) as server, httpx.AsyncClient() as client:
        raw = await client.post(f"{server.base_url}/responses", json=body)
    assert raw.headers["content-type"] == "text/event-stream"
    events = [EVENTS.validate_python(event) for event in _events(raw.text)]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert (text, json.loads(arguments)) == ("It is sunny.", {"city": "Oslo"})
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["reasoning", "message", "function_call"]
    assert done[0].encrypted_content in server.issued_reasoning
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    assert summary == done[0].summary[0].text == "Check the weather."


async def test_the_sdk_client_reads_plain_and_streamed_replies():
    """responses.create and the responses.stream helper give the same final response."""
    async with openai_server([REPLY, REPLY]) as server:

        def call():
            with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
                plain = client.responses.create(**_body())
                with client.responses.stream(**_body()) as stream:
                    deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
                    final = stream.get_final_response()
                return plain, deltas, final

        plain, deltas, final = await trio.to_thread.run_sync(call)
    assert plain.output_text == final.output_text == "".join(deltas) == "Let me check."
    for response in (plain, final):
        calls = [item for item in response.output if item.type == "function_call"]
        assert [(c.call_id, c.name) for c in calls] == [("call_1", "get_weather")]


async def test_the_sdk_sees_refused_reasoning_as_a_bad_request():
    """Reasoning the server never issued is a 400 the SDK maps to BadRequestError."""
    forged = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "nope"}
    async with openai_server(["unused"]) as server:

        def call():
            with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
                with pytest.raises(openai.BadRequestError) as caught:
                    client.responses.create(
                        model="o4-mini", input=[{"role": "user", "content": "x"}, forged]
                    )
                return caught.value

        error = await trio.to_thread.run_sync(call)
    assert error.status_code == 400 and "could not be verified" in str(error)
