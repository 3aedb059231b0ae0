"""A stream cut before its reply counts the usage the provider already reported.

Anthropic's ``message_start`` carries the request's input tokens before any
text; a stream cut after it spent that prompt as the provider measured it, not
as pride estimates it (`pride.llm.ModelStream.usage`). Against the real
loopback server, each wire format.
"""

from __future__ import annotations

import json

import pytest

from pride.errors import MalformedResponse, ProviderConnectionError
from pride.llm import (
    ModelRequest,
    RetryPolicy,
    ScriptedReply,
    Usage,
    iModel,
)
from pride.testing import Fault, openai_server

REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])


def _anthropic(server: object) -> iModel:
    return iModel(
        "anthropic/claude-sonnet-4-20250514",
        base_url=server.base_url,  # type: ignore[attr-defined]
        api_key="sk-ant-test",
        retry=RetryPolicy.never(),
    )


async def _read_until_cut(model: iModel) -> tuple[list[object], Usage | None]:
    received: list[object] = []
    async with model:
        async with model.stream(REQUEST) as stream:
            with pytest.raises(ProviderConnectionError):
                async for delta in stream:
                    received.append(delta)
        return received, stream.usage


async def test_a_cut_anthropic_stream_counts_the_input_tokens_of_message_start() -> None:
    """message_start said 5000 input tokens: the cut stream counts 5000, not pride's
    estimate of the prompt (a handful), and the text it received as output."""
    reply = ScriptedReply("abcdefgh" * 10, usage=Usage(input_tokens=5000, output_tokens=90))
    # message_start, content_block_start, ping, two text deltas, then the cut
    async with openai_server([Fault.cut_stream(after_chunks=5, reply=reply)]) as server:
        received, usage = await _read_until_cut(_anthropic(server))
    assert received == ["abcdefgh", "abcdefgh"]
    assert usage is not None
    assert usage.input_tokens == 5000
    assert usage.output_tokens >= 2  # what it received, estimated (the report said 1)
    assert usage.cost_usd is not None and usage.cost_usd >= 5000 * 3 / 1e6


async def test_a_cut_anthropic_stream_before_message_start_counts_the_estimate() -> None:
    """No report came: the estimate of the prompt, as before."""
    reply = ScriptedReply("abcdefgh" * 10, usage=Usage(input_tokens=5000, output_tokens=90))
    async with openai_server([Fault.cut_stream(after_chunks=0, reply=reply)]) as server:
        model = _anthropic(server)
        async with model:
            async with model.stream(REQUEST) as stream:
                with pytest.raises(ProviderConnectionError):
                    async for _ in stream:
                        pass
    assert stream.usage is None or stream.usage.input_tokens < 100


async def test_a_lying_input_figure_in_message_start_is_a_malformed_response() -> None:
    """A count past what a budget can hold fails the stream naming the figure, and
    counts the estimate, never the lie (as a reply's own usage is checked)."""
    reply = ScriptedReply("abcdefgh" * 10, usage=Usage(input_tokens=2**60, output_tokens=9))
    async with openai_server([reply]) as server:
        model = _anthropic(server)
        async with model:
            async with model.stream(REQUEST) as stream:
                with pytest.raises(MalformedResponse) as info:
                    async for _ in stream:
                        pass
    assert info.value.path is not None and "input_tokens" in info.value.path
    assert stream.usage is not None
    assert 0 < stream.usage.input_tokens < 100  # the estimate of a one-word prompt


async def test_a_cut_chat_completions_stream_counts_a_usage_chunk_it_read() -> None:
    """A compatible server reporting usage in its chunks (vLLM's continuous usage
    stats) before a cut: the stream counts its prompt figure."""
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": None}],
        "usage": {"prompt_tokens": 4000, "completion_tokens": 1, "total_tokens": 4001},
    }
    events = f"data: {json.dumps(chunk)}\n\n"  # then the body ends: no finish, no [DONE]
    script = [Fault.raw(events, content_type="text/event-stream")]
    async with openai_server(script) as server:
        model = iModel(
            "openai/gpt-4o-mini",
            base_url=server.base_url,
            api_key="sk-test",
            retry=RetryPolicy.never(),
        )
        received, usage = await _read_until_cut(model)
    assert received == ["hello"]
    assert usage is not None and usage.input_tokens == 4000
