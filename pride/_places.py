"""Places: at most ``limit`` of something at once, each waited for a while, then refused.

Three front doors bound what a client may hold: ``pride serve``'s turns
(``--max-concurrent``) and event streams (``--max-watchers``), and ``pride
mcp``'s tool calls and GET streams. Each waits a short while for a free place
and then refuses, in its own words (a 503, an MCP error result); `Places` is
the one place that wait and the giving back are kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import trio

__all__ = ["Places"]


class Places:
    """``limit`` places, each waited for at most ``wait`` seconds.

    Args:
        limit: how many may be held at once (at least 1).
        wait: seconds `take` waits for a place before it gives up.
    """

    __slots__ = ("_free", "limit", "wait")

    def __init__(self, limit: int, wait: float) -> None:
        self.limit = limit
        self.wait = wait
        self._free = trio.Semaphore(limit)

    @property
    def taken(self) -> int:
        """Places held now."""
        return self.limit - self._free.value

    async def take(self) -> bool:
        """Take a place, waiting at most ``wait`` seconds: True once taken (give it
        back with `give_back`), False when none came free (nothing is held).

        A free place is taken at once, whatever ``wait`` is: a ``wait`` of 0 means
        "a free place now, else refused", never "refused". Cancelled while it
        waits, it holds nothing.
        """
        try:
            self._free.acquire_nowait()
        except trio.WouldBlock:
            pass
        else:
            # A schedule point, as trio's own acquire makes, shielded: a cancel
            # arriving here must not leave a place taken that nobody gives back.
            await trio.lowlevel.cancel_shielded_checkpoint()
            return True
        # trio's acquire checks for cancellation before it takes even a free place,
        # so under a deadline already past (a wait of 0) it would refuse one; the
        # free place was taken above, and this waits only for one to come free.
        with trio.move_on_after(self.wait):
            await self._free.acquire()
            return True
        return False

    def give_back(self) -> None:
        """Give back a place `take` took.

        Raises:
            RuntimeError: more places given back than were taken (a place given
                back twice would let ``limit + 1`` in and make `taken` lie).
        """
        if self._free.value >= self.limit:
            raise RuntimeError(f"a place was given back that was not taken (all {self.limit} free)")
        self._free.release()

    @contextlib.asynccontextmanager
    async def held(self, refusal: Callable[[], BaseException]) -> AsyncIterator[None]:
        """Hold a place for the block.

        Raises:
            BaseException: ``refusal()``, when no place came free within ``wait``.
        """
        if not await self.take():
            raise refusal()
        try:
            yield
        finally:
            self.give_back()
