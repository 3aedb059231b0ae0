"""PrideTracer: pride's turns, model calls and tool calls as OpenTelemetry spans.

The span tree follows the work (GenAI semantic conventions, latest
experimental: what ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``
selects in OpenTelemetry's own GenAI instrumentations):

```text
invoke_agent planner                 INTERNAL  one per turn
├── chat gpt-4.1-mini                CLIENT    one per model call (retries as events)
├── execute_tool ask_researcher      INTERNAL  one per tool call
│   └── invoke_agent researcher                the asked branch's turn: a child
│       ├── chat gpt-4.1-mini
│       └── execute_tool search
└── chat gpt-4.1-mini
```

Parents come from the envelope, never from the actor task's own context:
trio copies the context of the task that *spawned* an actor into its loop,
so a loop started inside a request's span would otherwise parent every
later turn to that request. The envelope carries the sender's context as a
W3C ``traceparent`` (``Reply.trace``), so the same holds across processes.

Message content (prompts, replies, tool arguments and results) is recorded
only when asked: ``instrument(capture_content=True)`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, OpenTelemetry's
variable for GenAI instrumentations.

A tracer never breaks the work it traces: an exception of its own is logged
(``pride.telemetry``) and the work goes on.
"""

from __future__ import annotations

import collections
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context, propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from .._version import __version__
from ..actors import instrument as slot
from ..errors import ApprovalRequired
from ._calls import Call, ModelCall, ToolCall, record_error

if TYPE_CHECKING:
    from ..actors.instrument import TracedBranch
    from ..llm import ModelRequest, iModel
    from ..messages import ActionCall, Usage, WorkCommand

__all__ = ["CAPTURE_CONTENT_ENV", "PrideTracer", "instrument", "instrumented", "uninstrument"]

log = logging.getLogger("pride.telemetry")

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""OpenTelemetry's switch for recording GenAI message content (``true`` to record)."""

_SCOPE = "pride"
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"
SUSPENDED_KEPT = 1_000
"""Turns suspended for approval whose span a continuation can still link to (the
oldest are forgotten first; a turn continued after that, or by another process,
starts a span without the link)."""

# Looking up OpenTelemetry's global provider costs more than the rest of what an
# untraced turn pays here (it reads the environment), so while none is set the
# answer is kept this many seconds: a provider set later is used within a second.
_PROVIDER_RECHECK = 1.0
_clock = time.monotonic  # the clock of that recheck (a test moves it)


def _content_from_env() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


class PrideTracer:
    """The tracer pride's runtime reports to once `instrument` installed it.

    Args:
        tracer_provider: where the spans go; None uses OpenTelemetry's global
            provider, looked up (at most once a second) until the application
            sets one; before that, turns are not traced and cost next to nothing.
        capture_content: record message content; None reads
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
    """

    def __init__(self, tracer_provider: Any = None, *, capture_content: bool | None = None) -> None:
        self._provider = tracer_provider
        self._tracer: trace.Tracer | None = None
        self._unset_until = 0.0  # monotonic time before which the global provider is unset
        # The spans of turns waiting for approval, by turn id: the continued turn links
        # its span to the one its first part ended (most recent last, bounded).
        self._suspended: collections.OrderedDict[str, trace.SpanContext] = collections.OrderedDict()
        if tracer_provider is not None:
            self._tracer = tracer_provider.get_tracer(_SCOPE, __version__, schema_url=_SCHEMA_URL)
        self.capture_content = _content_from_env() if capture_content is None else capture_content

    def __repr__(self) -> str:
        source = "global provider" if self._provider is None else repr(self._provider)
        return f"<PrideTracer {source} capture_content={self.capture_content}>"

    def _active(self) -> trace.Tracer | None:
        """The tracer to record with, or None while nothing would record."""
        tracer = self._tracer
        if tracer is not None:
            return tracer
        now = _clock()
        if now < self._unset_until:
            return None
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            self._unset_until = now + _PROVIDER_RECHECK
            return None  # no SDK configured (yet): nothing would be recorded
        # The global provider is set once per process: keep its tracer.
        self._tracer = provider.get_tracer(_SCOPE, __version__, schema_url=_SCHEMA_URL)
        return self._tracer

    # ----------------------------------------------------------- the slot

    def carrier(self) -> dict[str, str] | None:
        """The calling task's trace context, as W3C headers, if it has a span."""
        try:
            # Every envelope asks, traced or not: an empty context (the usual
            # untraced caller) is answered without looking up a span in it.
            if not otel_context.get_current():
                return None
            if not trace.get_current_span().get_span_context().is_valid:
                return None
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            return carrier or None
        except Exception:
            log.exception("could not capture the trace context for an envelope")
            return None

    def turn(
        self,
        branch: TracedBranch,
        turn_id: Any,
        command: WorkCommand,
        carrier: Mapping[str, str] | None,
    ) -> _Turn | None:
        """The span of one turn, current in the actor's task until it ends."""
        try:
            if self._tracer is None and _clock() < self._unset_until:
                return None  # no provider, looked for less than a second ago: the common case
            tracer = self._active()
            if tracer is None:
                return None
            parent = _parent(carrier)
            model = branch.chat_model
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": branch.name,
                "gen_ai.agent.id": branch.id_str,
                "gen_ai.conversation.id": branch.id_str,
                "gen_ai.provider.name": model.provider,
                "gen_ai.request.model": model.model,
                "pride.turn_id": str(turn_id),
                "pride.command": type(command).__name__,
            }
            owner = branch.owner_id
            if owner is not None:
                attributes["pride.session.id"] = str(owner)
            first_part = self._suspended.pop(str(turn_id), None)
            span = tracer.start_span(
                f"invoke_agent {branch.name}",
                context=parent,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                links=[trace.Link(first_part)] if first_part is not None else None,
            )
            return _Turn(
                self, tracer, span, parent, conversation=branch.id_str, turn_id=str(turn_id)
            )
        except Exception:
            log.exception("could not start the span of a turn of branch %r", branch.name)
            return None

    def step(
        self, branch: TracedBranch, command: WorkCommand, carrier: Mapping[str, str] | None
    ) -> _Turn | None:
        """An ``Act``: no span of its own; its tool calls' spans go under the sender's."""
        try:
            if self._tracer is None and _clock() < self._unset_until:
                return None
            tracer = self._active()
            if tracer is None:
                return None
            parent = _parent(carrier)
            return _Turn(self, tracer, None, parent, conversation=branch.id_str, turn_id=None)
        except Exception:
            log.exception("could not trace an Act of branch %r", branch.name)
            return None

    def suspended(self, turn_id: str, span: Span) -> None:
        """Keep the span of a turn that stopped for approval, for its continuation."""
        self._suspended[turn_id] = span.get_span_context()
        self._suspended.move_to_end(turn_id)
        while len(self._suspended) > SUSPENDED_KEPT:
            self._suspended.popitem(last=False)


def _parent(carrier: Mapping[str, str] | None) -> Context:
    """The parent context of a turn: the envelope's, else a new trace (never the actor's)."""
    if not carrier:
        return Context()
    return propagate.extract(carrier, context=Context())


class _Turn:
    """One traced turn (or ``Act``): its span, current in the actor's task meanwhile."""

    __slots__ = ("_conversation", "_span", "_token", "_turn_id", "owner", "tracer")

    def __init__(
        self,
        owner: PrideTracer,
        tracer: trace.Tracer,
        span: Span | None,
        parent: Context,
        *,
        conversation: str,
        turn_id: str | None,
    ) -> None:
        self.owner = owner
        self.tracer = tracer
        self._span = span
        self._conversation = conversation
        self._turn_id = turn_id
        current = trace.set_span_in_context(span, parent) if span is not None else parent
        self._token: Any = otel_context.attach(current)

    @property
    def capture_content(self) -> bool:
        """Whether message content goes on the spans (the tracer's setting)."""
        return self.owner.capture_content

    def common(self) -> dict[str, Any]:
        """The attributes every call span of this turn carries."""
        attributes: dict[str, Any] = {"gen_ai.conversation.id": self._conversation}
        if self._turn_id is not None:
            attributes["pride.turn_id"] = self._turn_id
        return attributes

    def model_call(self, model: iModel, request: ModelRequest, *, streaming: bool) -> Call:
        """The span of one model call (entered by the caller)."""
        return ModelCall(self, model, request, streaming)

    def tool_call(self, call: ActionCall, description: str | None) -> Call:
        """The span of one tool invocation (entered by the caller)."""
        return ToolCall(self, call, description)

    def leave(self) -> None:
        """Restore the actor's context (in its task: OpenTelemetry's context is a
        context variable, restored only where it was set); the span stays open."""
        token, self._token = self._token, None
        if token is not None:
            otel_context.detach(token)

    def end(self, failure: BaseException | None, cancelled: bool, usage: Usage) -> None:
        """Record the outcome and usage, end the span, restore the actor's context
        (unless `leave` already did)."""
        try:
            span = self._span
            if span is not None:
                span.set_attributes(_usage_attributes(usage))
                if failure is None:
                    span.set_attribute("pride.outcome", "completed")
                elif isinstance(failure, ApprovalRequired):
                    # It waits for a person; it has not failed (no error status). The
                    # continued turn, of the same id, links this span.
                    span.set_attribute("pride.outcome", "suspended")
                    span.set_attribute("pride.approval.pending", len(failure.pending))
                    if self._turn_id is not None:
                        self.owner.suspended(self._turn_id, span)
                else:
                    outcome = "cancelled" if cancelled else "failed"
                    span.set_attribute("pride.outcome", outcome)
                    record_error(span, failure, exception=not cancelled)
                span.end()
        except Exception:
            log.exception("could not end the span of turn %s", self._turn_id)
        finally:
            self.leave()


def _usage_attributes(usage: Usage) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "pride.usage.model_calls": usage.model_calls,
        "pride.usage.tool_calls": usage.tool_calls,
    }
    if usage.cost_usd is not None:
        attributes["pride.usage.cost_usd"] = usage.cost_usd
    return attributes


# ------------------------------------------------------------ installing


def instrument(tracer_provider: Any = None, *, capture_content: bool | None = None) -> PrideTracer:
    """Trace pride's turns, model calls and tool calls from now on.

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider``; None uses the
            global one (``opentelemetry.trace.set_tracer_provider``), found
            (at most once a second) until one is set.
        capture_content: record prompts, replies and tool arguments and
            results; None reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.

    Returns:
        the installed tracer (it replaces one installed before). Turns
        already running finish as they started.
    """
    tracer = PrideTracer(tracer_provider, capture_content=capture_content)
    slot.install(tracer)
    return tracer


def uninstrument() -> None:
    """Stop tracing (turns already running finish as they started)."""
    if isinstance(slot.TRACER, PrideTracer):
        slot.uninstall()


def instrumented() -> PrideTracer | None:
    """The installed tracer, if any."""
    tracer = slot.TRACER
    return tracer if isinstance(tracer, PrideTracer) else None
