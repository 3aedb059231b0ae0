"""Reply bodies in the OpenAI Responses format, plain and as its typed SSE events.

What ``POST /v1/responses`` answers: a ``response`` object whose ``output``
holds the reasoning item (when the request asked for reasoning), the message
and the function calls; streamed, the typed events the real API sends
(``response.created`` ... ``response.output_text.delta`` ...
``response.completed``), each with its ``sequence_number``. pride's tests
check both with the official ``openai`` SDK's own types.

A request asks for reasoning when it has a ``reasoning`` object or includes
``reasoning.encrypted_content``; its reasoning item carries an opaque
``encrypted_content`` issued by the server, and the script's ``thinking`` as
its summary when the request asks for one (``reasoning.summary``;
streamed as ``response.reasoning_summary_text.delta`` events) (see
[`LoopbackServer`][pride.testing.LoopbackServer], which refuses, as the real
API does, reasoning sent back that it never issued).
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from pride.llm import ScriptedReply, Usage

from ._wire import estimated_usage, model_name, pieces

__all__ = [
    "ENCRYPTED_REASONING",
    "asks_for_reasoning",
    "reasoning_item",
    "responses_events",
    "responses_object",
    "sent_reasoning",
]

#: The ``include`` entry asking for reasoning a stateless call can send back.
ENCRYPTED_REASONING = "reasoning.encrypted_content"


def asks_for_reasoning(body: Any) -> bool:
    """Whether a Responses request asks for the model's reasoning."""
    if not isinstance(body, dict):
        return False
    include = body.get("include")
    return isinstance(body.get("reasoning"), dict) or (
        isinstance(include, list) and ENCRYPTED_REASONING in include
    )


def sent_reasoning(body: Any) -> list[dict[str, Any]]:
    """The reasoning items in a Responses request's ``input``."""
    items = body.get("input") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and i.get("type") == "reasoning"]


def reasoning_item(summary: str | None, encrypted: str | None) -> dict[str, Any]:
    """A finished ``reasoning`` output item."""
    parts = [{"type": "summary_text", "text": summary}] if summary else []
    return {
        "type": "reasoning",
        "id": f"rs_{secrets.token_hex(8)}",
        "summary": parts,
        "encrypted_content": encrypted,
    }


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


def _output(reply: ScriptedReply, reasoning: dict[str, Any] | None) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = [reasoning] if reasoning is not None else []
    if reply.text:
        text = {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
        output.append(
            {
                "type": "message",
                "id": f"msg_{secrets.token_hex(8)}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    for call in reply.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{secrets.token_hex(8)}",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
        )
    return output


def _response(body: Any, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
    request = body if isinstance(body, dict) else {}
    tools = request.get("tools")
    choice = request.get("tool_choice")
    return {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions")
        if isinstance(request.get("instructions"), str)
        else None,
        "model": model_name(body),
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": choice if choice is not None else "auto",
        "tools": tools if isinstance(tools, list) else [],
        "store": request.get("store") is not False,
        "usage": None,
    }


def responses_object(
    reply: ScriptedReply, body: Any, reasoning: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A completed ``response`` object for ``reply`` (after ``reasoning``, if any)."""
    response = _response(body, _output(reply, reasoning), "completed")
    response["usage"] = _usage(estimated_usage(reply, body))
    return response


def responses_events(
    reply: ScriptedReply, body: Any, chunk_size: int, reasoning: dict[str, Any] | None = None
) -> list[bytes]:
    """The typed SSE events of a streamed reply, ``response.completed`` last."""
    final = responses_object(reply, body, reasoning)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(final["output"]):
        events += _item_events(item, index, chunk_size)
    events.append({"type": "response.completed", "response": final})
    numbered = ({**event, "sequence_number": n} for n, event in enumerate(events))
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in numbered]


def _item_events(item: dict[str, Any], index: int, chunk_size: int) -> list[dict[str, Any]]:
    """The events that build one output item, from ``output_item.added`` to ``.done``."""
    at = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        added = {**item, "summary": [], "encrypted_content": None}
    elif kind == "message":
        added = {**item, "status": "in_progress", "content": []}
    else:
        added = {**item, "status": "in_progress", "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": added}
    ]
    if kind == "reasoning":
        for number, part in enumerate(item["summary"]):
            where = {**at, "summary_index": number}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **where,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            events += [
                {"type": "response.reasoning_summary_text.delta", **where, "delta": piece}
                for piece in pieces(part["text"], chunk_size)
            ]
            events.append(
                {"type": "response.reasoning_summary_text.done", **where, "text": part["text"]}
            )
            events.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
    elif kind == "message":
        [part] = item["content"]
        where = {**at, "content_index": 0}
        events.append(
            {
                "type": "response.content_part.added",
                **where,
                "part": {**part, "text": ""},
            }
        )
        events += [
            {"type": "response.output_text.delta", **where, "delta": piece, "logprobs": []}
            for piece in pieces(part["text"], chunk_size)
        ]
        events.append(
            {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": []}
        )
        events.append({"type": "response.content_part.done", **where, "part": part})
    else:
        arguments = item["arguments"]
        middle = len(arguments) // 2
        events += [
            {"type": "response.function_call_arguments.delta", **at, "delta": piece}
            for piece in (arguments[:middle], arguments[middle:])
            if piece
        ]
        events.append(
            {"type": "response.function_call_arguments.done", **at, "arguments": arguments}
        )
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


class IssuedReasoning:
    """The encrypted reasoning a server has issued, to check what comes back.

    The real API can read back only reasoning it encrypted itself, so it
    refuses anything else; so does the loopback server, which makes a test
    fail if pride ever sends reasoning back changed.

    Attributes:
        tokens: every ``encrypted_content`` issued, in no order.
    """

    def __init__(self) -> None:
        self.tokens: set[str] = set()

    def item_for(self, body: Any, thinking: str = "") -> dict[str, Any] | None:
        """A new reasoning item for a reply to ``body``, if it asks for reasoning.

        ``thinking`` (the script's) is its summary when the request asks for
        one (``reasoning.summary``), as the API reports a summary only then.
        """
        if not asks_for_reasoning(body):
            return None
        encrypted = secrets.token_urlsafe(24)
        self.tokens.add(encrypted)
        reasoning = body.get("reasoning")
        wants_summary = isinstance(reasoning, dict) and reasoning.get("summary") is not None
        return reasoning_item(thinking if wants_summary else None, encrypted)

    def refusal(self, body: Any) -> str | None:
        """Why the reasoning items sent in ``body`` cannot be read, or ``None``."""
        for item in sent_reasoning(body):
            encrypted = item.get("encrypted_content")
            if encrypted is not None and encrypted not in self.tokens:
                return f"The encrypted content for item {item.get('id')} could not be verified."
        return None
