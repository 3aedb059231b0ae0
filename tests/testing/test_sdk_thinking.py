"""The loopback server's extended thinking, checked by the official anthropic SDK.

Each reply is validated against the SDK's own types (``anthropic.types.Message``
and its stream events), and the SDK, used as its documentation says (the
assistant's content sent back as it came), runs a thinking tool loop that the
server refuses without the thinking block, as the real API does. The SDK's
synchronous client runs in a worker thread (trio.to_thread).
"""

from __future__ import annotations

from typing import Any

import anthropic
import pydantic
import pytest
import trio
from anthropic.types import Message, RawMessageStreamEvent

from pride.llm import ScriptedReply, ToolCall
from pride.testing import openai_server

THINKING = {"type": "enabled", "budget_tokens": 2048}
TOOLS = [
    {
        "name": "add",
        "description": "Add two numbers.",
        "input_schema": {"type": "object", "properties": {"a": {"type": "number"}}},
    }
]
QUESTION = [{"role": "user", "content": "What is 2 + 3?"}]
EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RawMessageStreamEvent)


def _client(server: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0)


async def test_a_thinking_message_is_an_anthropic_message() -> None:
    """The plain reply validates as ``anthropic.types.Message``, thinking blocks first."""
    reply = ScriptedReply("5", thinking="2 + 3 = 5.", redacted="hidden")
    async with openai_server([reply], require_thinking=True) as server:

        def run() -> dict[str, Any]:
            with _client(server) as client:
                raw = client.messages.with_raw_response.create(
                    model="claude-x", max_tokens=4096, thinking=THINKING, messages=QUESTION
                )
                return raw.http_response.json()  # type: ignore[no-any-return]

        data = await trio.to_thread.run_sync(run)
    message = Message.model_validate(data, strict=True)
    thinking, redacted, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == "2 + 3 = 5."
    assert thinking.signature
    assert redacted.type == "redacted_thinking" and redacted.data
    assert text.type == "text" and text.text == "5"


async def test_streamed_thinking_events_are_the_sdks_stream_events() -> None:
    """Every streamed event validates as a RawMessageStreamEvent; the SDK's accumulated
    message holds the thinking block whole, signature included."""
    reply = ScriptedReply("It is 5.", thinking="Adding two and three.")
    async with openai_server([reply], chunk_size=5, require_thinking=True) as server:

        def run() -> tuple[list[Any], Any]:
            with _client(server) as client:
                with client.messages.stream(
                    model="c", max_tokens=4096, thinking=THINKING, messages=QUESTION
                ) as stream:
                    events = [
                        event for event in stream if event.type.startswith(("content", "message"))
                    ]
                    return events, stream.get_final_message()

        events, final = await trio.to_thread.run_sync(run)
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    kinds = [delta.type for delta in deltas]
    assert kinds[0] == "thinking_delta" and "signature_delta" in kinds
    assert kinds.index("signature_delta") < kinds.index("text_delta")
    for event in events:
        EVENTS.validate_python(event.model_dump(), strict=True)
    thinking, text = final.content
    assert (thinking.type, thinking.thinking) == ("thinking", "Adding two and three.")
    assert thinking.signature and text.text == "It is 5."


async def test_the_sdks_tool_loop_passes_with_its_thinking_and_is_refused_without() -> None:
    """Sent back as the SDK documents (the assistant's content as it came), the loop goes
    on; with the thinking block left out, the server answers the API's 400."""
    script = [
        ScriptedReply(tool_calls=(ToolCall("add", {"a": 2}, "toolu_1"),), thinking="Add."),
        "5",
    ]
    async with openai_server(script, require_thinking=True) as server:

        def run() -> tuple[Message, anthropic.BadRequestError]:
            with _client(server) as client:
                first = client.messages.create(
                    model="c", max_tokens=4096, thinking=THINKING, tools=TOOLS, messages=QUESTION
                )
                result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"}
                loop: list[Any] = [*QUESTION, {"role": "assistant", "content": first.content}]
                loop.append({"role": "user", "content": [result]})
                dropped = [*QUESTION, {"role": "assistant", "content": first.content[1:]}]
                dropped.append({"role": "user", "content": [result]})
                with pytest.raises(anthropic.BadRequestError) as refused:
                    client.messages.create(
                        model="c", max_tokens=4096, thinking=THINKING, tools=TOOLS, messages=dropped
                    )
                second = client.messages.create(
                    model="c", max_tokens=4096, thinking=THINKING, tools=TOOLS, messages=loop
                )
                return second, refused.value

        second, error = await trio.to_thread.run_sync(run)
    assert second.content[0].type == "text" and second.content[0].text == "5"
    assert error.status_code == 400
    assert error.body["error"]["type"] == "invalid_request_error"
    assert "must start with a thinking block" in error.body["error"]["message"]
