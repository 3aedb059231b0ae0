"""Provider replies of the wrong shape are a MalformedResponse naming the path, in every format.

Issue 14, point 5: valid JSON of the wrong shape (a string where ``message``
should be an object, an int for ``tool_calls``, ``usage`` with non-numeric
fields, the same in SSE deltas) surfaced as a raw AttributeError, TypeError
or ValueError. Every reply here goes over a real loopback HTTP connection
(``Fault.raw``), plain and streamed, OpenAI chat completions, OpenAI's
Responses API (its typed events, issue 33) and Anthropic Messages; the
property tests mutate real replies of each format at random.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pride.errors import MalformedResponse, ProviderError
from pride.llm import ModelRequest, ModelResponse, RetryPolicy, iModel
from pride.testing import Fault, openai_server

KEY = "sk-test-shapes-0123456789abcdef"
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], system="s")

# -- real replies, as the APIs document and send them ------------------------------------

OPENAI_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Let me check.",
                "refusal": None,
                "annotations": [],
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            "logprobs": None,
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {
        "prompt_tokens": 19,
        "completion_tokens": 10,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    },
    "service_tier": "default",
    "system_fingerprint": "fp_6b68a8204b",
}

_CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}
OPENAI_CHUNKS: list[dict[str, Any]] = [
    {**_CHUNK, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {**_CHUNK, "choices": [{"index": 0, "delta": {"content": "Let me"}, "finish_reason": None}]},
    {**_CHUNK, "choices": [{"index": 0, "delta": {"content": " check."}}]},
    {
        **_CHUNK,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_abc",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                },
            }
        ],
    },
    {
        **_CHUNK,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [{"index": 0, "function": {"arguments": '{"city":"Oslo"}'}}]
                },
            }
        ],
    },
    {**_CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    {
        **_CHUNK,
        "choices": [],
        "usage": {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    },
]

ANTHROPIC_MESSAGE: dict[str, Any] = {
    "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-20250514",
    "content": [
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
        "service_tier": "standard",
    },
}

ANTHROPIC_EVENTS: list[dict[str, Any]] = [
    {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 25, "output_tokens": 1},
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Let me"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " check."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": "Os'},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": 'lo"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
        "usage": {"output_tokens": 15},
    },
    {"type": "message_stop"},
]


RESPONSES_OBJECT: dict[str, Any] = {
    "id": "resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b",
    "object": "response",
    "created_at": 1741476542,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "model": "o4-mini-2025-04-16",
    "output": [
        {
            "type": "reasoning",
            "id": "rs_67ccd2bf17f0819081ff3bb2cf6508e6",
            "summary": [{"type": "summary_text", "text": "The user wants the weather."}],
            "encrypted_content": "gAAAAABoISQ24OyVRYbkYfukO5E2...",
        },
        {
            "type": "message",
            "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e60bb6a6b452d3795b",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "id": "fc_12345xyz",
            "call_id": "call_abc123",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "store": False,
    "tool_choice": "auto",
    "tools": [],
    "usage": {
        "input_tokens": 36,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 87,
        "output_tokens_details": {"reasoning_tokens": 64},
        "total_tokens": 123,
    },
}

_STARTED = {**RESPONSES_OBJECT, "status": "in_progress", "output": [], "usage": None}
_REASONING, _MESSAGE, _CALL = RESPONSES_OBJECT["output"]
RESPONSES_EVENTS: list[dict[str, Any]] = [
    {"type": "response.created", "sequence_number": 0, "response": _STARTED},
    {"type": "response.in_progress", "sequence_number": 1, "response": _STARTED},
    {
        "type": "response.output_item.added",
        "sequence_number": 2,
        "output_index": 0,
        "item": {**_REASONING, "summary": [], "encrypted_content": None},
    },
    {
        "type": "response.reasoning_summary_text.delta",
        "sequence_number": 3,
        "item_id": _REASONING["id"],
        "output_index": 0,
        "summary_index": 0,
        "delta": "The user wants the weather.",
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 4,
        "output_index": 0,
        "item": _REASONING,
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 5,
        "output_index": 1,
        "item": {**_MESSAGE, "status": "in_progress", "content": []},
    },
    {
        "type": "response.output_text.delta",
        "sequence_number": 6,
        "item_id": _MESSAGE["id"],
        "output_index": 1,
        "content_index": 0,
        "delta": "Let me",
    },
    {
        "type": "response.output_text.delta",
        "sequence_number": 7,
        "item_id": _MESSAGE["id"],
        "output_index": 1,
        "content_index": 0,
        "delta": " check.",
    },
    {
        "type": "response.output_item.done",
        "sequence_number": 8,
        "output_index": 1,
        "item": _MESSAGE,
    },
    {
        "type": "response.output_item.added",
        "sequence_number": 9,
        "output_index": 2,
        "item": {**_CALL, "arguments": "", "status": "in_progress"},
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 10,
        "item_id": _CALL["id"],
        "output_index": 2,
        "delta": '{"city": "Os',
    },
    {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 11,
        "item_id": _CALL["id"],
        "output_index": 2,
        "delta": 'lo"}',
    },
    {"type": "response.output_item.done", "sequence_number": 12, "output_index": 2, "item": _CALL},
    {"type": "response.completed", "sequence_number": 13, "response": RESPONSES_OBJECT},
]

#: The provider each reply format belongs to ("responses" is OpenAI's other API).
PROVIDER = {"openai": "openai", "responses": "openai", "anthropic": "anthropic"}


def _sse(provider: str, events: list[Any]) -> str:
    if provider == "openai":
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        return body + "data: [DONE]\n\n"
    return "".join(
        f"event: {e.get('type', 'x') if isinstance(e, dict) else 'x'}\ndata: {json.dumps(e)}\n\n"
        for e in events
    )


def _model(server: Any, provider: str) -> iModel:
    name = {
        "openai": "openai/gpt-4.1-mini",
        "responses": "openai/o4-mini",
        "anthropic": "anthropic/claude-sonnet-4",
    }[provider]
    return iModel(name, base_url=server.base_url, api_key=KEY, retry=RetryPolicy.never())


async def _call(provider: str, reply: Any, *, streamed: bool) -> ModelResponse:
    """Serve ``reply`` (a JSON document, or a list of events when streamed) once; ask for it."""
    if streamed:
        fault = Fault.raw(_sse(provider, reply), content_type="text/event-stream")
    else:
        fault = Fault.raw(json.dumps(reply).encode())
    async with openai_server([fault]) as server, _model(server, provider) as model:
        if not streamed:
            return await model.invoke(REQUEST)
        async with model.stream(REQUEST) as stream:
            async for _ in stream:
                pass
        return stream.response


# -- the real replies read as they should --------------------------------------------------

REAL = {
    ("openai", False): OPENAI_COMPLETION,
    ("openai", True): OPENAI_CHUNKS,
    ("anthropic", False): ANTHROPIC_MESSAGE,
    ("anthropic", True): ANTHROPIC_EVENTS,
    ("responses", False): RESPONSES_OBJECT,
    ("responses", True): RESPONSES_EVENTS,
}
FORMATS = pytest.mark.parametrize(("provider", "streamed"), list(REAL))


@FORMATS
async def test_the_real_replies_are_read_whole(provider, streamed):
    """The unmutated replies give their text, tool call and usage."""
    response = await _call(provider, REAL[provider, streamed], streamed=streamed)
    assert response.text == "Let me check."
    [call] = response.tool_calls
    assert (call.name, call.arguments, call.arguments_error) == (
        "get_weather",
        {"city": "Oslo"},
        None,
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


# -- the shapes the issue names, each at its path ------------------------------------------


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


WRONG_SHAPES = [
    # (provider, streamed, where the wrong value goes, the value, the path reported)
    ("openai", False, ("choices", 0, "message"), "hello", "choices[0].message"),
    ("openai", False, ("choices", 0, "message", "tool_calls"), 3, "choices[0].message.tool_calls"),
    (
        "openai",
        False,
        ("choices", 0, "message", "tool_calls", 0),
        "x",
        "choices[0].message.tool_calls[0]",
    ),
    ("openai", False, ("choices", 0, "message", "content"), 7, "choices[0].message.content"),
    ("openai", False, ("usage", "prompt_tokens"), "19", "usage.prompt_tokens"),
    ("openai", False, ("usage", "completion_tokens"), -1, "usage.completion_tokens"),
    ("openai", False, ("usage", "prompt_tokens_details"), [], "usage.prompt_tokens_details"),
    ("openai", False, ("usage", "cost"), "cheap", "usage.cost"),
    ("openai", False, ("choices",), {"0": {}}, "choices"),
    ("openai", False, ("model",), 4, "model"),
    ("openai", True, (1, "choices", 0, "delta"), "Let me", "event 2: choices[0].delta"),
    (
        "openai",
        True,
        (3, "choices", 0, "delta", "tool_calls"),
        1,
        "event 4: choices[0].delta.tool_calls",
    ),
    (
        "openai",
        True,
        (3, "choices", 0, "delta", "tool_calls", 0, "index"),
        "0",
        "event 4: choices[0].delta.tool_calls[0].index",
    ),
    (
        "openai",
        True,
        (4, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"),
        {"city": 1},
        "event 5: choices[0].delta.tool_calls[0].function.arguments",
    ),
    ("openai", True, (6, "usage", "prompt_tokens"), "many", "event 7: usage.prompt_tokens"),
    ("openai", True, (6, "usage"), 29, "event 7: usage"),
    ("openai", True, (2, "choices"), "x", "event 3: choices"),
    ("openai", True, (2,), [1, 2], "event 3: the top level"),
    ("anthropic", False, ("content",), "Let me check.", "content"),
    ("anthropic", False, ("content", 0), 5, "content[0]"),
    ("anthropic", False, ("content", 0, "text"), ["x"], "content[0].text"),
    ("anthropic", False, ("content", 1, "name"), {}, "content[1].name"),
    ("anthropic", False, ("usage", "input_tokens"), "2095", "usage.input_tokens"),
    ("anthropic", False, ("usage", "output_tokens"), 1.5, "usage.output_tokens"),
    ("anthropic", False, ("stop_reason",), 1, "stop_reason"),
    ("anthropic", True, (3, "delta"), "Let me", "event 4: delta"),
    ("anthropic", True, (3, "delta", "text"), 12, "event 4: delta.text"),
    ("anthropic", True, (7, "index"), "1", "event 8: index"),
    ("anthropic", True, (7, "delta", "partial_json"), {}, "event 8: delta.partial_json"),
    (
        "anthropic",
        True,
        (0, "message", "usage", "input_tokens"),
        "x",
        "event 1: message.usage.input_tokens",
    ),
    ("anthropic", True, (10, "usage"), [15], "event 11: usage"),
    ("anthropic", True, (6, "content_block"), "tool_use", "event 7: content_block"),
    ("responses", False, ("output",), {"0": {}}, "output"),
    ("responses", False, ("output", 1), "Let me check.", "output[1]"),
    ("responses", False, ("output", 1, "content"), "x", "output[1].content"),
    ("responses", False, ("output", 1, "content", 0, "text"), 5, "output[1].content[0].text"),
    ("responses", False, ("output", 2, "arguments"), {"city": "Oslo"}, "output[2].arguments"),
    ("responses", False, ("output", 2, "call_id"), 7, "output[2].call_id"),
    ("responses", False, ("output", 0, "encrypted_content"), 1, "output[0].encrypted_content"),
    ("responses", False, ("output", 0, "summary"), "s", "output[0].summary"),
    ("responses", False, ("output", 0, "summary", 0, "text"), [], "output[0].summary[0].text"),
    ("responses", False, ("status",), 200, "status"),
    ("responses", False, ("usage", "input_tokens"), "36", "usage.input_tokens"),
    ("responses", False, ("usage", "output_tokens_details"), 64, "usage.output_tokens_details"),
    (
        "responses",
        False,
        ("usage", "input_tokens_details", "cached_tokens"),
        -1,
        "usage.input_tokens_details.cached_tokens",
    ),
    ("responses", True, (6, "delta"), ["Let me"], "event 7: delta"),
    ("responses", True, (6,), "text", "event 7: the top level"),
    ("responses", True, (9, "item"), "function_call", "event 10: item"),
    ("responses", True, (9, "output_index"), "2", "event 10: output_index"),
    ("responses", True, (10, "delta"), 3, "event 11: delta"),
    ("responses", True, (12, "item", "arguments"), {}, "event 13: item.arguments"),
    ("responses", True, (4, "item", "encrypted_content"), {}, "event 5: item.encrypted_content"),
    ("responses", True, (13, "response"), [], "event 14: response"),
    (
        "responses",
        True,
        (13, "response", "usage", "output_tokens"),
        "87",
        "event 14: response.usage.output_tokens",
    ),
    ("responses", True, (13, "type"), 1, "event 14: type"),
]


@pytest.mark.parametrize(("provider", "streamed", "where", "value", "path"), WRONG_SHAPES)
async def test_a_wrong_shape_is_a_malformed_response_naming_its_path(
    provider, streamed, where, value, path
):
    """Each wrong value is MalformedResponse with .path, the URL and the provider named."""
    reply = _set(REAL[provider, streamed], where, value)
    with pytest.raises(MalformedResponse) as caught:
        await _call(provider, reply, streamed=streamed)
    error = caught.value
    assert error.path == path
    assert path in str(error) and "wrong shape" in str(error)
    assert error.provider == PROVIDER[provider] and error.url and error.url in str(error)
    assert KEY not in str(error)


async def test_nan_and_infinity_are_not_json():
    """A reply using NaN (which Python's decoder accepts by default) is MalformedResponse."""
    body = json.dumps(OPENAI_COMPLETION).replace('"prompt_tokens": 19', '"prompt_tokens": NaN')
    with pytest.raises(MalformedResponse, match="not JSON"):
        await _call("openai", json.loads(body, parse_constant=float), streamed=False)
    events = _sse("openai", OPENAI_CHUNKS).replace(
        '"cached_tokens": 0', '"cached_tokens": Infinity'
    )
    fault = Fault.raw(events, content_type="text/event-stream")
    async with openai_server([fault]) as server, _model(server, "openai") as model:
        with pytest.raises(MalformedResponse, match="not JSON"):
            async with model.stream(REQUEST) as stream:
                async for _ in stream:
                    pass


async def test_absurd_nesting_and_huge_numbers_are_malformed_not_a_crash():
    """Deeply nested JSON (RecursionError) and over-long integers (ValueError) are typed."""
    for body in (b"[" * 200_000, b'{"choices": ' + b"9" * 5000 + b"}"):
        async with openai_server([Fault.raw(body)]) as server, _model(server, "openai") as model:
            with pytest.raises(MalformedResponse, match="not JSON"):
                await model.invoke(REQUEST)
    huge = _set(OPENAI_COMPLETION, ("usage", "prompt_tokens"), 10**30)
    with pytest.raises(MalformedResponse) as caught:
        await _call("openai", huge, streamed=False)
    assert caught.value.path == "usage.prompt_tokens"


# -- property: a mutated real reply is read, or refused with a ProviderError -------------

_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


#: Values of every JSON type, truthy and falsy, nested and not.
PALETTE: list[Any] = [None, True, False, 0, 7, -3, 2.5, "", "text", [], [1, "x"], {}, {"k": "v"}]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, reply: Any) -> Any:
    """``reply`` with one to three of its values replaced by any JSON value, or deleted."""
    reply = copy.deepcopy(reply)
    # Paths are picked by a seeded Random: hypothesis's own choices favour the first ones.
    pick = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(reply)
        if not paths:
            break
        path = pick.choice(paths)
        parent = reply
        for key in path[:-1]:
            parent = parent[key]
        action = pick.random()
        if action < 0.5:  # a value of some other JSON type, truthy or not
            parent[path[-1]] = pick.choice(PALETTE)
        elif action < 0.8:
            parent[path[-1]] = draw(JSON_VALUES)
        else:
            del parent[path[-1]]
    return reply


def _check(response_or_error: ModelResponse | BaseException) -> None:
    if isinstance(response_or_error, ModelResponse):
        assert isinstance(response_or_error.text, str)
        for call in response_or_error.tool_calls:
            assert isinstance(call.name, str) and isinstance(call.arguments, dict)
        for reasoning in response_or_error.reasoning:  # never part of the text
            assert isinstance(reasoning.text, str)
            assert reasoning.encrypted is None or isinstance(reasoning.encrypted, str)
        assert response_or_error.usage.input_tokens >= 0
        return
    # Anything but a ProviderError (AttributeError, TypeError, ValueError...) fails here.
    assert isinstance(response_or_error, ProviderError), repr(response_or_error)
    assert response_or_error.url is not None
    if isinstance(response_or_error, MalformedResponse) and "wrong shape" in str(response_or_error):
        assert response_or_error.path


async def _outcome(provider: str, reply: Any, streamed: bool) -> ModelResponse | BaseException:
    try:
        return await _call(provider, reply, streamed=streamed)
    except ProviderError as exc:
        return exc


PROPERTY = settings(max_examples=75, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(mutated(OPENAI_COMPLETION))
async def test_mutated_openai_completions_are_read_or_refused(reply):
    _check(await _outcome("openai", reply, False))


@PROPERTY
@given(mutated(OPENAI_CHUNKS))
async def test_mutated_openai_streams_are_read_or_refused(reply):
    _check(await _outcome("openai", reply, True))


@PROPERTY
@given(mutated(ANTHROPIC_MESSAGE))
async def test_mutated_anthropic_messages_are_read_or_refused(reply):
    _check(await _outcome("anthropic", reply, False))


@PROPERTY
@given(mutated(ANTHROPIC_EVENTS))
async def test_mutated_anthropic_streams_are_read_or_refused(reply):
    _check(await _outcome("anthropic", reply, True))


@PROPERTY
@given(mutated(RESPONSES_OBJECT))
async def test_mutated_responses_are_read_or_refused(reply):
    _check(await _outcome("responses", reply, False))


@PROPERTY
@given(mutated(RESPONSES_EVENTS))
async def test_mutated_responses_streams_are_read_or_refused(reply):
    _check(await _outcome("responses", reply, True))


# -- the event-stream format itself ------------------------------------------------------


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
async def test_event_streams_in_every_line_ending_with_comments_are_read(newline):
    """LF, CRLF and CR line endings, keep-alive comments, ids and multi-line data all parse."""
    chunks = [json.dumps(chunk) for chunk in OPENAI_CHUNKS]
    lines = [": keep-alive", "retry: 1000", ""]
    for number, chunk in enumerate(chunks):
        lines += [f"id: {number}", "event: chunk", f"data:{chunk}", ""]
        if number == 1:
            lines += [": ping", ""]
    # One event split over two data lines: they join with a newline, still one JSON document.
    lines += ['data: {"choices": [],', 'data: "object": "chat.completion.chunk"}', ""]
    lines += ["data: [DONE]", ""]
    # The stream ends right after [DONE]'s blank line (with CR, the final byte is a lone CR).
    body = newline.join(lines) + newline
    fault = Fault.raw(body, content_type="text/event-stream; charset=utf-8")
    async with openai_server([fault]) as server, _model(server, "openai") as model:
        async with model.stream(REQUEST) as stream:
            deltas = [delta async for delta in stream]
    assert "".join(deltas) == "Let me check."
    assert stream.response.tool_calls[0].arguments == {"city": "Oslo"}
    assert stream.response.usage.input_tokens == 19


async def test_an_anthropic_stream_ending_in_a_lone_cr_is_complete():
    """The last event's blank line is the body's final CR: message_stop still counts."""
    body = "\r".join(f"event: {e['type']}\rdata: {json.dumps(e)}\r" for e in ANTHROPIC_EVENTS)
    fault = Fault.raw(body + "\r", content_type="text/event-stream")
    async with openai_server([fault]) as server, _model(server, "anthropic") as model:
        async with model.stream(REQUEST) as stream:
            text = "".join([delta async for delta in stream])
    assert text == "Let me check." and stream.response.finish_reason == "tool_calls"
