"""The spans of single calls within a traced turn: ``chat {model}`` and ``execute_tool {tool}``.

Each is a context manager entered around the call it traces, with the span
current in the calling task meanwhile (so an asked branch's turn, a tool's
own spans, nest under it). Like the rest of `pride.telemetry`, a failure of
its own is logged (``pride.telemetry``) and the call goes on.
"""

from __future__ import annotations

import json
import logging
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from opentelemetry import context as otel_context, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..llm import retry_listener
from ._content import (
    VALUE_LIMIT,
    as_json,
    clip,
    clip_error,
    clip_stack,
    input_messages,
    output_messages,
)

if TYPE_CHECKING:
    from ..llm import ModelRequest, ModelResponse, RetryNotice, iModel
    from ..messages import ActionCall

__all__ = ["Call", "CallOwner", "ModelCall", "ToolCall", "record_error"]

log = logging.getLogger("pride.telemetry")

# Request options that map onto GenAI request attributes.
REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}


class CallOwner(Protocol):
    """What a call span needs of its turn (`pride.telemetry._tracer`'s turn record)."""

    tracer: trace.Tracer

    @property
    def capture_content(self) -> bool:
        """Whether message content goes on the spans."""
        ...

    def common(self) -> dict[str, Any]:
        """The attributes every call span of the turn carries."""
        ...


class Call:
    """A span around one call, current in the calling task while it runs."""

    __slots__ = ("_span", "_token", "turn")

    def __init__(self, turn: CallOwner) -> None:
        self.turn = turn
        self._span: Span | None = None
        self._token: Any = None

    def _start(self) -> Span:
        raise NotImplementedError

    def __enter__(self) -> Call:
        try:
            self._span = self._start()
            self._token = otel_context.attach(trace.set_span_in_context(self._span))
        except Exception:
            log.exception("could not start a call span")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        try:
            if span is not None:
                if exc is not None:
                    record_error(span, exc, exception=isinstance(exc, Exception))
                span.end()
        except Exception:
            log.exception("could not end a call span")
        finally:
            if self._token is not None:
                otel_context.detach(self._token)
                self._token = None

    def response(self, response: ModelResponse) -> None:
        """A model call's reply (see `ModelCall`)."""

    def result(self, output: Any) -> None:
        """A tool's output (see `ToolCall`)."""


def record_error(span: Span, error: BaseException, *, exception: bool) -> None:
    """Mark ``span`` failed by ``error``: ``error.type``, an ``ERROR`` status and (when
    ``exception``) the exception event, its texts cut (`clip_error`, `clip_stack`):
    an error quotes what it was given, and what a model or a provider gave is hostile."""
    span.set_attribute("error.type", type(error).__name__)
    text = clip_error(error)
    if exception:
        span.record_exception(
            error, {"exception.message": text, "exception.stacktrace": clip_stack(error)}
        )
    span.set_status(Status(StatusCode.ERROR, text))


class ModelCall(Call):
    """``chat {model}``: one model call, its retries as events."""

    __slots__ = ("_listening", "_model", "_request", "_streaming")

    def __init__(
        self, turn: CallOwner, model: iModel, request: ModelRequest, streaming: bool
    ) -> None:
        super().__init__(turn)
        self._model = model
        self._request = request
        self._streaming = streaming
        self._listening: retry_listener | None = None

    def _start(self) -> Span:
        model, request = self._model, self._request
        attributes = self.turn.common()
        attributes.update(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": model.provider,
                "gen_ai.request.model": model.model,
                "gen_ai.output.type": "json" if request.response_format else "text",
            }
        )
        if self._streaming:
            attributes["gen_ai.request.stream"] = True
        options = {**model.request_options, **request.options}
        for option, name in REQUEST_OPTIONS.items():
            value = options.get(option)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[name] = value
        if model.base_url:
            where = urlsplit(model.base_url)
            if where.hostname:
                attributes["server.address"] = where.hostname
                if where.port is not None:
                    attributes["server.port"] = where.port
        if self.turn.capture_content:
            attributes["gen_ai.input.messages"] = clip(input_messages(request))
            if request.system:
                attributes["gen_ai.system_instructions"] = clip(
                    json.dumps([{"type": "text", "content": request.system}])
                )
            if request.tools:
                attributes["gen_ai.tool.definitions"] = clip(as_json(list(request.tools)))
        return self.turn.tracer.start_span(
            f"chat {model.model}", kind=SpanKind.CLIENT, attributes=attributes
        )

    def __enter__(self) -> Call:
        super().__enter__()
        if self._span is not None:
            self._listening = retry_listener(self._retry)
            self._listening.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._listening is not None:
            self._listening.__exit__(exc_type, exc, tb)
            self._listening = None
        super().__exit__(exc_type, exc, tb)

    def _retry(self, notice: RetryNotice) -> None:
        span = self._span
        if span is None:
            return
        attributes: dict[str, Any] = {
            "pride.retry.number": notice.retry,
            "pride.retry.max_retries": notice.max_retries,
            "pride.retry.delay_s": notice.delay,
            "error.type": type(notice.error).__name__,
        }
        if notice.status is not None:
            attributes["http.response.status_code"] = notice.status
        span.add_event("pride.retry", attributes)

    def response(self, response: ModelResponse) -> None:
        span = self._span
        if span is None:
            return
        try:
            usage = response.usage
            # The model's name and finish reason are the provider's bytes: cut.
            attributes: dict[str, Any] = {
                "gen_ai.response.model": clip(response.model or self._model.model, VALUE_LIMIT),
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
            }
            if response.finish_reason:
                attributes["gen_ai.response.finish_reasons"] = (
                    clip(response.finish_reason, VALUE_LIMIT),
                )
            if usage.cached_tokens:
                attributes["gen_ai.usage.cache_read.input_tokens"] = usage.cached_tokens
            if usage.cache_write_tokens:
                attributes["gen_ai.usage.cache_creation.input_tokens"] = usage.cache_write_tokens
            if usage.reasoning_tokens:  # counted in output_tokens too, as the conventions say
                attributes["gen_ai.usage.reasoning.output_tokens"] = usage.reasoning_tokens
            if usage.cost_usd is not None:
                attributes["pride.usage.cost_usd"] = usage.cost_usd
            if self.turn.capture_content:
                attributes["gen_ai.output.messages"] = clip(output_messages(response))
            span.set_attributes(attributes)
        except Exception:
            log.exception("could not record a model call's reply on its span")


class ToolCall(Call):
    """``execute_tool {tool name}``: one tool invocation."""

    __slots__ = ("_call", "_description")

    def __init__(self, turn: CallOwner, call: ActionCall, description: str | None) -> None:
        super().__init__(turn)
        self._call = call
        self._description = description

    def _start(self) -> Span:
        call = self._call
        attributes = self.turn.common()
        attributes.update(
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.function,
                "gen_ai.tool.type": "function",
            }
        )
        if call.call_id:  # the model's (the provider's bytes): cut
            attributes["gen_ai.tool.call.id"] = clip(call.call_id, VALUE_LIMIT)
        if self._description:
            attributes["gen_ai.tool.description"] = self._description
        if self.turn.capture_content:
            attributes["gen_ai.tool.call.arguments"] = clip(as_json(dict(call.arguments)))
        return self.turn.tracer.start_span(
            f"execute_tool {call.function}", kind=SpanKind.INTERNAL, attributes=attributes
        )

    def result(self, output: Any) -> None:
        span = self._span
        if span is not None and self.turn.capture_content:
            try:
                span.set_attribute("gen_ai.tool.call.result", clip(as_json(output)))
            except Exception:
                log.exception("could not record a tool's result on its span")
