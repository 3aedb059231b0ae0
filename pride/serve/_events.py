"""``GET /v1/events``: the tree's signals as server-sent events, as they happen.

Each event is named after its signal class (``RunStart``, ``RunEnd``,
``ApprovalRequested``, ``ToolProgress``, ``BranchStopped``, ...) and its
data is the signal in the codec's wire form (its ``type`` field names the
class too). By default: lifecycle (``BranchStarted``, ``BranchStopped``,
``BranchRestarted``, ``SessionFailed``), turns (``RunStart``, ``RunEnd``
with its usage, ``RunFailed``), approvals (``ApprovalRequested``) and tool
progress (``ToolProgress``). ``?types=RunEnd,MessageAdded`` picks signal
classes instead (``MessageAdded`` is never sent unless asked for: a branch
builds it for every message only while someone listens); ``?branch=a,b``
keeps the signals of those branches. A token sees only the branches it
reaches (and the session-wide ``SessionFailed`` only if it reaches all).

The subscription is made before the answer's first byte, so a client that
has the response headers misses nothing from then on. Each stream holds at
most `BUFFER` signals for a slow reader; past that they are dropped, and a
``dropped`` event says how many (never silently). The stream ends when the
server begins draining. A stream holds a place of ``--max-watchers``, never one of
``--max-concurrent``'s: idle watchers cannot starve turns, nor turns watchers.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from .. import messages as _messages
from ..errors import InvalidMessage
from ..messages import (
    ApprovalRequested,
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    RunEnd,
    RunFailed,
    RunStart,
    SessionFailed,
    Signal,
    ToolProgress,
)
from ..messages.requests import plain_result
from ._app import Front
from ._auth import Grant
from ._http import KEEPALIVE_COMMENT, SSE_HEADERS, Request, encode_sse, watch_disconnect

__all__ = ["BUFFER", "DEFAULT_SIGNALS", "events"]

log = logging.getLogger("pride.serve")

BUFFER = 1000
"""Signals one event stream holds for a reader that is behind; more are dropped (and counted)."""

DEFAULT_SIGNALS: tuple[type[Signal], ...] = (
    BranchStarted,
    BranchStopped,
    BranchRestarted,
    SessionFailed,
    RunStart,
    RunEnd,
    RunFailed,
    ApprovalRequested,
    ToolProgress,
)


def _signal_classes(request: Request) -> tuple[type[Signal], ...]:
    raw = request.query.get("types")
    if not raw:
        return DEFAULT_SIGNALS
    found = []
    for name in raw.split(","):
        cls = getattr(_messages, name.strip(), None)
        if not (isinstance(cls, type) and issubclass(cls, Signal)):
            raise InvalidMessage([("query.types", f"{name.strip()!r} is not a pride signal")])
        found.append(cls)
    return tuple(found)


async def events(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/events``: stream the tree's signals (see the module docstring)."""
    classes = _signal_classes(request)
    names = {n.strip() for n in request.query.get("branch", "").split(",") if n.strip()}
    clones = front.clones
    sender, receiver = trio.open_memory_channel[Signal](BUFFER)
    dropped = 0

    def keep(signal: Signal) -> None:
        nonlocal dropped
        name = signal.branch_name
        if name is None:
            if grant.scopes or names:
                return
        elif signal.branch_id in clones or not grant.reaches(name) or (names and name not in names):
            return
        try:
            sender.send_nowait(signal)
        except trio.WouldBlock:
            dropped += 1

    assert front.nursery is not None
    async with front.watcher():
        front.session.observe(*classes, handler=keep)
        try:
            with watch_disconnect(request, front.nursery):
                await request.send(
                    {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
                )
                await _write(front, request, receiver, lambda: dropped)
        finally:
            front.session.unobserve(keep)
            sender.close()
    if dropped:
        log.warning("an event stream fell behind: %d signals were dropped", dropped)


async def _write(front: Front, request: Request, receiver: Any, dropped: Any) -> None:
    send = request.send
    reported = 0

    async def body(data: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    stop, watcher = trio.CancelScope(), trio.CancelScope()
    assert front.nursery is not None
    front.nursery.start_soon(_stop_on_drain, front.drained, stop, watcher)
    try:
        with stop:
            await body(KEEPALIVE_COMMENT)
            while True:
                with trio.move_on_after(front.options.keepalive) as idle:
                    signal = await receiver.receive()
                if idle.cancelled_caught:
                    await body(KEEPALIVE_COMMENT)
                    continue
                missed = dropped() - reported
                if missed:
                    reported += missed
                    await body(encode_sse("dropped", {"type": "dropped", "count": missed}))
                await body(encode_sse(type(signal).__name__, plain_result(signal)))
    finally:
        watcher.cancel()
    await body(b"", more=False)  # the server drains: the stream ends cleanly


async def _stop_on_drain(
    drained: trio.Event, stop: trio.CancelScope, watcher: trio.CancelScope
) -> None:
    with watcher:
        await drained.wait()
        stop.cancel()
