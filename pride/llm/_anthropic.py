"""The Anthropic Messages endpoint.

Wire format: ``POST {base_url}/messages`` with ``x-api-key`` and
``anthropic-version`` headers; the system text is a top-level ``system`` field
and ``max_tokens`` is required (`DEFAULT_MAX_TOKENS` unless given).
Tools go out as ``{"name", "description", "input_schema"}`` and come back as
``tool_use`` content blocks (streamed as ``input_json_delta`` pieces).

Anthropic has no JSON-schema response mode, so a ``response_format`` becomes
an instruction appended to the system text asking for the JSON in a
``json`` fenced block; parse the text to get it.

Usage: Anthropic's ``input_tokens`` excludes cache reads and writes; pride's
``Usage.input_tokens`` counts all prompt tokens, so the three are added, and
``cached_tokens`` is ``cache_read_input_tokens``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import attrs

from pride.errors import ProviderConnectionError

from ._endpoint import HttpAccess, HttpEndpoint, decode_arguments, json_instruction, loads_event
from ._errors import error_for_payload, malformed
from ._pricing import price_usage
from ._types import ModelRequest, ModelResponse, ToolCall, Usage, new_call_id

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicEndpoint"]

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


def _finish(reason: Any) -> str | None:
    return None if reason is None else FINISH_REASONS.get(str(reason), str(reason))


class AnthropicEndpoint(HttpEndpoint):
    """Anthropic Messages over HTTP, plain and streaming."""

    def __init__(self, *, provider: str, model: str, base_url: str, access: HttpAccess) -> None:
        super().__init__(
            provider=provider, model=model, url=base_url.rstrip("/") + "/messages", access=access
        )

    def auth_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging)."""
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
        return body

    def usage(self, raw: Any, model: str) -> Usage:
        """Normalise an Anthropic ``usage`` object (``None`` gives zero usage)."""
        if not isinstance(raw, dict):
            return Usage()
        cached = int(raw.get("cache_read_input_tokens") or 0)
        written = int(raw.get("cache_creation_input_tokens") or 0)
        usage = Usage(
            input_tokens=int(raw.get("input_tokens") or 0) + cached + written,
            output_tokens=int(raw.get("output_tokens") or 0),
            cached_tokens=cached,
        )
        cost = price_usage(self.provider, model, usage)
        return usage if cost is None else attrs.evolve(usage, cost_usd=cost)

    async def send(self, request: ModelRequest, options: dict[str, Any]) -> ModelResponse:
        data = await self.post_json(self.payload(request, options, stream=False))
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise malformed(self.provider, "the response has no content list")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in data["content"]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                arguments, error = decode_arguments(block.get("input"))
                calls.append(
                    ToolCall(
                        name=str(block.get("name", "")),
                        arguments=arguments,
                        id=str(block.get("id") or new_call_id()),
                        arguments_error=error,
                    )
                )
        model = str(data.get("model") or self.model)
        return ModelResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            usage=self.usage(data.get("usage"), model),
            model=model,
            provider=self.provider,
            finish_reason=_finish(data.get("stop_reason")),
        )

    async def stream(
        self, request: ModelRequest, options: dict[str, Any]
    ) -> AsyncGenerator[str | ModelResponse, None]:
        state = _StreamState(self.model)
        async with aclosing(self.post_sse(self.payload(request, options, stream=True))) as events:
            async for event in events:
                if state.done:
                    continue  # read to the end so the connection can be reused
                data = loads_event(self.provider, event.data)
                if not isinstance(data, dict):
                    raise malformed(self.provider, "a stream event is not a JSON object")
                if data.get("type") == "error":
                    raise error_for_payload(data.get("error"), provider=self.provider)
                text = state.feed(data)
                if text:
                    yield text
        if not state.done:
            raise ProviderConnectionError(
                f"{self.provider}: the stream ended before message_stop",
                provider=self.provider,
            )
        yield ModelResponse(
            text="".join(state.text),
            tool_calls=state.tool_calls(),
            usage=self.usage(state.usage, state.model),
            model=state.model,
            provider=self.provider,
            finish_reason=_finish(state.stop_reason),
        )


class _StreamState:
    """Assembles Messages stream events into one reply."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.tools: dict[int, tuple[str, str, list[str]]] = {}
        self.stop_reason: Any = None
        self.usage: dict[str, Any] = {}
        self.done = False

    def feed(self, data: dict[str, Any]) -> str:
        """Take one event; return its text delta ("" if none)."""
        kind = data.get("type")
        if kind == "content_block_delta":
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                text = str(delta.get("text", ""))
                self.text.append(text)
                return text
            if delta.get("type") == "input_json_delta":
                entry = self.tools.get(int(data.get("index", -1)))
                if entry is not None:
                    entry[2].append(str(delta.get("partial_json", "")))
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            if block.get("type") == "tool_use":
                self.tools[int(data.get("index", len(self.tools)))] = (
                    str(block.get("id") or new_call_id()),
                    str(block.get("name", "")),
                    [],
                )
            elif block.get("type") == "text" and block.get("text"):
                text = str(block["text"])
                self.text.append(text)
                return text
        elif kind == "message_start":
            message = data.get("message") or {}
            if message.get("model"):
                self.model = str(message["model"])
            self.usage.update(message.get("usage") or {})
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason", self.stop_reason)
            self.usage.update(data.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        return ""

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for index in sorted(self.tools):
            call_id, name, parts = self.tools[index]
            arguments, error = decode_arguments("".join(parts))
            calls.append(ToolCall(name, arguments, id=call_id, arguments_error=error))
        return tuple(calls)
