"""The Anthropic Messages endpoint.

Wire format: ``POST {base_url}/messages`` with ``x-api-key`` and
``anthropic-version`` headers; the system text is a top-level ``system`` field
and ``max_tokens`` is required (`DEFAULT_MAX_TOKENS` unless given).
Tools go out as ``{"name", "description", "input_schema"}`` and come back as
``tool_use`` content blocks (streamed as ``input_json_delta`` pieces).

Extended thinking (`pride.llm._thinking`): ``thinking`` is a checked request
option; the reply's ``thinking`` and ``redacted_thinking`` blocks are read into
[`Reasoning`][pride.Reasoning] (streamed: ``thinking_delta`` pieces as
[`ReasoningDelta`][pride.ReasoningDelta] items, the ``signature_delta`` kept),
never into the text; the conversation sends them back unchanged
(`pride.messages.reasoning`).

Prompt caching (`pride.llm._caching`): ``cache_control`` breakpoints on the
tools, the system text and the history before this turn's input, by default;
the ``prompt_cache`` option changes or turns off the policy.

Anthropic has no JSON-schema response mode, so a ``response_format`` becomes
an instruction appended to the system text asking for the JSON in a
``json`` fenced block; parse the text to get it.

Usage: Anthropic's ``input_tokens`` excludes cache reads and writes; pride's
``Usage.input_tokens`` counts all prompt tokens, so the three are added, and
``cached_tokens`` is ``cache_read_input_tokens`` and ``cache_write_tokens`` is
``cache_creation_input_tokens``.
"""

from __future__ import annotations

import json
from typing import Any

from pride.errors import BadRequest
from pride.messages import ReasoningDelta, Usage
from pride.messages.reasoning import ANTHROPIC

from ._caching import check_prompt_cache, mark_breakpoints
from ._endpoint import Delta, ReplyParts, json_instruction
from ._http import HttpEndpoint
from ._shape import (
    WrongShape,
    as_object,
    count_field,
    list_field,
    object_field,
    str_field,
    where,
)
from ._thinking import check_thinking, thinking_enabled
from ._types import ModelRequest

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicEndpoint", "checked_options"]

#: The API version header pride speaks.
ANTHROPIC_VERSION = "2023-06-01"

#: ``max_tokens`` sent when the caller set none (the API requires one).
DEFAULT_MAX_TOKENS = 4096

#: Anthropic stop reasons in the OpenAI vocabulary used by ``ModelResponse``.
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "pause_turn": "pause",
    "refusal": "content_filter",
}


def checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """A model's request options with its thinking option (`pride.llm._thinking`) and its
    ``prompt_cache`` option (`pride.llm._caching`) checked.

    Raises:
        ValueError: the thinking option, or one it clashes with, is one the API
            refuses; or ``prompt_cache`` is not ``True``, ``False`` or a list of parts.
    """
    options = check_thinking(options, DEFAULT_MAX_TOKENS)
    if "prompt_cache" in options:
        options = {**options, "prompt_cache": check_prompt_cache(options["prompt_cache"])}
    return options


def _wire_tool(tool: dict[str, Any]) -> dict[str, Any]:
    if "input_schema" in tool:  # already in Anthropic form
        return tool
    wire = {"name": tool["name"], "input_schema": tool.get("parameters") or {"type": "object"}}
    if tool.get("description"):
        wire["description"] = tool["description"]
    return wire


def _wire_choice(choice: str) -> dict[str, Any]:
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    return {"type": "tool", "name": choice}


def _finish(reason: str | None) -> str | None:
    return None if reason is None else FINISH_REASONS.get(reason, reason)


#: The usage figures Anthropic reports (each a count; a stream updates them).
_USAGE_FIGURES = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _read_usage(data: dict[str, Any], path: str, reply: ReplyParts) -> None:
    """The figures of a ``usage`` object, checked, over those read before."""
    usage = object_field(data, "usage", path)
    if usage is None:
        return
    path = where(path, "usage")
    for name in _USAGE_FIGURES:
        if usage.get(name) is not None:
            reply.usage[name] = count_field(usage, name, path)


#: What belongs where a thinking block's signature is missing. Anthropic signs every
#: thinking block and refuses one sent back without its signature, so a reply
#: holding an unsigned one is refused when read: recorded, it would make every
#: later request of the conversation fail.
_SIGNED = "the thinking block's signature (a non-empty string)"


def _read_block(block: dict[str, Any], path: str, reply: ReplyParts, index: int | None) -> str:
    """One content block (whole, or as a stream's ``content_block_start``); its text."""
    kind = str_field(block, "type", path)
    if kind == "text":
        text = str_field(block, "text", path)
        if text:
            reply.text.append(text)
            return text
    elif kind == "tool_use":
        parts = reply.tool(index)
        parts.call_id = str_field(block, "id", path)
        parts.name.append(str_field(block, "name", path) or "")
        parts.arguments = block.get("input")  # model output: decoded, not checked
    elif kind == "thinking":
        thinking = reply.reasoning(index)
        text = str_field(block, "thinking", path)
        signature = str_field(block, "signature", path)
        if text:
            thinking.pieces.append(text)
        if signature:
            thinking.signature.append(signature)
        elif index is None:  # a whole block: its signature is here or nowhere
            raise WrongShape(where(path, "signature"), _SIGNED, signature)
    elif kind == "redacted_thinking":
        reply.reasoning(index).encrypted = str_field(block, "data", path) or ""
    return ""


class AnthropicEndpoint(HttpEndpoint):
    """Anthropic Messages over HTTP, plain and streaming."""

    route = "/messages"
    stream_end = "message_stop"
    reasoning_format = ANTHROPIC

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging).

        Cache breakpoints are placed by the ``prompt_cache`` option's policy
        (`pride.llm._caching`; on by default).

        Raises:
            BadRequest: the options break a rule of extended thinking, or
                ``prompt_cache`` is not one the policy knows (a call's own
                options can; the model's were checked when it was made):
                nothing is sent.
        """
        try:
            options = checked_options(options)
        except ValueError as exc:
            raise self._refused(str(exc)) from None
        options = dict(options)
        prompt_cache = options.pop("prompt_cache", True)  # pride's option, never sent
        if (
            request.tool_choice not in (None, "auto", "none")
            and request.tools
            and thinking_enabled(options)
        ):
            raise self._refused(
                f"tool_choice {request.tool_choice!r} forces a tool, which extended thinking "
                'does not allow (only "auto" or "none")'
            )
        body: dict[str, Any] = {"model": self.model, "max_tokens": DEFAULT_MAX_TOKENS, **options}
        system = request.system
        if request.response_format is not None:
            instruction = json_instruction(request.response_format)
            system = f"{system}\n\n{instruction}" if system else instruction
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [_wire_tool(t) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _wire_choice(request.tool_choice)
        body["messages"] = request.messages
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        mark_breakpoints(body, prompt_cache)
        return body

    def _refused(self, why: str) -> BadRequest:
        return BadRequest(
            f"{self.provider}: the request was not sent: {why}",
            provider=self.provider,
            url=self.public_url,
        )

    def usage(self, figures: dict[str, Any]) -> Usage:
        """Anthropic figures as `Usage`: cache reads and writes count as input."""
        cached = figures.get("cache_read_input_tokens", 0)
        written = figures.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=figures.get("input_tokens", 0) + cached + written,
            output_tokens=figures.get("output_tokens", 0),
            cached_tokens=cached,
            cache_write_tokens=written,
        )

    def read_reply(self, data: dict[str, Any], reply: ReplyParts) -> None:
        content = list_field(data, "content", "")
        if content is None:
            raise WrongShape("content", "an array of content blocks", None)
        for index, raw in enumerate(content):
            _read_block(
                as_object(raw, where("content", index)), where("content", index), reply, None
            )
        model = str_field(data, "model", "")
        if model:
            reply.model = model
        reply.finish_reason = _finish(str_field(data, "stop_reason", ""))
        _read_usage(data, "", reply)

    def read_event(self, event: dict[str, Any], reply: ReplyParts) -> Delta:
        kind = str_field(event, "type", "")
        if kind == "content_block_delta":
            delta = object_field(event, "delta", "") or {}
            delta_kind = str_field(delta, "type", "delta")
            if delta_kind == "text_delta":
                text = str_field(delta, "text", "delta") or ""
                reply.text.append(text)
                return text
            if delta_kind == "thinking_delta":
                index = count_field(event, "index", "")
                thought = str_field(delta, "thinking", "delta") or ""
                if thought:
                    reply.reasoning(index).pieces.append(thought)
                    return ReasoningDelta(thought, provider=ANTHROPIC)
                return ""
            if delta_kind == "signature_delta":
                index = count_field(event, "index", "")
                signature = str_field(delta, "signature", "delta")
                if signature:
                    reply.reasoning(index).signature.append(signature)
                return ""
            if delta_kind == "input_json_delta":
                index = count_field(event, "index", "")
                piece = str_field(delta, "partial_json", "delta")
                if piece and reply.has_tool(index):
                    reply.add_arguments(reply.tool(index), piece)
        elif kind == "content_block_start":
            block = object_field(event, "content_block", "") or {}
            index = count_field(event, "index", "")
            text = _read_block(block, "content_block", reply, index)
            opened = block.get("input") if block.get("type") == "tool_use" else None
            if opened:
                # A whole input opening its block (no input_json_delta pieces follow) is
                # generated as the pieces are: counted from the same place, as its JSON.
                reply.add_generated(json.dumps(opened))
            return text
        elif kind == "message_start":
            message = object_field(event, "message", "") or {}
            model = str_field(message, "model", "message")
            if model:
                reply.model = model
            _read_usage(message, "message", reply)
        elif kind == "message_delta":
            delta = object_field(event, "delta", "") or {}
            if delta.get("stop_reason") is not None:
                reply.finish_reason = _finish(str_field(delta, "stop_reason", "delta"))
            _read_usage(event, "", reply)
        elif kind == "message_stop":
            # A streamed block's signature comes in its own delta, so only the
            # whole reply shows one missing.
            unsigned = reply.unsigned_reasoning()
            if unsigned:
                raise WrongShape(f"content block {unsigned[0]}: signature", _SIGNED, None)
            reply.done = True
        elif kind == "error":
            raise self.payload_error(event.get("error"))
        return ""
