"""Progress of a running tool call: how a tool says how far it has got.

A long tool (a download, a build, an MCP call that streams progress) calls
`report_progress` while it runs. The `ActionManager` that runs
the call binds a *progress sink* for it (a context variable, so the binding
follows the call into the tasks it starts and into a sync tool's worker
thread); inside a branch's turn that sink emits a
`ToolProgress` signal to the observer and, for a
streaming verb, an item to the ``pride.stream`` consumer. Outside a call,
or when nobody listens, reporting is a cheap no-op.

The arguments are checked here, once, for every kind of tool: a plain tool
and an MCP server's progress notification (bytes from another process)
reach observers in the same validated shape.
"""

from __future__ import annotations

import contextvars
import inspect
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

import attrs
import trio

from ..messages.commands import ActionCall

__all__ = ["MAX_PROGRESS_MESSAGE", "ProgressSink", "bind_progress", "report_progress"]

MAX_PROGRESS_MESSAGE = 1_000
"""Characters of a progress message kept; a longer one is cut, with a marker."""

ProgressSink: TypeAlias = Callable[
    [ActionCall, float, "float | None", "str | None"], "Awaitable[None] | None"
]
"""Receives ``(call, progress, total, message)`` for each report of a call."""


@attrs.frozen
class _Reporting:
    call: ActionCall
    sink: ProgressSink


_current: contextvars.ContextVar[_Reporting | None] = contextvars.ContextVar(
    "pride_tool_progress", default=None
)


def bind_progress(call: ActionCall, sink: ProgressSink) -> contextvars.Token[_Reporting | None]:
    """Bind ``sink`` for the tool call ``call`` in the current context; reset with the token."""
    return _current.set(_Reporting(call, sink))


def unbind_progress(token: contextvars.Token[_Reporting | None]) -> None:
    """Undo `bind_progress`."""
    _current.reset(token)


async def report_progress(
    progress: float, total: float | None = None, message: str | None = None
) -> bool:
    """Report how far the calling tool has got.

    Usage:

    ```python
    from pride.tools import report_progress, tool

    @tool
    async def crawl(urls: list[str]) -> int:
        for done, url in enumerate(urls, 1):
            await fetch(url)
            await report_progress(done, total=len(urls), message=url)
        return len(urls)
    ```

    A sync tool (which runs in a worker thread) reports with
    ``trio.from_thread.run(report_progress, done, total)``.

    Args:
        progress: how far it has got, in any unit; it should increase with
            each report.
        total: the value ``progress`` reaches at the end, if known.
        message: a short human-readable note (cut at
            1,000 characters).

    Returns:
        True if the report went to a sink (the call is run by an action
        manager that listens); False when called outside a tool call.

    Raises:
        ValueError: ``progress`` or ``total`` is not a finite number, or
            ``message`` is not a string.

    Cancellation: a checkpoint; a streaming consumer that is slow to take
    the item holds the tool here (backpressure), like any streamed item.
    """
    progress, total, message = check_progress(progress, total, message)
    reporting = _current.get()
    if reporting is None:
        await trio.lowlevel.checkpoint()
        return False
    pending = reporting.sink(reporting.call, progress, total, message)
    if inspect.isawaitable(pending):
        await pending
    else:
        await trio.lowlevel.checkpoint()
    return True


def check_progress(
    progress: Any, total: Any = None, message: Any = None
) -> tuple[float, float | None, str | None]:
    """Validate one report; return it normalised (floats, a bounded message).

    Raises:
        ValueError: naming the bad argument.
    """
    progress = _finite("progress", progress)
    total = None if total is None else _finite("total", total)
    if message is not None:
        if not isinstance(message, str):
            raise ValueError(f"progress message must be a string, got {type(message).__name__}")
        if len(message) > MAX_PROGRESS_MESSAGE:
            message = message[:MAX_PROGRESS_MESSAGE] + "… (cut)"
    return progress, total, message


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)
