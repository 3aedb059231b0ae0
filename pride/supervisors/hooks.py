"""Hook points: named places where a session's code runs inside its branches' work.

The observer *watches* (signals, after the fact); hooks *take part*: they run
at fixed points of a turn and of the supervision lifecycle, with a payload
mapping naming what is happening. A session owns one [`HookBus`][pride.supervisors.HookBus] and
attaches it to its branches; the branch calls
[`HookBus.emit`][pride.supervisors.hooks.HookBus.emit].

==================== ======================================================
point                payload keys; when
==================== ======================================================
before_model_call    branch, model, request; before each model call
after_model_call     branch, model, response; after a successful call
model_stream_chunk   branch, chunk; each streamed text delta
before_tool_call     branch, call; before each tool call — **blocking**
after_tool_call      branch, outcome; after a successful tool call
tool_call_error      branch, outcome; after a failed tool call
message_added        branch, message; a message was recorded
branch_start         session, branch, restart; a child's actor started
branch_stop          session, branch, reason, error; a child's actor stopped
branch_restart       session, branch, cause; a child is being restarted
session_start        session; the session started serving
session_stop         session; a stop finished (a failure fires session_failed)
session_failed       session, cause; restart intensity was exceeded
==================== ======================================================

``before_tool_call`` is blocking: its handlers run in registration order and
the first one that raises denies the call (the tool is not run; the turn
records an error ``ActionResponse`` the model can read). A handler that
returns (or raises) [`pride.Defer(reason)`][pride.Defer] defers the call
instead: it waits for a person's approval, as a tool declared
``requires_approval=True`` does (docs/durability.md). At every other
point a raising handler is logged to ``pride.hooks`` and the remaining
handlers still run. [`Escalate`][pride.Escalate] is never swallowed: raised by a
synchronous handler (or an awaited point's async one) it propagates, so a
hook can hand a branch to its supervisor like an operation or a tool can.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, overload

from ..errors import Defer, Escalate

__all__ = ["BLOCKING_POINTS", "HOOK_POINTS", "HookBus", "HookHandler"]

log = logging.getLogger("pride.hooks")

HOOK_POINTS: frozenset[str] = frozenset(
    {
        "before_model_call",
        "after_model_call",
        "model_stream_chunk",
        "before_tool_call",
        "after_tool_call",
        "tool_call_error",
        "message_added",
        "branch_start",
        "branch_stop",
        "branch_restart",
        "session_start",
        "session_stop",
        "session_failed",
    }
)
"""Every hook point a [`HookBus`][pride.supervisors.HookBus] knows."""

BLOCKING_POINTS: frozenset[str] = frozenset({"before_tool_call"})
"""Points whose handler exceptions propagate (and so deny the action)."""

HookHandler = Callable[[Mapping[str, Any]], Any]
"""``handler(payload)``, sync or async."""

_H = TypeVar("_H", bound=HookHandler)


def _check_point(point: str) -> None:
    if point not in HOOK_POINTS:
        raise ValueError(
            f"unknown hook point {point!r}; known points: {', '.join(sorted(HOOK_POINTS))}"
        )


class HookBus:
    """Handlers per named hook point, run in registration order.

    Usage:

    ```python
    hooks = session.hooks

    @hooks.on("before_tool_call")
    def guard(payload):
        if payload["call"].function == "rm":
            raise PermissionError("no deleting")
    ```
    """

    __slots__ = ("_handlers", "active")

    def __init__(self) -> None:
        # Copy-on-write tuples: emit iterates a snapshot.
        self._handlers: dict[str, tuple[HookHandler, ...]] = {}
        self.active = False
        """Whether any handler is registered: a plain attribute, so a branch asks
        before every model call and recorded message without a call."""

    def __repr__(self) -> str:
        return f"<HookBus {len(self)} handlers>"

    def __len__(self) -> int:
        """Handlers registered, over every point (a bus without any is falsy:
        branches then skip building hook payloads)."""
        return sum(len(handlers) for handlers in self._handlers.values())

    def __bool__(self) -> bool:
        """Whether any handler is registered (`active`)."""
        return self.active

    @overload
    def on(self, point: str, handler: None = None) -> Callable[[_H], _H]: ...

    @overload
    def on(self, point: str, handler: _H) -> _H: ...

    def on(self, point: str, handler: HookHandler | None = None) -> Any:
        """Run ``handler(payload)`` at ``point``; without a handler, a decorator.

        Returns:
            ``handler``.

        Raises:
            ValueError: ``point`` is not a known hook point.
            TypeError: ``handler`` is not callable.
        """
        _check_point(point)

        def register(function: _H) -> _H:
            if not callable(function):
                raise TypeError(f"hook handler must be callable, got {function!r}")
            self._handlers[point] = (*self._handlers.get(point, ()), function)
            self.active = True
            return function

        if handler is None:
            return register
        return register(handler)

    def off(self, point: str, handler: HookHandler) -> bool:
        """Remove ``handler`` from ``point``; True if it was registered.

        Raises:
            ValueError: ``point`` is not a known hook point.
        """
        _check_point(point)
        handlers = self._handlers.get(point, ())
        kept = tuple(h for h in handlers if h != handler)
        if kept:
            self._handlers[point] = kept
        else:
            self._handlers.pop(point, None)
            self.active = bool(self._handlers)
        return len(kept) != len(handlers)

    @property
    def intercepts_tools(self) -> bool:
        """True when ``before_tool_call`` has handlers (one may defer a call for
        approval, so the branches keep a turn journal even without a store)."""
        return "before_tool_call" in self._handlers

    def handlers(self, point: str) -> tuple[HookHandler, ...]:
        """The handlers registered at ``point``, in order.

        Raises:
            ValueError: ``point`` is not a known hook point.
        """
        _check_point(point)
        return self._handlers.get(point, ())

    def emit(self, point: str, payload: Mapping[str, Any]) -> Awaitable[None] | None:
        """Run ``point``'s handlers with ``payload``, in registration order.

        Synchronous handlers run now until the first one returns an
        awaitable; from there the rest run, still in order, in the awaitable
        this returns. Returns None when everything already ran.

        Raises:
            ValueError: ``point`` is not a known hook point.
            Exception: at a blocking point, the first handler's exception (from
                here or from the returned awaitable): the action is denied.
            Escalate: a handler escalated, at any point.
        """
        handlers = self._handlers.get(point)
        if handlers is None:
            _check_point(point)
            return None
        blocking = point in BLOCKING_POINTS
        for index, handler in enumerate(handlers):
            try:
                result = handler(payload)
            except Escalate:
                raise
            except Exception as exc:
                _failed(point, blocking, handler, exc)
                continue
            if result is not None and inspect.isawaitable(result):
                rest = handlers[index + 1 :]
                return _finish(point, blocking, (handler, result), rest, payload)
            if blocking and isinstance(result, Defer):
                raise result
        return None


def _failed(point: str, blocking: bool, handler: HookHandler, error: Exception) -> None:
    """A handler at ``point`` raised ``error`` (never an Escalate, which always goes
    up): at a blocking point it denies the action, so it is raised; anywhere else
    it is logged and the next handler runs."""
    if blocking:
        raise error
    log.error("hook %r at %s failed", handler, point, exc_info=error)


async def _finish(
    point: str,
    blocking: bool,
    first: tuple[HookHandler, Awaitable[Any]],
    rest: tuple[HookHandler, ...],
    payload: Mapping[str, Any],
) -> None:
    """Await the first awaitable and run ``rest`` in order, isolating failures unless blocking."""
    handler, awaitable = first
    try:
        result = await awaitable
    except Escalate:
        raise
    except Exception as exc:
        _failed(point, blocking, handler, exc)
    else:
        if blocking and isinstance(result, Defer):
            raise result
    for following in rest:
        try:
            result = following(payload)
            if result is not None and inspect.isawaitable(result):
                result = await result
            if blocking and isinstance(result, Defer):
                raise result
        except Escalate:
            raise
        except Exception as exc:
            _failed(point, blocking, following, exc)
