"""The OpenAI chat-completions endpoint (OpenAI and every compatible server).

Wire format: ``POST {base_url}/chat/completions``. Tools go out as
``{"type": "function", "function": {...}}`` and come back as ``tool_calls``
with JSON-string arguments (streamed as indexed deltas). Structured output uses
``response_format: {"type": "json_schema", ...}`` where the provider supports
it, else an instruction appended to the system message. Streaming asks for
``stream_options.include_usage`` so the last chunk carries usage.
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

__all__ = ["OpenAIEndpoint"]

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


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some compatible servers return content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


class OpenAIEndpoint(HttpEndpoint):
    """Chat completions over HTTP, plain and streaming.

    Args:
        provider: the provider name (``"openai"``, ``"groq"``, ...).
        model: the model name sent in the request.
        base_url: the API root (``.../v1``).
        access: the model's HTTP client and key.
        structured_output: send ``response_format`` natively (else instruct).
    """

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        base_url: str,
        access: HttpAccess,
        structured_output: bool = True,
    ) -> None:
        super().__init__(
            provider=provider,
            model=model,
            url=base_url.rstrip("/") + "/chat/completions",
            access=access,
        )
        self.structured_output = structured_output

    def payload(
        self, request: ModelRequest, options: dict[str, Any], stream: bool
    ) -> dict[str, Any]:
        """The JSON body for ``request`` (exposed for tests and debugging)."""
        messages = request.messages
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

    def usage(self, raw: Any, model: str) -> Usage:
        """Normalise an OpenAI ``usage`` object (``None`` gives zero usage)."""
        if not isinstance(raw, dict):
            return Usage()
        details = raw.get("prompt_tokens_details") or {}
        cost = raw.get("cost")
        usage = Usage(
            input_tokens=int(raw.get("prompt_tokens") or 0),
            output_tokens=int(raw.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
        )
        if usage.cost_usd is None:
            cost_usd = price_usage(self.provider, model, usage)
            if cost_usd is not None:
                usage = attrs.evolve(usage, cost_usd=cost_usd)
        return usage

    async def send(self, request: ModelRequest, options: dict[str, Any]) -> ModelResponse:
        data = await self.post_json(self.payload(request, options, stream=False))
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise malformed(self.provider, "the response has no choices[0].message", exc) from exc
        calls = []
        for raw in message.get("tool_calls") or ():
            function = raw.get("function") or {}
            arguments, error = decode_arguments(function.get("arguments"))
            calls.append(
                ToolCall(
                    name=str(function.get("name", "")),
                    arguments=arguments,
                    id=raw.get("id") or new_call_id(),
                    arguments_error=error,
                )
            )
        model = data.get("model") or self.model
        return ModelResponse(
            text=_text_of(message.get("content")),
            tool_calls=tuple(calls),
            usage=self.usage(data.get("usage"), model),
            model=model,
            provider=self.provider,
            finish_reason=choice.get("finish_reason"),
        )

    async def stream(
        self, request: ModelRequest, options: dict[str, Any]
    ) -> AsyncGenerator[str | ModelResponse, None]:
        state = _StreamState(self.model)
        async with aclosing(self.post_sse(self.payload(request, options, stream=True))) as events:
            async for event in events:
                if state.done:
                    continue  # read to the end so the connection can be reused
                if event.data == "[DONE]":
                    state.done = True
                    continue
                chunk = loads_event(self.provider, event.data)
                if not isinstance(chunk, dict):
                    raise malformed(self.provider, "a stream event is not a JSON object")
                if chunk.get("error"):
                    raise error_for_payload(chunk["error"], provider=self.provider)
                text = state.feed(chunk)
                if text:
                    yield text
        if not state.done and state.finish_reason is None:
            raise ProviderConnectionError(
                f"{self.provider}: the stream ended before the reply was complete",
                provider=self.provider,
            )
        yield ModelResponse(
            text="".join(state.text),
            tool_calls=state.tool_calls(),
            usage=self.usage(state.usage, state.model),
            model=state.model,
            provider=self.provider,
            finish_reason=state.finish_reason,
        )


class _StreamState:
    """Assembles streamed chat-completion chunks into one reply."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self.tools: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.done = False

    def feed(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; return its text delta ("" if none)."""
        if chunk.get("model"):
            self.model = str(chunk["model"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or ()
        if not choices:
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or {}
        for raw in delta.get("tool_calls") or ():
            index = raw.get("index", len(self.tools))
            ids, names, arguments = self.tools.setdefault(index, ([], [], []))
            if raw.get("id"):
                ids.append(str(raw["id"]))
            function = raw.get("function") or {}
            if function.get("name"):
                names.append(str(function["name"]))
            if function.get("arguments"):
                arguments.append(str(function["arguments"]))
        content = delta.get("content")
        if content:
            text = str(content)
            self.text.append(text)
            return text
        return ""

    def tool_calls(self) -> tuple[ToolCall, ...]:
        calls = []
        for index in sorted(self.tools):
            ids, names, parts = self.tools[index]
            arguments, error = decode_arguments("".join(parts))
            call_id = ids[-1] if ids else new_call_id()
            calls.append(ToolCall("".join(names), arguments, id=call_id, arguments_error=error))
        return tuple(calls)
