"""The tracer slot: where a tracing integration hooks into turns, model calls and tool calls.

pride's core knows no tracing library. `TRACER` is None unless an
integration installs itself (``pride.telemetry.instrument()``, the
OpenTelemetry one, from the ``otel`` extra); with the slot empty, the turn
path pays one global lookup per turn, per envelope and per call.

What an integration implements, and where the runtime calls it:

* `Tracer.carrier`: when a work command's envelope is made (``send``,
  ``ask``, ``stream``), the caller's trace context as plain strings (a W3C
  ``traceparent``), kept on the envelope (``Reply.trace``) so that it can
  cross a process boundary with it;
* `Tracer.turn`: when a turn starts, in the actor's task: a `TurnTrace`
  whose span's parent is the envelope's context, never the actor task's own
  (an actor loop inherits the context of whoever spawned it, which is not
  who asked for this turn); ``Tracer.step`` the same for an ``Act``, which
  has no span of its own;
* `TurnTrace.model_call` and `TurnTrace.tool_call`: around every model
  call and every tool invocation, at the turn view;
* `TurnTrace.end`: when the turn has finalised, with its outcome and usage;
  a turn answered by its commit (`pride.durable.commit`) calls
  `TurnTrace.leave` in its actor's task first, and `end` later, outside it.

An integration must never raise into the runtime: a failure of its own is
logged and the work goes on untraced.

Across processes. A target that carries envelopes to another process (the
cluster's) sends ``reply.trace`` along, and the receiving side makes its
local envelope inside ``with forwarding(carrier):``, so the turn there
continues the sender's trace, whether or not a tracer is installed on the
way (a relay forwards what it got).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from types import TracebackType

    from ..llm import ModelRequest, ModelResponse, iModel
    from ..messages import ActionCall, Usage, WorkCommand

__all__ = [
    "TRACER",
    "CallTrace",
    "Carrier",
    "TracedBranch",
    "Tracer",
    "TurnTrace",
    "envelope_trace",
    "forwarding",
    "install",
    "uninstall",
]

Carrier = Mapping[str, str]
"""A trace context as plain strings (``{"traceparent": "00-..."}``): it travels."""


class CallTrace(Protocol):
    """One model call or tool invocation being traced; a context manager around it.

    Leaving it with an exception records the failure (it is never suppressed).
    """

    def __enter__(self) -> CallTrace: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def response(self, response: ModelResponse) -> None:
        """A model call's reply (model calls only)."""
        ...

    def result(self, output: Any) -> None:
        """A tool's output (tool calls only)."""
        ...


class TurnTrace(Protocol):
    """One turn (or ``Act``) being traced."""

    def model_call(self, model: iModel, request: ModelRequest, *, streaming: bool) -> CallTrace:
        """Trace one model call of the turn."""
        ...

    def tool_call(self, call: ActionCall, description: str | None) -> CallTrace:
        """Trace one tool invocation of the turn."""
        ...

    def leave(self) -> None:
        """The turn's task is done with it: restore what that task had current before
        the turn (`end` then comes later, from wherever the turn's commit ends it)."""
        ...

    def end(self, failure: BaseException | None, cancelled: bool, usage: Usage) -> None:
        """The turn has finalised: ``failure`` is what its caller got (None: success).
        Unless `leave` was called, this restores the turn's task's context too."""
        ...


class TracedBranch(Protocol):
    """What a tracer reads of the branch whose turn it traces (a `pride.Branch` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def id_str(self) -> str: ...

    @property
    def chat_model(self) -> iModel: ...

    @property
    def owner_id(self) -> UUID | None: ...


class Tracer(Protocol):
    """A tracing integration (see the module docstring)."""

    def carrier(self) -> Carrier | None:
        """The calling task's trace context for an envelope, or None if there is none."""
        ...

    def turn(
        self, branch: TracedBranch, turn_id: Any, command: WorkCommand, carrier: Carrier | None
    ) -> TurnTrace | None:
        """Start tracing a turn in the actor's task; None when nothing records it."""
        ...

    def step(
        self, branch: TracedBranch, command: WorkCommand, carrier: Carrier | None
    ) -> TurnTrace | None:
        """Start tracing an ``Act`` (its tool calls only); None when nothing records it."""
        ...


TRACER: Tracer | None = None
"""The installed integration, or None (tracing off)."""

_forwarded: contextvars.ContextVar[Carrier | None] = contextvars.ContextVar(
    "pride_forwarded_trace", default=None
)


@contextmanager
def forwarding(carrier: Carrier | None) -> Iterator[None]:
    """Envelopes made in this block carry ``carrier``: a trace context that came
    from another process with the work (None: as if outside the block)."""
    token = _forwarded.set(carrier)
    try:
        yield
    finally:
        _forwarded.reset(token)


def envelope_trace(lane: str) -> Carrier | None:
    """The trace context a new envelope of ``lane`` carries: one being forwarded,
    else the installed tracer's capture of the calling task's, else None."""
    if lane != "work":
        return None
    forwarded = _forwarded.get()
    if forwarded is not None:
        return forwarded
    tracer = TRACER
    return tracer.carrier() if tracer is not None else None


def install(tracer: Tracer) -> None:
    """Make ``tracer`` the integration every turn, envelope and call reports to.

    Turns already running finish as they started.
    """
    global TRACER
    TRACER = tracer


def uninstall(tracer: Tracer | None = None) -> None:
    """Empty the slot (if ``tracer`` is given: only if it is the one installed)."""
    global TRACER
    if tracer is None or TRACER is tracer:
        TRACER = None
