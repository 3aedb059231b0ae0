"""Message content as span attributes, in the GenAI conventions' shape.

Recorded only when content capture is on (see `PrideTracer`); every value is
JSON text, clipped to `CONTENT_LIMIT` characters.
"""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Any

from ..messages.codec import dump_json

if TYPE_CHECKING:
    from ..llm import ModelRequest, ModelResponse

__all__ = [
    "CONTENT_LIMIT",
    "ERROR_LIMIT",
    "VALUE_LIMIT",
    "as_json",
    "clip",
    "clip_error",
    "clip_stack",
    "input_messages",
    "output_messages",
]

CONTENT_LIMIT = 16_384
"""Characters of one recorded content attribute (and of an exception's stack trace)."""

VALUE_LIMIT = 256
"""Characters of a name or an id a provider sent (a tool call's id, the model it
says answered, a finish reason) as it is put on a span: its bytes are hostile, and
every span goes to a collector, with content capture on or off."""

ERROR_LIMIT = 1_024
"""Characters of an error's text on a span (its status, its exception event's
message): errors quote what they were given, a tool's arguments a model wrote."""


def as_json(value: Any) -> str:
    """Strict JSON text of ``value``: what JSON has no form for is replaced
    (`pride.messages.codec.dump_json`), so a tool's NaN is null on the span too."""
    return dump_json(value, replace=True)


def clip(text: str, limit: int = CONTENT_LIMIT) -> str:
    """``text`` cut at ``limit`` characters, saying how many it left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def clip_error(error: BaseException) -> str:
    """An error's text for a span's status or exception event (its class name if it
    has none), cut at `ERROR_LIMIT`."""
    try:
        text = str(error)
    except Exception:  # a hostile __str__ does not take the span down
        text = ""
    return clip(text or type(error).__name__, ERROR_LIMIT)


def clip_stack(error: BaseException) -> str:
    """The error's stack trace as the SDK records it, its head and tail kept within
    `CONTENT_LIMIT` (the tail holds the innermost frames and the message)."""
    text = "".join(traceback.format_exception(error))
    if len(text) <= CONTENT_LIMIT:
        return text
    half = CONTENT_LIMIT // 2
    return f"{text[:half]}\n... ({len(text) - 2 * half} characters left out) ...\n{text[-half:]}"


def input_messages(request: ModelRequest) -> str:
    """The request's messages in the GenAI conventions' shape (role and parts)."""
    out = []
    for message in request.messages:
        role = message.get("role", "user")
        parts: list[dict[str, Any]] = []
        content = message.get("content")
        if isinstance(content, str):
            parts.append({"type": "text", "content": content})
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict):
                    parts.append(_part(block))
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
        if role == "tool":
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": content,
                }
            ]
        out.append({"role": role, "parts": parts})
    return as_json(out)


def _part(block: dict[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "tool_use":
        return {
            "type": "tool_call",
            "id": block.get("id"),
            "name": block.get("name"),
            "arguments": block.get("input"),
        }
    if kind == "tool_result":
        return {
            "type": "tool_call_response",
            "id": block.get("tool_use_id"),
            "response": block.get("content"),
        }
    return {"type": str(kind)}  # an image or another block: its kind, not its bytes


def output_messages(response: ModelResponse) -> str:
    parts: list[dict[str, Any]] = []
    if response.text:
        parts.append({"type": "text", "content": response.text})
    for call in response.tool_calls:
        parts.append(
            {"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments}
        )
    message = {"role": "assistant", "parts": parts, "finish_reason": response.finish_reason}
    return as_json([message])
