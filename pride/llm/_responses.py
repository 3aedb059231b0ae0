"""The OpenAI Responses endpoint: ``POST {base_url}/responses``, plain and streamed.

A request is made from the same chat-shaped messages as chat completions (so
a conversation compiles once for both): leading system entries become
``instructions``, user and assistant entries input messages, assistant
``tool_calls`` ``function_call`` items and ``role="tool"`` entries
``function_call_output`` items. An entry that already is a Responses item
(it has a ``type`` and no ``role``: a reasoning item, a function call) goes
out unchanged, which is how a model's reasoning is sent back.

Stateless by default: OpenAI keeps nothing (``store: false``), so the
reasoning of a reasoning model comes back encrypted
(``include: ["reasoning.encrypted_content"]``) and is sent back with the next
call of a tool loop, where it lets the model go on from where it stopped
instead of reasoning again. Both are request options: ``store=True`` (with
``previous_response_id=``) hands the state to OpenAI instead.

Tools go out flat (``{"type": "function", "name", "parameters", "strict":
false}``; a tool already in another Responses form, such as ``{"type":
"web_search"}``, goes as given) and come back as ``function_call`` output
items (streamed: ``response.output_item.added``, then
``response.function_call_arguments.delta`` pieces). A reasoning summary's
pieces stream as [`ReasoningDelta`][pride.ReasoningDelta] items; the whole
reasoning item, kept to be sent back, is the one of
``response.output_item.done``. Structured output is ``text.format`` with a
JSON schema. The reasoning options ``reasoning_effort``
and ``reasoning_summary`` become the ``reasoning`` object; ``max_tokens`` is
``max_output_tokens``.

Usage: ``input_tokens`` counts cached ones (``input_tokens_details``), and
``output_tokens`` reasoning ones (``output_tokens_details``), as pride's
[`Usage`][pride.Usage] does.
"""

from __future__ import annotations

import logging
from typing import Any

from pride.messages import Usage
from pride.messages.reasoning import OPENAI_RESPONSES, REASONING_ITEMS, ReasoningDelta

from ._endpoint import Delta, ReplyParts, json_instruction
from ._errors import not_sent
from ._http import HttpEndpoint
from ._reasoning import REASONING_OPTIONS, reasoning_object
from ._shape import (
    WrongShape,
    as_object,
    count_field,
    list_field,
    object_field,
    str_field,
    where,
)
from ._types import ModelRequest

__all__ = ["ENCRYPTED_REASONING", "ResponsesEndpoint", "input_items"]

logger = logging.getLogger("pride.llm")

#: The ``include`` entry that asks for reasoning a stateless call can send back.
ENCRYPTED_REASONING = "reasoning.encrypted_content"

_CHOICES = ("auto", "none", "required")

#: Why a response stopped short (``incomplete_details.reason``), in the OpenAI
#: chat vocabulary ``ModelResponse.finish_reason`` uses.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function")
    if isinstance(function, dict):  # chat-completions form: flatten it
        tool = function
    elif "type" in tool:  # already a Responses tool (a function, or a built-in one)
        return tool
    wire = {
        "type": "function",
        "name": tool["name"],
        "parameters": tool.get("parameters") or {"type": "object"},
        # Responses makes function tools strict unless told otherwise, and a strict
        # schema must list every property as required: pride's schemas do not.
        "strict": False,
    }
    if tool.get("description"):
        wire["description"] = tool["description"]
    return wire


def _wire_choice(choice: str) -> Any:
    return choice if choice in _CHOICES else {"type": "function", "name": choice}


def _input_content(content: Any, role: str) -> Any:
    """Chat content (a string or a list of parts) as Responses input content."""
    if not isinstance(content, list):
        return "" if content is None else content
    kind = "output_text" if role == "assistant" else "input_text"
    parts = []
    for part in content:
        if not isinstance(part, dict):
            raise ValueError(f"a content part must be an object, not {type(part).__name__}")
        if part.get("type") == "image_url":
            image = part.get("image_url") or {}
            url = image.get("url") if isinstance(image, dict) else image
            parts.append(
                {"type": "input_image", "image_url": url, "detail": image.get("detail", "auto")}
            )
        elif part.get("type") == "text":
            parts.append({"type": kind, "text": part.get("text", "")})
        else:
            parts.append(part)  # already a Responses part
    return parts


def input_items(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(instructions, input)`` for chat-shaped ``messages`` (see the module docstring).

    Raises:
        ValueError: an entry of a role the Responses API has no place for.
    """
    start = 0
    system = []
    while start < len(messages) and messages[start].get("role") in ("system", "developer"):
        content = messages[start].get("content")
        if isinstance(content, str) and content:
            system.append(content)
        start += 1
    items: list[dict[str, Any]] = []
    for message in messages[start:]:
        role = message.get("role")
        if role is None and "type" in message:
            items.append(message)  # a Responses item already: reasoning, a function call
        elif role == "tool":
            output = message.get("content")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": output if isinstance(output, str) else str(output or ""),
                }
            )
        elif role in ("user", "system", "developer", "assistant"):
            # A reply's reasoning goes back first, where the model produced it.
            items.extend(message.get(REASONING_ITEMS) or ())
            content = message.get("content")
            if role != "assistant" or content:
                items.append({"role": role, "content": _input_content(content, role)})
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        else:
            raise ValueError(f"a message of role {role!r} has no place in a Responses request")
    return ("\n\n".join(system) or None), items


def _finish(data: dict[str, Any], path: str, reply: ReplyParts) -> None:
    """The finish reason of a response object, from its ``status``."""
    status = str_field(data, "status", path)
    if status == "incomplete":
        details = object_field(data, "incomplete_details", path) or {}
        reason = str_field(details, "reason", where(path, "incomplete_details"))
        reply.finish_reason = _INCOMPLETE.get(reason or "", reason or "incomplete")
    elif status == "completed":
        reply.finish_reason = "tool_calls" if reply.tool_count() else "stop"
    elif status is not None:
        reply.finish_reason = status


def _read_usage(data: dict[str, Any], path: str, reply: ReplyParts) -> None:
    usage = object_field(data, "usage", path)
    if usage is None:
        return
    path = where(path, "usage")
    details = object_field(usage, "input_tokens_details", path) or {}
    details_path = where(path, "input_tokens_details")
    output_details = object_field(usage, "output_tokens_details", path) or {}
    reply.usage = {
        "input_tokens": count_field(usage, "input_tokens", path),
        "output_tokens": count_field(usage, "output_tokens", path),
        "cached_tokens": count_field(details, "cached_tokens", details_path),
        "cache_write_tokens": count_field(details, "cache_write_tokens", details_path),
        "reasoning_tokens": count_field(
            output_details, "reasoning_tokens", where(path, "output_tokens_details")
        ),
    }


def _read_model(data: dict[str, Any], path: str, reply: ReplyParts) -> None:
    model = str_field(data, "model", path)
    if model:
        reply.model = model


def _message_text(item: dict[str, Any], path: str) -> list[str]:
    """The text of an output ``message`` item: its ``output_text`` (and ``refusal``) parts."""
    texts = []
    content_path = where(path, "content")
    for index, raw in enumerate(list_field(item, "content", path) or ()):
        part_path = where(content_path, index)
        part = as_object(raw, part_path)
        kind = str_field(part, "type", part_path)
        # A refusal is what the model said instead of an answer: shown, never dropped.
        text = str_field(part, "refusal" if kind == "refusal" else "text", part_path)
        if text:
            texts.append(text)
    return texts


def _read_call(item: dict[str, Any], path: str, reply: ReplyParts, index: int) -> None:
    parts = reply.tool(index)
    call_id = str_field(item, "call_id", path)
    if call_id:
        parts.call_id = call_id
    name = str_field(item, "name", path)
    if name:
        parts.name = [name]
    arguments = str_field(item, "arguments", path)
    if arguments is not None:
        parts.pieces = [arguments] if arguments else []


def _read_reasoning(item: dict[str, Any], path: str, reply: ReplyParts, index: int) -> None:
    """A whole ``reasoning`` item, kept to be sent back: its summary's texts are the
    readable reasoning; its ``id``, the texts one by one and its
    ``encrypted_content`` are what the API needs back."""
    item_id = str_field(item, "id", path)
    encrypted = str_field(item, "encrypted_content", path)
    summary_path = where(path, "summary")
    texts = []
    for number, raw in enumerate(list_field(item, "summary", path) or ()):
        part_path = where(summary_path, number)
        texts.append(str_field(as_object(raw, part_path), "text", part_path) or "")
    parts = reply.reasoning(index)
    parts.pieces = ["\n\n".join(text for text in texts if text)]
    parts.encrypted = encrypted
    parts.data = {"summary": texts} if item_id is None else {"id": item_id, "summary": texts}


def _read_output(item: dict[str, Any], path: str, reply: ReplyParts, index: int) -> None:
    """One item of a plain response's ``output``."""
    kind = str_field(item, "type", path)
    if kind == "message":
        reply.text.extend(_message_text(item, path))
    elif kind == "function_call":
        _read_call(item, path, reply, index)
    elif kind == "reasoning":
        _read_reasoning(item, path, reply, index)


class ResponsesEndpoint(HttpEndpoint):
    """The Responses API over HTTP, plain and streaming.

    Args:
        provider: the provider name (``"openai"``, or a compatible server's).
        model: the model name sent in the request.
        base_url: the API root (``.../v1``).
        access: the model's HTTP client, key and timeout.
        limits: the bounds on what is read of a reply.

    Attributes:
        reasoning_model: whether the model reasons: a stateless call then asks
            for its reasoning encrypted, to send it back.
    """

    route = "/responses"
    stream_end = "response.completed"
    reasoning_format = OPENAI_RESPONSES
    structured_output = True
    reasoning_model = False

    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging).

        Raises:
            BadRequest: a bad reasoning option of the call's own (the model's were
                checked when it was made), or a message the API has no place for:
                nothing is sent.
        """
        try:
            return self._body(request, options, stream)
        except ValueError as exc:
            raise not_sent(self.provider, self.public_url, str(exc)) from None

    def _readable(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``items`` without the reasoning items a stateless request cannot use.

        A reasoning item without ``encrypted_content`` (from a call that did not
        ask for it: a model pride did not know reasons, a compatible server's) is
        only a reference to reasoning the provider stored, and nothing is stored
        when ``store`` is false: the API refuses the request ("Item with id ...
        not found"), and every later request of the conversation the same way.
        Left out, the conversation goes on without that reasoning (logged).
        """
        kept = [
            item
            for item in items
            if item.get("type") != "reasoning" or item.get("encrypted_content") is not None
        ]
        if len(kept) < len(items):
            logger.info(
                "%s: left out %d reasoning item(s) without encrypted content: the request is "
                "not stored, so the API could not find them",
                self.provider,
                len(items) - len(kept),
            )
        return kept

    def _body(self, request: ModelRequest, options: dict[str, Any], stream: bool) -> dict[str, Any]:
        options = dict(options)
        reasoning = reasoning_object({k: options.pop(k, None) for k in REASONING_OPTIONS})
        for name in ("max_tokens", "max_completion_tokens"):
            if name in options:
                options.setdefault("max_output_tokens", options.pop(name))
        options.pop("stream", None)
        body: dict[str, Any] = {"model": self.model, "store": False, **options}
        native = body.get("reasoning")  # Responses' own object, given as an option
        if reasoning:
            body["reasoning"] = {**reasoning, **native} if isinstance(native, dict) else reasoning
        if body["store"] is False and (self.reasoning_model or "reasoning" in body):
            include = list(body.get("include") or ())
            if ENCRYPTED_REASONING not in include:
                include.append(ENCRYPTED_REASONING)
            body["include"] = include
        instructions, items = input_items(request.messages)
        if body["store"] is not True:
            items = self._readable(items)
        if request.tools:
            body["tools"] = [_wire_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _wire_choice(request.tool_choice)
        if request.response_format is not None:
            if self.structured_output:
                body["text"] = {
                    **(body.get("text") or {}),
                    "format": {
                        "type": "json_schema",
                        "name": request.response_format.get("name", "response"),
                        "schema": request.response_format.get("schema", {}),
                        "strict": False,
                    },
                }
            else:
                extra = json_instruction(request.response_format)
                instructions = f"{instructions}\n\n{extra}" if instructions else extra
        if instructions:
            body["instructions"] = instructions
        body["input"] = items
        if stream:
            body["stream"] = True
        return body

    def usage(self, figures: dict[str, Any]) -> Usage:
        """Responses usage figures as `Usage` (``input_tokens`` counts cached ones)."""
        if not figures:
            return Usage()
        return Usage(
            input_tokens=figures["input_tokens"],
            output_tokens=figures["output_tokens"],
            cached_tokens=figures["cached_tokens"],
            cache_write_tokens=figures["cache_write_tokens"],
            reasoning_tokens=figures["reasoning_tokens"],
        )

    def _read_response(self, data: dict[str, Any], path: str, reply: ReplyParts) -> None:
        """What a response object says of itself: a failure, model, status, usage."""
        if str_field(data, "status", path) == "failed":
            raise self.payload_error(object_field(data, "error", path) or "the response failed")
        _read_model(data, path, reply)
        _read_usage(data, path, reply)
        _finish(data, path, reply)

    def read_reply(self, data: dict[str, Any], reply: ReplyParts) -> None:
        output = list_field(data, "output", "")
        if output is None:
            raise WrongShape("output", "an array of output items", None)
        for index, raw in enumerate(output):
            _read_output(
                as_object(raw, where("output", index)), where("output", index), reply, index
            )
        self._read_response(data, "", reply)

    def read_event(self, event: dict[str, Any], reply: ReplyParts) -> Delta:
        kind = str_field(event, "type", "")
        if kind in {"response.output_text.delta", "response.refusal.delta"}:
            text = str_field(event, "delta", "")
            if text:
                reply.text.append(text)
                return text
        elif kind == "response.function_call_arguments.delta":
            index = count_field(event, "output_index", "")
            piece = str_field(event, "delta", "")
            if piece and reply.has_tool(index):
                reply.add_arguments(reply.tool(index), piece)
        elif kind in {"response.output_item.added", "response.output_item.done"}:
            item = object_field(event, "item", "")
            if item is None:
                raise WrongShape("item", "an object (the output item)", None)
            index = count_field(event, "output_index", "")
            item_kind = str_field(item, "type", "item")
            if item_kind == "function_call":
                _read_call(item, "item", reply, index)
            elif item_kind == "reasoning" and kind == "response.output_item.done":
                # Only the finished item's encrypted content is whole.
                _read_reasoning(item, "item", reply, index)
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            response = object_field(event, "response", "")
            if response is None:
                raise WrongShape("response", "an object (the response)", None)
            self._read_response(response, "response", reply)
            reply.done = True
        elif kind == "response.reasoning_summary_text.delta":
            # The readable reasoning as it streams, an item of its own kind; the
            # whole item (what is sent back) comes with response.output_item.done.
            piece = str_field(event, "delta", "")
            if piece:
                return ReasoningDelta(piece, provider=OPENAI_RESPONSES)
        elif kind in ("response.created", "response.in_progress"):
            response = object_field(event, "response", "") or {}
            _read_model(response, "response", reply)
        elif kind == "error":
            code = str_field(event, "code", "")
            raise self.payload_error({"type": code, "message": event.get("message")})
        return ""
