"""Recent turns as trees of timed spans, for the console's waterfall (``GET /v1/traces``).

pride already reports every turn, model call and tool call to the tracer
slot (`pride.actors.instrument`), the hook its OpenTelemetry integration
uses. With ``--console`` the server puts a `Recorder` in that slot: it keeps
the last `KEEP` top-level turns in memory, each a tree: the turn, its model
calls and tool calls in order, and under a tool call the turns it asked of
other branches (an ask made inside a tool call carries the call's span id in
the envelope's trace carrier, as an OpenTelemetry context would be carried,
so the asked branch's turn knows its parent). A tracer already installed
(``--otel``) keeps getting everything: the recorder passes each hook on to
it and adds its own key to the carrier.

Bounded: at most `KEEP` trees, at most `MAX_SPANS` spans in one tree (more
are counted, not kept); an evicted tree's spans go with it. The recorder
never raises into the runtime: a failure of its own is logged and the work
goes on.

Times are ``time.perf_counter`` seconds; answers carry milliseconds relative
to the tree's start, so no clock needs to agree with another.
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import itertools
import logging
import time
from collections.abc import Mapping
from typing import Any

import attrs

from ..actors import instrument
from ..errors import ApprovalRequired

__all__ = ["CARRIER_KEY", "KEEP", "MAX_SPANS", "Recorder", "Span"]

log = logging.getLogger("pride.serve")

KEEP = 100
"""Top-level turns kept (their nested turns with them)."""

MAX_SPANS = 500
"""Spans kept in one tree; past that a tree counts what it dropped."""

CARRIER_KEY = "x-pride-console-span"
"""The carrier entry naming the span an envelope was made in (a tool call, a turn)."""

_CURRENT: contextvars.ContextVar[Span | None] = contextvars.ContextVar(
    "pride_console_span", default=None
)
_IDS = itertools.count(1)


@attrs.define(eq=False)
class Span:
    """One timed piece of work: a turn, a model call or a tool call.

    Attributes:
        id: unique within the process.
        kind: ``"turn"``, ``"model"`` or ``"tool"``.
        name: the branch's name (a turn), the model's (a model call), the tool's.
        branch: the branch doing the work.
        root: the tree's top-level turn (itself for a top-level turn).
        turn_id: the turn's id (a turn only).
        command: the command's class name (a turn only).
        start, end: ``time.perf_counter`` seconds; ``end`` None while running.
        outcome: ``"running"``, ``"done"``, ``"failed"``, ``"cancelled"`` or
            ``"suspended"`` (a turn that waits for approval).
        error: the error's class name, for a failure.
        detail: what else is worth showing (tokens and cost, a tool's arguments).
        children: spans under this one, in the order they started.
        spans: in a root, how many spans its tree holds; dropped: how many it did not keep.
    """

    id: str
    kind: str
    name: str
    branch: str
    root: Span | None
    turn_id: str | None = None
    command: str | None = None
    start: float = attrs.field(factory=time.perf_counter)
    end: float | None = None
    outcome: str = "running"
    error: str | None = None
    detail: dict[str, Any] = attrs.field(factory=dict)
    children: list[Span] = attrs.field(factory=list)
    spans: int = 1
    dropped: int = 0

    def describe(self, origin: float, now: float, reaches: Any) -> dict[str, Any]:
        """This span and those under it as plain data; times in ms from ``origin``.
        Spans of branches ``reaches`` refuses are left out, with their subtrees."""
        end = self.end if self.end is not None else now
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "branch": self.branch,
            "turn_id": self.turn_id,
            "command": self.command,
            "start_ms": round((self.start - origin) * 1000, 3),
            "duration_ms": round((end - self.start) * 1000, 3),
            "outcome": self.outcome,
            "error": self.error,
            "detail": self.detail,
            "children": [
                child.describe(origin, now, reaches)
                for child in self.children
                if child.kind != "turn" or reaches(child.branch)
            ],
        }


def _adopt(parent: Span, child: Span) -> bool:
    """Put ``child`` under ``parent`` unless its tree is full (then count it)."""
    root = parent.root or parent
    if root.spans >= MAX_SPANS:
        root.dropped += 1
        return False
    root.spans += 1
    parent.children.append(child)
    return True


class Recorder:
    """A tracer (`pride.actors.instrument.Tracer`) that keeps recent turns in memory.

    Args:
        inner: the tracer installed before, which every hook is passed on to, or None.
    """

    def __init__(self, inner: Any = None) -> None:
        self.inner = inner
        self._roots: collections.deque[Span] = collections.deque(maxlen=KEEP)
        self._spans: dict[str, Span] = {}  # spans an envelope may name as its parent

    def install(self) -> None:
        """Take the tracer slot (passing everything on to what held it)."""
        instrument.install(self)

    def uninstall(self) -> None:
        """Give the slot back to the tracer that held it before."""
        if instrument.TRACER is self:
            if self.inner is not None:
                instrument.install(self.inner)
            else:
                instrument.uninstall(self)

    # ------------------------------------------------------------ the slot

    def carrier(self) -> dict[str, str] | None:
        """The inner tracer's carrier, plus the span the calling task is in, if any."""
        inner = self.inner.carrier() if self.inner is not None else None
        span = _CURRENT.get()
        if span is None:
            return dict(inner) if inner else None
        return {**(inner or {}), CARRIER_KEY: span.id}

    def turn(
        self, branch: Any, turn_id: Any, command: Any, carrier: Mapping[str, str] | None
    ) -> _Turn | None:
        """Record a turn: a new tree, or a branch of the tree its envelope came from."""
        inner = None
        if self.inner is not None:
            inner = self.inner.turn(branch, turn_id, command, carrier)
        try:
            parent = self._parent(carrier)
            span = Span(
                id=f"s{next(_IDS)}",
                kind="turn",
                name=branch.name,
                branch=branch.name,
                root=None,
                turn_id=str(turn_id) if turn_id is not None else None,
                command=type(command).__name__,
            )
            if parent is not None:
                span.root = parent.root or parent
                if not _adopt(parent, span):
                    return _Turn(self, None, inner)
            else:
                self._keep_root(span)
            self._spans[span.id] = span
            return _Turn(self, span, inner)
        except Exception:
            log.exception("the console could not record a turn of %r", branch.name)
            return _Turn(self, None, inner) if inner is not None else None

    def step(self, branch: Any, command: Any, carrier: Mapping[str, str] | None) -> _Turn | None:
        """An ``Act``: its tool calls go under the span its envelope came from, if kept."""
        inner = self.inner.step(branch, command, carrier) if self.inner is not None else None
        parent = self._parent(carrier)
        if parent is None and inner is None:
            return None
        return _Turn(self, parent, inner, own=False)

    # ------------------------------------------------------------ reading

    def recent(self, limit: int, reaches: Any) -> list[dict[str, Any]]:
        """The latest ``limit`` trees whose top-level branch ``reaches`` allows, newest first."""
        now = time.perf_counter()
        found: list[dict[str, Any]] = []
        for root in reversed(self._roots):
            if len(found) >= limit:
                break
            if reaches(root.branch):
                described = root.describe(root.start, now, reaches)
                described["dropped"] = root.dropped
                found.append(described)
        return found

    # ------------------------------------------------------------ inside

    def _parent(self, carrier: Mapping[str, str] | None) -> Span | None:
        if not carrier:
            return None
        named = carrier.get(CARRIER_KEY)
        return self._spans.get(named) if named else None

    def _keep_root(self, span: Span) -> None:
        if len(self._roots) == self._roots.maxlen:
            self._forget(self._roots[0])
        self._roots.append(span)

    def _forget(self, span: Span) -> None:
        self._spans.pop(span.id, None)
        for child in span.children:
            self._forget(child)

    def remember(self, span: Span) -> None:
        """``span`` may be named by an envelope made inside it, until it ends."""
        self._spans[span.id] = span


class _Turn:
    """One recorded turn (or ``Act``): its span current in the actor's task meanwhile."""

    __slots__ = ("_inner", "_own", "_recorder", "_span", "_token")

    def __init__(self, recorder: Recorder, span: Span | None, inner: Any, *, own: bool = True):
        self._recorder = recorder
        self._span = span if own else None
        self._inner = inner
        self._own = span
        self._token: contextvars.Token[Span | None] | None = (
            _CURRENT.set(span) if span is not None else None
        )

    def model_call(self, model: Any, request: Any, *, streaming: bool) -> _Call:
        inner = self._inner.model_call(model, request, streaming=streaming) if self._inner else None
        name = str(getattr(model, "model", "") or "model")
        detail = {"model": name, "streaming": streaming}
        return _Call(self._recorder, self._own, ("model", name), detail, inner)

    def tool_call(self, call: Any, description: str | None) -> _Call:
        inner = self._inner.tool_call(call, description) if self._inner else None
        arguments = _short(dict(getattr(call, "arguments", {}) or {}))
        what = ("tool", str(call.function))
        return _Call(self._recorder, self._own, what, {"arguments": arguments}, inner)

    def leave(self) -> None:
        if self._inner is not None:
            self._inner.leave()
        _restore(self)

    def end(self, failure: BaseException | None, cancelled: bool, usage: Any) -> None:
        try:
            span = self._span
            if span is not None:
                span.end = time.perf_counter()
                span.outcome = _outcome(failure, cancelled)
                if isinstance(failure, ApprovalRequired):  # it waits: not a failure
                    span.outcome = "suspended"
                else:
                    span.error = type(failure).__name__ if failure is not None else None
                span.detail.update(_usage(usage))
                self._recorder._spans.pop(span.id, None)  # no envelope names it any more
        except Exception:
            log.exception("the console could not record the end of a turn")
        finally:
            if self._inner is not None:
                self._inner.end(failure, cancelled, usage)
            _restore(self)


def _restore(turn: _Turn) -> None:
    token, turn._token = turn._token, None
    if token is not None:
        with contextlib.suppress(ValueError):  # ended in another task than it began in
            _CURRENT.reset(token)


class _Call:
    """One recorded model call or tool call, a context manager around it."""

    __slots__ = ("_inner", "_recorder", "_span", "_token")

    def __init__(
        self,
        recorder: Recorder,
        parent: Span | None,
        what: tuple[str, str],
        detail: dict[str, Any],
        inner: Any,
    ) -> None:
        kind, name = what
        self._recorder = recorder
        self._inner = inner
        self._token: contextvars.Token[Span | None] | None = None
        self._span: Span | None = None
        if parent is not None:
            span = Span(
                id=f"s{next(_IDS)}",
                kind=kind,
                name=name,
                branch=parent.branch,
                root=parent.root or parent,
                detail=detail,
            )
            if _adopt(parent, span):
                self._span = span

    def __enter__(self) -> _Call:
        span = self._span
        if span is not None:
            span.start = time.perf_counter()
            self._token = _CURRENT.set(span)
            if span.kind == "tool":
                self._recorder.remember(span)
        if self._inner is not None:
            self._inner.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        span = self._span
        if span is not None:
            span.end = time.perf_counter()
            cancelled = exc is not None and not isinstance(exc, Exception)
            span.outcome = _outcome(exc, cancelled)
            span.error = type(exc).__name__ if exc is not None else None
            self._recorder._spans.pop(span.id, None)
        token, self._token = self._token, None
        if token is not None:
            with contextlib.suppress(ValueError):
                _CURRENT.reset(token)
        if self._inner is not None:
            self._inner.__exit__(exc_type, exc, tb)

    def response(self, response: Any) -> None:
        if self._span is not None:
            self._span.detail.update(_usage(getattr(response, "usage", None)))
        if self._inner is not None:
            self._inner.response(response)

    def result(self, output: Any) -> None:
        if self._inner is not None:
            self._inner.result(output)


def _outcome(failure: BaseException | None, cancelled: bool) -> str:
    if failure is None:
        return "done"
    return "cancelled" if cancelled else "failed"


def _usage(usage: Any) -> dict[str, Any]:
    if usage is None:
        return {}
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
    }


def _short(arguments: dict[str, Any], limit: int = 200) -> str:
    """A tool's arguments as one line of at most ``limit`` characters (a waterfall row)."""
    text = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"
