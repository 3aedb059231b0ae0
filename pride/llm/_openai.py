"""The OpenAI chat-completions endpoint (OpenAI and every compatible server).

Wire format: ``POST {base_url}/chat/completions``. Tools go out as
``{"type": "function", "function": {...}}`` and come back as ``tool_calls``
with JSON-string arguments (streamed as indexed deltas). Structured output uses
``response_format: {"type": "json_schema", ...}`` where the provider supports
it, else an instruction appended to the system message. Streaming asks for
``stream_options.include_usage`` so the last chunk carries usage.
"""

from __future__ import annotations

from typing import Any

from pride.messages import ReasoningDelta, Usage
from pride.messages.reasoning import OPENAI_CHAT, REASONING_ITEMS

from ._endpoint import Delta, ReplyParts, json_instruction
from ._errors import not_sent
from ._http import HttpEndpoint
from ._reasoning import check_reasoning_options
from ._shape import (
    WrongShape,
    as_object,
    cost_field,
    count_field,
    list_field,
    object_field,
    str_field,
    where,
)
from ._types import ModelRequest

__all__ = ["REASONING_FIELDS", "OpenAIEndpoint"]

_CHOICES = ("auto", "none", "required")


def _wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if "function" in tool:  # already in OpenAI form
        return tool
    function = {"name": tool["name"], "parameters": tool.get("parameters") or {"type": "object"}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _with_system_text(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``text`` appended to (or as) the system message."""
    if messages and messages[0].get("role") in ("system", "developer"):
        first = messages[0]
        content = first.get("content")
        if isinstance(content, str):
            return [{**first, "content": f"{content}\n\n{text}"}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _without_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without the Responses API's reasoning items, which chat completions
    cannot read (the list itself when it holds none, as it nearly always does)."""
    if not any(REASONING_ITEMS in message for message in messages):
        return messages
    kept = []
    for message in messages:
        if REASONING_ITEMS not in message:
            kept.append(message)
            continue
        rest = {k: v for k, v in message.items() if k != REASONING_ITEMS}
        if rest.get("content") or rest.get("tool_calls"):  # else it held reasoning alone
            kept.append(rest)
    return kept


#: Where OpenAI-compatible servers put a reasoning model's thinking, in a message
#: or a delta: DeepSeek and vLLM ``reasoning_content``, OpenRouter and Ollama
#: ``reasoning`` (the first one present is read, as some servers send both).
REASONING_FIELDS = ("reasoning_content", "reasoning")


def _read_reasoning(message: dict[str, Any], reply: ReplyParts) -> str:
    """The thinking in ``message`` (a message or a delta), kept as the reply's one
    reasoning block; ``""`` when there is none. Read leniently (a value that is no
    string is no reasoning): chat completions define no such field, so what a
    server sends there was never an error before it was read."""
    for name in REASONING_FIELDS:
        piece = message.get(name)
        if isinstance(piece, str):
            if piece:
                reply.reasoning(0).pieces.append(piece)
            return piece
    return ""


def _read_content(message: dict[str, Any], path: str, reply: ReplyParts) -> None:
    """``message.content``: a string, null, or (some compatible servers) a list of parts."""
    content = message.get("content")
    if content is None:
        return
    if isinstance(content, str):
        if content:
            reply.text.append(content)
        return
    path = where(path, "content")
    if not isinstance(content, list):
        raise WrongShape(path, "a string or an array of parts", content)
    for index, part in enumerate(content):
        text = str_field(as_object(part, where(path, index)), "text", where(path, index))
        if text:
            reply.text.append(text)


def _read_usage(data: dict[str, Any], path: str, reply: ReplyParts) -> None:
    """A ``usage`` object's figures, checked, into ``reply.usage``."""
    usage = object_field(data, "usage", path)
    if usage is None:
        return
    path = where(path, "usage")
    details = object_field(usage, "prompt_tokens_details", path) or {}
    output_details = object_field(usage, "completion_tokens_details", path) or {}
    reply.usage = {
        "prompt_tokens": count_field(usage, "prompt_tokens", path),
        "completion_tokens": count_field(usage, "completion_tokens", path),
        "cached_tokens": count_field(
            details, "cached_tokens", where(path, "prompt_tokens_details")
        ),
        "reasoning_tokens": count_field(
            output_details, "reasoning_tokens", where(path, "completion_tokens_details")
        ),
        "cost": cost_field(usage, "cost", path),
    }


def _read_model(data: dict[str, Any], reply: ReplyParts) -> None:
    model = str_field(data, "model", "")
    if model:
        reply.model = model


class OpenAIEndpoint(HttpEndpoint):
    """Chat completions over HTTP, plain and streaming.

    Args:
        provider: the provider name (``"openai"``, ``"groq"``, ...).
        model: the model name sent in the request.
        base_url: the API root (``.../v1``).
        access: the model's HTTP client, key and timeout.
        limits: the bounds on what is read of a reply.
    """

    route = "/chat/completions"
    end_markers = frozenset({"[DONE]"})
    stream_end = "[DONE] or a finish reason"

    structured_output = True
    reasoning_format = OPENAI_CHAT

    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging).

        Raises:
            BadRequest: a bad reasoning option of the call's own (a summary, which
                chat completions lack): nothing is sent.
        """
        try:
            check_reasoning_options(options, responses=False)
        except ValueError as exc:
            raise not_sent(self.provider, self.public_url, str(exc)) from None
        messages = _without_reasoning(request.messages)
        body: dict[str, Any] = {"model": self.model, **options}
        if request.tools:
            body["tools"] = [_wire_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            choice = request.tool_choice
            body["tool_choice"] = (
                choice if choice in _CHOICES else {"type": "function", "function": {"name": choice}}
            )
        if request.response_format is not None:
            if self.structured_output:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.response_format.get("name", "response"),
                        "schema": request.response_format.get("schema", {}),
                        "strict": False,
                    },
                }
            else:
                messages = _with_system_text(messages, json_instruction(request.response_format))
        if self.provider == "openrouter":
            body.setdefault("usage", {"include": True})
        body["messages"] = messages
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream", None)
        return body

    def usage(self, figures: dict[str, Any]) -> Usage:
        """OpenAI usage figures as `Usage` (``prompt_tokens`` counts cached ones)."""
        if not figures:
            return Usage()
        return Usage(
            input_tokens=figures["prompt_tokens"],
            output_tokens=figures["completion_tokens"],
            cached_tokens=figures["cached_tokens"],
            cost_usd=figures["cost"],
            reasoning_tokens=figures["reasoning_tokens"],
        )

    def read_reply(self, data: dict[str, Any], reply: ReplyParts) -> None:
        choices = list_field(data, "choices", "")
        if not choices:
            raise WrongShape("choices[0]", "an object (the reply's first choice)", None)
        choice = as_object(choices[0], "choices[0]")
        message = object_field(choice, "message", "choices[0]")
        if message is None:
            raise WrongShape("choices[0].message", "an object", None)
        path = "choices[0].message"
        _read_reasoning(message, reply)
        _read_content(message, path, reply)
        calls_path = where(path, "tool_calls")
        for index, raw in enumerate(list_field(message, "tool_calls", path) or ()):
            call_path = where(calls_path, index)
            call = as_object(raw, call_path)
            function = object_field(call, "function", call_path) or {}
            function_path = where(call_path, "function")
            parts = reply.tool()
            parts.call_id = str_field(call, "id", call_path)
            parts.name.append(str_field(function, "name", function_path) or "")
            parts.arguments = function.get("arguments")  # model output: decoded, not checked
        _read_model(data, reply)
        reply.finish_reason = str_field(choice, "finish_reason", "choices[0]")
        _read_usage(data, "", reply)

    def read_event(self, event: dict[str, Any], reply: ReplyParts) -> Delta:
        if event.get("error"):
            raise self.payload_error(event["error"])
        _read_model(event, reply)
        _read_usage(event, "", reply)
        choices = list_field(event, "choices", "")
        if not choices:
            return ""
        choice = as_object(choices[0], "choices[0]")
        finish = str_field(choice, "finish_reason", "choices[0]")
        if finish:
            reply.finish_reason = finish
        delta = object_field(choice, "delta", "choices[0]")
        if delta is None:
            return ""
        path = "choices[0].delta"
        calls_path = where(path, "tool_calls")
        for position, raw in enumerate(list_field(delta, "tool_calls", path) or ()):
            call_path = where(calls_path, position)
            call = as_object(raw, call_path)
            index = None if call.get("index") is None else count_field(call, "index", call_path)
            parts = reply.tool(index)
            call_id = str_field(call, "id", call_path)
            if call_id:
                parts.call_id = call_id
            function = object_field(call, "function", call_path) or {}
            function_path = where(call_path, "function")
            name = str_field(function, "name", function_path)
            if name:
                parts.name.append(name)
            arguments = str_field(function, "arguments", function_path)
            if arguments:
                reply.add_arguments(parts, arguments)
        thought = _read_reasoning(delta, reply)
        text = str_field(delta, "content", path)
        if text:
            # A delta holding both (no server is known to send one) streams its
            # text; its reasoning is still the reply's, recorded whole with it.
            reply.text.append(text)
            return text
        if thought:
            return ReasoningDelta(thought, provider=OPENAI_CHAT)
        return ""

    def complete(self, reply: ReplyParts) -> bool:
        return reply.done or reply.finish_reason is not None
