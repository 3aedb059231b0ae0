"""Anthropic thinking replies of the wrong shape are a MalformedResponse, never a crash.

The thinking and redacted-thinking blocks, and the stream's ``thinking_delta``
and ``signature_delta`` events, are read from real replies as the API sends
them, and the same mutations as ``test_reply_shapes`` (one to three values
replaced by any JSON value, or deleted) are read or refused with a
``ProviderError``, over a real loopback connection, plain and streamed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from pride import ReasoningDelta
from pride.errors import MalformedResponse
from pride.llm import ModelResponse
from pride.testing import Fault, openai_server

from .test_reply_shapes import (
    KEY,
    PROPERTY,
    REQUEST,
    _check,
    _model,
    _outcome,
    _set,
    _sse,
    mutated,
)

THINKING_MESSAGE: dict[str, Any] = {
    "id": "msg_01ThinkThinkThinkThinkThink",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [
        {
            "type": "thinking",
            "thinking": "The user wants the weather in Oslo; call the tool.",
            "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
        },
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlx"},
        {"type": "text", "text": "Let me check."},
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"city": "Oslo"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 2095,
        "output_tokens": 503,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    },
}

THINKING_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 25, "output_tokens": 1},
        },
    },
    {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "Weather in Oslo: "},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "call the tool."},
    },
    {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Let me"}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": " check."}},
    {"type": "content_block_stop", "index": 2},
    {
        "type": "content_block_start",
        "index": 3,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 3,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Oslo"}'},
    },
    {"type": "content_block_stop", "index": 3},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 15},
    },
    {"type": "message_stop"},
]


async def _streamed(events: list[Any]) -> tuple[list[Any], ModelResponse]:
    fault = Fault.raw(_sse("anthropic", events), content_type="text/event-stream")
    async with openai_server([fault]) as server, _model(server, "anthropic") as model:
        async with model.stream(REQUEST) as stream:
            items = [item async for item in stream]
    return items, stream.response


async def test_a_thinking_message_is_read_with_its_blocks_apart_from_the_text() -> None:
    """Thinking and redacted blocks become Reasoning, in order; the text is the answer only."""
    async with openai_server([Fault.raw(_json(THINKING_MESSAGE))]) as server:
        async with _model(server, "anthropic") as model:
            response = await model.invoke(REQUEST)
    assert response.text == "Let me check."
    thinking, redacted = response.reasoning
    assert thinking.reasoning == "The user wants the weather in Oslo; call the tool."
    assert thinking.signature == THINKING_MESSAGE["content"][0]["signature"]
    assert redacted.redacted and redacted.encrypted == THINKING_MESSAGE["content"][1]["data"]
    assert {block.provider for block in response.reasoning} == {"anthropic"}
    assert [call.name for call in response.tool_calls] == ["get_weather"]


async def test_streamed_thinking_arrives_as_its_own_items() -> None:
    """thinking_delta pieces are ReasoningDelta items, never text; the blocks are whole last."""
    items, response = await _streamed(THINKING_EVENTS)
    assert [item for item in items if isinstance(item, str)] == ["Let me", " check."]
    pieces = [item for item in items if isinstance(item, ReasoningDelta)]
    assert [piece.text for piece in pieces] == ["Weather in Oslo: ", "call the tool."]
    assert items.index(pieces[-1]) < items.index("Let me")
    thinking, redacted = response.reasoning
    assert thinking.reasoning == "Weather in Oslo: call the tool."
    assert thinking.signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"
    assert redacted.encrypted == "EmwKAhgBEgy3va3pzix"
    assert response.text == "Let me check."


THINKING_WRONG_SHAPES = [
    (False, ("content", 0, "thinking"), 5, "content[0].thinking"),
    (False, ("content", 0, "signature"), ["x"], "content[0].signature"),
    (False, ("content", 1, "data"), {}, "content[1].data"),
    (True, (2, "delta", "thinking"), 3, "event 3: delta.thinking"),
    (True, (4, "delta", "signature"), False, "event 5: delta.signature"),
    (True, (1, "content_block", "thinking"), [], "event 2: content_block.thinking"),
    (True, (6, "content_block", "data"), 1.5, "event 7: content_block.data"),
    (True, (2, "index"), "0", "event 3: index"),
]


@pytest.mark.parametrize(("streamed", "where", "value", "path"), THINKING_WRONG_SHAPES)
async def test_a_wrong_thinking_shape_names_its_path(
    streamed: bool, where: tuple[Any, ...], value: Any, path: str
) -> None:
    """Each wrong value in a thinking block or event is MalformedResponse with its path."""
    reply = _set(THINKING_EVENTS if streamed else THINKING_MESSAGE, where, value)
    with pytest.raises(MalformedResponse) as caught:
        await _read(streamed, reply)
    assert caught.value.path == path
    assert KEY not in str(caught.value)


async def _read(streamed: bool, reply: Any) -> None:
    """Read ``reply`` (a stream's events, or a whole message) as Anthropic's."""
    if streamed:
        await _streamed(reply)
        return
    async with openai_server([Fault.raw(_json(reply))]) as server:
        async with _model(server, "anthropic") as model:
            await model.invoke(REQUEST)


def _json(doc: Any) -> bytes:
    return json.dumps(doc).encode()


@PROPERTY
@given(mutated(THINKING_MESSAGE))
async def test_mutated_thinking_messages_are_read_or_refused(reply: Any) -> None:
    """A mutated thinking message is read or refused, never an untyped error."""
    _check_reasoning(await _outcome("anthropic", reply, False))


@PROPERTY
@given(mutated(THINKING_EVENTS))
async def test_mutated_thinking_streams_are_read_or_refused(reply: Any) -> None:
    """A mutated thinking stream is read or refused, never an untyped error."""
    _check_reasoning(await _outcome("anthropic", reply, True))


def _check_reasoning(outcome: ModelResponse | BaseException) -> None:
    _check(outcome)
    if isinstance(outcome, ModelResponse):
        for block in outcome.reasoning:
            assert isinstance(block.reasoning, str)
            assert block.signature is None or isinstance(block.signature, str)
            assert block.encrypted is None or isinstance(block.encrypted, str)


def _without_signature(doc: Any) -> Any:
    reply = json.loads(json.dumps(doc))
    del reply["content"][0]["signature"]
    return reply


UNSIGNED = [
    pytest.param(False, _without_signature(THINKING_MESSAGE), "content[0].signature", id="plain"),
    pytest.param(
        False,
        _set(THINKING_MESSAGE, ("content", 0, "signature"), ""),
        "content[0].signature",
        id="plain-empty",
    ),
    pytest.param(
        True,
        [e for i, e in enumerate(THINKING_EVENTS) if i != 4],
        "event 16: content block 0: signature",
        id="streamed",
    ),
    pytest.param(
        True,
        [
            *THINKING_EVENTS[:-3],
            {
                "type": "content_block_delta",
                "index": 3,
                "delta": {"type": "thinking_delta", "thinking": "x"},
            },
            *THINKING_EVENTS[-3:],
        ],
        "event 18: content block 3: signature",
        id="thinking-into-a-tool-block",
    ),
]


@pytest.mark.parametrize(("streamed", "reply", "path"), UNSIGNED)
async def test_an_unsigned_thinking_block_is_refused_naming_its_place(
    streamed: bool, reply: Any, path: str
) -> None:
    """Anthropic signs every thinking block and refuses one sent back unsigned, so a
    reply holding an unsigned one (a provider's bug, or a hostile one) is refused
    with the block's place, instead of recorded to break every later request."""
    with pytest.raises(MalformedResponse) as caught:
        await _read(streamed, reply)
    assert caught.value.path == path
    assert "signature" in str(caught.value)


async def test_thinking_and_tool_pieces_interleaved_are_each_kept_whole() -> None:
    """Blocks are kept by their index, so a stream that interleaves a thinking block's
    pieces with a tool call's argument pieces reads both whole and apart."""
    e = THINKING_EVENTS
    tool_first = [e[0], e[1], e[11], e[2], e[12], e[3], e[4], *e[5:11], *e[13:]]
    items, response = await _streamed(tool_first)
    pieces = [item.text for item in items if isinstance(item, ReasoningDelta)]
    assert pieces == ["Weather in Oslo: ", "call the tool."]
    thinking, redacted = response.reasoning
    assert (thinking.reasoning, thinking.signature) == (
        "Weather in Oslo: call the tool.",
        "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
    )
    assert redacted.encrypted == "EmwKAhgBEgy3va3pzix"
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.arguments_error) == (
        "get_weather",
        {"city": "Oslo"},
        None,
    )
    assert response.text == "Let me check."
