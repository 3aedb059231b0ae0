"""Reply bodies in the OpenAI and Anthropic wire formats, plain and as SSE events.

These are what the real APIs send (checked in pride's tests by the official
``openai`` and ``anthropic`` SDKs parsing the loopback server's output).
Usage not given by the script is estimated at four characters per token.

A reply's ``thinking`` and ``redacted`` go out over Anthropic Messages as a
``thinking`` block signed by the server's `ThinkingSigner` (streamed as
``thinking_delta`` pieces and a ``signature_delta``) and a
``redacted_thinking`` block, before the text; chat completions have no place
for them.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from pride.llm import ScriptedReply, ToolCall, Usage, echo_text

from ._thinking import ThinkingSigner

__all__ = [
    "anthropic_error",
    "anthropic_events",
    "anthropic_message",
    "as_reply",
    "echo",
    "estimated_usage",
    "model_name",
    "openai_completion",
    "openai_error",
    "openai_events",
    "pieces",
]

_CHARS_PER_TOKEN = 4


def as_reply(item: object) -> ScriptedReply:
    """Normalise a script item: str, ToolCall, list of ToolCall or ScriptedReply.

    The same items a [`ScriptedModel`][pride.ScriptedModel] takes (one definition
    for both: [`ScriptedReply.from_item`][pride.llm.ScriptedReply.from_item]).

    Raises:
        TypeError: the item is none of those.
    """
    try:
        return ScriptedReply.from_item(item)
    except TypeError:
        raise TypeError(
            "a loopback script item must be a str, a ToolCall, a list of ToolCall, a "
            f"ScriptedReply, a Fault or a callable, not {type(item).__name__}"
        ) from None


def _conversation(body: Any) -> list[Any]:
    """A request's conversation: chat or Messages ``messages``, or Responses ``input``."""
    if not isinstance(body, dict):
        return []
    entries = body.get("messages", body.get("input"))
    if isinstance(entries, str):  # the Responses API takes a bare string as the user's input
        return [{"role": "user", "content": entries}]
    return entries if isinstance(entries, list) else []


def _as_chat(entry: dict[str, Any]) -> dict[str, Any]:
    content = entry.get("content")
    if not isinstance(content, list):
        return entry
    parts = [
        {**p, "type": "text"} if isinstance(p, dict) and p.get("type") == "input_text" else p
        for p in content
    ]
    return {**entry, "content": parts}


def echo(body: Any) -> str:
    """``"echo: <last user text>"`` for an OpenAI, Anthropic or Responses request body."""
    return echo_text([_as_chat(m) for m in _conversation(body) if isinstance(m, dict)])


def estimated_usage(reply: ScriptedReply, body: Any) -> Usage:
    """The reply's own usage, else one estimated from the request and reply text."""
    if reply.usage is not None:
        return reply.usage
    prompt = json.dumps(_conversation(body))
    calls = "".join(c.name + json.dumps(c.arguments) for c in reply.tool_calls)
    output = reply.thinking + reply.redacted + reply.text + calls
    return Usage(
        input_tokens=-(-len(prompt) // _CHARS_PER_TOKEN),
        output_tokens=-(-len(output) // _CHARS_PER_TOKEN),
    )


def model_name(body: Any) -> str:
    """The model a request names (``"loopback"`` when it names none)."""
    return str(body.get("model") or "loopback") if isinstance(body, dict) else "loopback"


def pieces(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters, as streamed."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


# -- OpenAI chat completions ----------------------------------------------------------


def _openai_usage(usage: Usage) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }
    if usage.cost_usd is not None:  # as OpenRouter reports it
        wire["cost"] = usage.cost_usd
    return wire


def _openai_tool_call(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
    }


def openai_completion(reply: ScriptedReply, body: Any) -> dict[str, Any]:
    """A ``chat.completion`` object for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [_openai_tool_call(c) for c in reply.tool_calls]
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_name(body),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": _openai_usage(estimated_usage(reply, body)),
    }


def openai_events(reply: ScriptedReply, body: Any, chunk_size: int) -> list[bytes]:
    """The SSE events of a streamed ``chat.completion.chunk`` reply, ``[DONE]`` last."""
    base = {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model_name(body),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**base, "choices": [choice]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces(reply.text, chunk_size)]
    for index, call in enumerate(reply.tool_calls):
        head = {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        chunks.append(chunk({"tool_calls": [head]}))
        for part in _halves(json.dumps(call.arguments)):
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            )
    chunks.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    options = body.get("stream_options") if isinstance(body, dict) else None
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**base, "choices": [], "usage": _openai_usage(estimated_usage(reply, body))})
    events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]
    events.append(b"data: [DONE]\n\n")
    return events


def openai_error(status: int, message: str) -> dict[str, Any]:
    """An OpenAI error document."""
    kind = {
        401: "invalid_request_error",
        403: "invalid_request_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


# -- Anthropic Messages ---------------------------------------------------------------


def _anthropic_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens),
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cached_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
    }


def _stop_reason(reply: ScriptedReply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _thinking_blocks(reply: ScriptedReply, signer: ThinkingSigner) -> list[dict[str, Any]]:
    blocks = []
    if reply.thinking:
        signature = signer.signature(reply.thinking)
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": signature})
    if reply.redacted:
        blocks.append({"type": "redacted_thinking", "data": signer.redacted_data(reply.redacted)})
    return blocks


def anthropic_message(reply: ScriptedReply, body: Any, signer: ThinkingSigner) -> dict[str, Any]:
    """A Messages ``message`` object for ``reply`` (its thinking signed by ``signer``)."""
    content: list[dict[str, Any]] = _thinking_blocks(reply, signer)
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return {
        "id": f"msg_{secrets.token_hex(8)}",
        "type": "message",
        "role": "assistant",
        "model": model_name(body),
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _anthropic_usage(estimated_usage(reply, body)),
    }


def _thinking_events(blocks: list[dict[str, Any]], chunk_size: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        if block["type"] == "redacted_thinking":  # arrives whole, as the API sends it
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        else:
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            events.append({"type": "content_block_start", "index": index, "content_block": empty})
            events += [
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece},
                }
                for piece in pieces(block["thinking"], chunk_size)
            ]
            signature = {"type": "signature_delta", "signature": block["signature"]}
            events.append({"type": "content_block_delta", "index": index, "delta": signature})
        events.append({"type": "content_block_stop", "index": index})
    return events


def anthropic_events(
    reply: ScriptedReply, body: Any, chunk_size: int, signer: ThinkingSigner
) -> list[bytes]:
    """The SSE events of a streamed Messages reply, ``message_stop`` last."""
    usage = _anthropic_usage(estimated_usage(reply, body))
    start = anthropic_message(ScriptedReply(), body, signer)
    start.update(content=[], stop_reason=None, usage={**usage, "output_tokens": 1})
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    thinking = _thinking_blocks(reply, signer)
    events += _thinking_events(thinking, chunk_size)
    index = len(thinking)
    if reply.text:
        events.append(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
        events.append({"type": "ping"})
        events += [
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": t},
            }
            for t in pieces(reply.text, chunk_size)
        ]
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for offset, call in enumerate(reply.tool_calls, start=index):
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        events.append({"type": "content_block_start", "index": offset, "content_block": block})
        for part in _halves(json.dumps(call.arguments)):
            delta = {"type": "input_json_delta", "partial_json": part}
            events.append({"type": "content_block_delta", "index": offset, "delta": delta})
        events.append({"type": "content_block_stop", "index": offset})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An Anthropic error document."""
    kind = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}
