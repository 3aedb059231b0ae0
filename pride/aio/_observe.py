"""Signals handed from the trio side to handlers that run on the asyncio side.

``team.observe(RunEnd, handler=h)`` subscribes a forwarder to the session's
observer. The forwarder runs inside trio's dispatch (synchronously, so a turn
never waits for it) and only appends the signal to the subscription's queue;
a consumer task on the loop takes the signals in order and calls the handler
there, a plain function or a coroutine function alike. A slow handler slows
only its own queue, which is bounded (`MAX_PENDING`): past the bound a signal
is dropped and counted, and the drops are logged, never silent. A raising
handler is logged and the next signal still comes.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..messages import Signal

if TYPE_CHECKING:
    from ._guest import Guest

__all__ = ["DRAIN_GRACE", "MAX_PENDING", "Subscriber"]

log = logging.getLogger("pride.aio")

MAX_PENDING = 10_000
"""Signals a subscription holds for its handler; past that, new ones are dropped."""

DRAIN_GRACE = 5.0
"""Seconds a closing team gives its handlers to take the signals still queued."""


class Subscriber:
    """One ``observe`` subscription: the queue between trio's dispatch and the handler."""

    def __init__(self, guest: Guest, handler: Callable[[Signal], Any]) -> None:
        self.handler = handler
        self._guest = guest
        self._queue: collections.deque[Signal] = collections.deque()
        self._ready = asyncio.Event()
        self._ending = False
        self.dropped = 0
        self.task: asyncio.Task[None] = guest.loop.create_task(
            self._consume(), name=f"pride.aio observer {getattr(handler, '__name__', handler)!r}"
        )

    def forward(self, signal: Signal) -> None:
        """Queue ``signal`` for the handler (called by the trio observer; never blocks)."""
        if self._ending:
            return
        if len(self._queue) >= MAX_PENDING:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning(
                    "observer handler %r is %d signals behind: dropped %d so far (%s)",
                    self.handler,
                    MAX_PENDING,
                    self.dropped,
                    type(signal).__name__,
                )
            return
        self._queue.append(signal)
        self._ready.set()
        self._guest.after_call()

    def end(self) -> None:
        """Take no more signals; the consumer stops once it has handled the queued ones."""
        self._ending = True
        self._ready.set()

    async def drain(self, grace: float = DRAIN_GRACE) -> None:
        """End, and wait up to ``grace`` seconds for the queued signals to be handled;
        then stop the consumer (what was left is logged).

        Called by the handler itself (it closes the team), it only ends: the
        consumer is the task running it, and it stops once it has handled
        the signals still queued, after the handler returns.

        Cancellation: the consumer is stopped and waited for; then the
        cancellation is raised.
        """
        self.end()
        if asyncio.current_task() is self.task:
            return
        try:
            await asyncio.wait((self.task,), timeout=grace)
        finally:
            if not self.task.done():
                log.warning(
                    "observer handler %r did not take its last %d signals within %ss",
                    self.handler,
                    len(self._queue),
                    grace,
                )
                self.task.cancel()
                await asyncio.wait((self.task,))

    async def _consume(self) -> None:
        queue = self._queue
        while True:
            while not queue:
                if self._ending:
                    return
                self._ready.clear()
                await self._ready.wait()
            signal = queue.popleft()
            try:
                result = self.handler(signal)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception(
                    "observer handler %r failed on %s", self.handler, type(signal).__name__
                )
