"""The loopback server's wire format, checked by the official openai and anthropic SDKs.

The SDKs' synchronous clients run in a worker thread (trio.to_thread) so they
do not couple to trio's event loop.
"""

from __future__ import annotations

import anthropic
import openai
import pytest
import trio

from pride.llm import ScriptedReply, ToolCall, Usage
from pride.testing import Fault, openai_server

MESSAGES = [{"role": "user", "content": "hello"}]


async def test_openai_sdk_reads_a_plain_completion():
    """chat.completions.create parses text, finish reason and usage."""
    reply = ScriptedReply("Hi there", usage=Usage(11, 3, cached_tokens=2))
    async with openai_server([reply]) as server:

        def call():
            with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
                return client.chat.completions.create(model="gpt-x", messages=MESSAGES)

        completion = await trio.to_thread.run_sync(call)
    choice = completion.choices[0]
    assert (choice.message.content, choice.finish_reason) == ("Hi there", "stop")
    assert completion.model == "gpt-x"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (11, 3)
    assert completion.usage.prompt_tokens_details.cached_tokens == 2


async def test_openai_sdk_reads_tool_calls_plain_and_streamed():
    """Tool calls parse in a completion and stream as indexed deltas with usage last."""
    calls = [ToolCall("get_weather", {"city": "Oslo"}, id="call_1"), ToolCall("noop", {})]
    async with openai_server([calls, ScriptedReply("ok", tool_calls=calls)]) as server:

        def call():
            with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
                plain = client.chat.completions.create(model="m", messages=MESSAGES)
                stream = client.chat.completions.create(
                    model="m",
                    messages=MESSAGES,
                    stream=True,
                    stream_options={"include_usage": True},
                )
                return plain, list(stream)

        plain, chunks = await trio.to_thread.run_sync(call)
    got = plain.choices[0].message.tool_calls
    assert [(c.id, c.function.name, c.function.arguments) for c in got] == [
        ("call_1", "get_weather", '{"city": "Oslo"}'),
        (calls[1].id, "noop", "{}"),
    ]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments: dict[int, str] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            arguments[delta.index] = arguments.get(delta.index, "") + (
                delta.function.arguments or ""
            )
    assert text == "ok" and arguments == {0: '{"city": "Oslo"}', 1: "{}"}
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["tool_calls"]


async def test_openai_sdk_maps_error_statuses():
    """The SDK recognises the server's 429 and 401 error documents."""
    async with openai_server([Fault.status(429, retry_after=0), Fault.status(401)]) as server:

        def call(error):
            with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as client:
                with pytest.raises(error) as caught:
                    client.chat.completions.create(model="m", messages=MESSAGES)
                return caught.value

        limited = await trio.to_thread.run_sync(call, openai.RateLimitError)
        denied = await trio.to_thread.run_sync(call, openai.AuthenticationError)
    assert limited.status_code == 429 and "simulated HTTP 429" in str(limited)
    assert denied.status_code == 401


async def test_anthropic_sdk_reads_a_message_with_tool_use():
    """messages.create parses text and tool_use blocks, stop reason and usage."""
    call = ToolCall("get_weather", {"city": "Oslo"}, id="toolu_1")
    reply = ScriptedReply("Checking.", tool_calls=(call,), usage=Usage(50, 8, cached_tokens=20))
    async with openai_server([reply]) as server:

        def run():
            with anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0) as c:
                return c.messages.create(model="claude-x", max_tokens=100, messages=MESSAGES)

        message = await trio.to_thread.run_sync(run)
    text, tool = message.content
    assert (text.type, text.text) == ("text", "Checking.")
    assert (tool.type, tool.id, tool.name, tool.input) == (
        "tool_use",
        "toolu_1",
        "get_weather",
        {"city": "Oslo"},
    )
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (30, 20)


async def test_anthropic_sdk_streams_text_and_assembles_tool_input():
    """The SDK's stream helper accumulates text deltas and input_json_delta pieces."""
    call = ToolCall("lookup", {"q": "trio", "n": 2}, id="toolu_2")
    async with openai_server([ScriptedReply("Let me look.", tool_calls=(call,))]) as server:

        def run():
            with anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0) as c:
                with c.messages.stream(model="c", max_tokens=50, messages=MESSAGES) as stream:
                    text = "".join(stream.text_stream)
                    return text, stream.get_final_message()

        text, final = await trio.to_thread.run_sync(run)
    assert text == "Let me look."
    tool = final.content[1]
    assert (tool.name, tool.input) == ("lookup", {"q": "trio", "n": 2})
    assert final.stop_reason == "tool_use"


async def test_anthropic_sdk_maps_error_statuses():
    """The SDK recognises the server's Anthropic-shaped 429."""
    async with openai_server([Fault.status(429)]) as server:

        def run():
            with anthropic.Anthropic(base_url=server.root_url, api_key="k", max_retries=0) as c:
                with pytest.raises(anthropic.RateLimitError) as caught:
                    c.messages.create(model="c", max_tokens=5, messages=MESSAGES)
                return caught.value

        error = await trio.to_thread.run_sync(run)
    assert error.status_code == 429 and error.body["error"]["type"] == "rate_limit_error"
