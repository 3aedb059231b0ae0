"""Streaming a flow: its node signals (and, on request, its nodes' items) as they happen.

```python
async with session.flow_stream(flow) as events:
    async for event in events:
        print(type(event).__name__, event.node)
result = events.result
```

The flow runs in a task of the ``async with`` block, and nowhere else: leaving
the block early (``break``, an exception, cancellation) cancels it the way
cancelling [`Session.flow`][pride.supervisors.session.Session.flow] would, and
the block's exit waits for the running nodes' turns to finalise. Node signals are buffered without
bound (a run has at most its nodes' worth of them, two per node); streamed
items are handed over with backpressure, a few at a time, so a slow consumer
slows the streaming turns instead of piling their output up.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import attrs
import trio

from ..errors import one_exception
from ..messages import NodeSignal, Signal
from .result import FlowResult
from .run import FlowRun

__all__ = ["ITEM_BUFFER", "FlowEvents", "NodeItem", "open_flow_stream"]

log = logging.getLogger("pride.flows")

ITEM_BUFFER = 8
"""Streamed items that may wait for the consumer before the streaming turns wait too."""


@attrs.frozen
class NodeItem:
    """One item a node's streaming turn produced (``flow_stream(..., items=True)``).

    Only nodes whose command streams (``Run``, ``ReActStream``) produce them;
    the node's result is then the list of its items.

    Attributes:
        node: the node's name.
        item: what the turn yielded (a message, an ``OperateResult``, ...).
    """

    node: str
    item: Any


class FlowEvents:
    """What ``flow_stream`` yields: iterate it for the run's events, in order.

    Each event is a node signal ([`NodeStarted`][pride.NodeStarted],
    [`NodeCompleted`][pride.NodeCompleted], ...) or, with ``items=True``, a
    `NodeItem`. The same signals go through the session's observer.

    Attributes:
        run: the [`FlowRun`][pride.flows.FlowRun] (``events.run.add(...)``
            grows it from the consumer's side).
        result: the [`FlowResult`][pride.FlowResult] once the run has ended
            (after the last event, or after leaving the block early); None
            before.
    """

    def __init__(self, run: FlowRun, receive: trio.MemoryReceiveChannel[Any]) -> None:
        self.run = run
        self.result: FlowResult | None = None
        self._receive = receive
        self._room = trio.Semaphore(ITEM_BUFFER)
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"<FlowEvents of {self.run!r}>"

    def __aiter__(self) -> FlowEvents:
        return self

    async def __anext__(self) -> NodeSignal | NodeItem:
        try:
            event = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            error, self._error = self._error, None
            if error is None:
                raise StopAsyncIteration from None
            # The error's traceback holds this frame: let go of it here, or the two
            # keep each other (and the run's frames) alive until a collection.
            try:
                raise error from None
            finally:
                del error
        if isinstance(event, NodeItem):
            self._room.release()
        return event  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def open_flow_stream(run: FlowRun) -> AsyncIterator[FlowEvents]:
    """Run ``run`` while the block iterates its events (see the module docstring).

    Raises:
        Exception: an error of the runner itself (never a node's: those are
            outcomes), from the ``async for`` after the last event.
    """
    send_channel, receive_channel = trio.open_memory_channel[Any](math.inf)
    events = FlowEvents(run, receive_channel)

    def on_signal(signal: Signal) -> None:
        # Once the consumer has left, the observer still has every signal.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            send_channel.send_nowait(signal)

    async def on_item(node: str, item: Any) -> None:
        await events._room.acquire()
        try:
            send_channel.send_nowait(NodeItem(node, item))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            events._room.release()

    run.signals.listeners.append(on_signal)
    if run.items:
        run.item_sink = on_item
    stopped_here = trio.CancelScope()

    async def drive() -> None:
        try:
            with stopped_here:
                events.result = await run.run()
            if events.result is None:  # stopped by leaving the block: the outcomes stand
                events.result = run.result()
        except Exception as exc:
            events._error = exc
        finally:
            send_channel.close()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive, name=f"flow stream {run.name or run.flow_id}")
            try:
                yield events
            finally:
                stopped_here.cancel()  # a no-op once the run has ended
    except BaseExceptionGroup as group:  # the block's own error, never a group
        chosen = one_exception(group, log, "while streaming a flow")
        raise chosen from chosen.__cause__
    finally:
        receive_channel.close()
