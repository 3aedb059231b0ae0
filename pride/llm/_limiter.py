"""Fair admission of model calls: requests and tokens per window, and concurrency.

Problem: providers enforce per-minute request and token quotas and punish
bursts with 429s; a process running many branches on one model must stay under
them without failing calls, and without letting a late caller overtake an
early one.

Options: a token bucket (smooth, but providers count per minute, so a bucket
sized to the quota still bursts into a 429 at a window edge); a sliding log
(exact, but memory per request); fixed windows whose counters reset every
``capacity_refresh_time`` seconds (what the reference system's replenisher
does, and how providers document their quotas).

Choice: fixed windows, refreshed lazily. A window opens at the first admission
after the previous one expired and lasts ``capacity_refresh_time`` seconds (60
by default). There is no background task: the caller at the head of the queue
sleeps until the window ends and then admits as many waiters as fit (or until
a call settles under its estimate and makes room before then). One FIFO
queue serves all constraints (window budget and ``concurrency_limit``), so
admission order is arrival order. Over the rate, a caller waits; it is never
failed. A request estimated larger than the whole token budget is admitted
alone in a fresh window (and logged) rather than waiting forever.

``queue_capacity`` is how many waiting calls count as queued; callers beyond it
wait, in the same order, for a place (``statistics().waiting_for_place``).

All waiting is ``trio.sleep_until`` and ``trio.Event``, so trio's
``MockClock`` drives it in tests.
"""

from __future__ import annotations

import logging
from collections import deque

import attrs
import trio

__all__ = ["LimiterStatistics", "RateLimiter"]

logger = logging.getLogger("pride.llm")


@attrs.frozen
class LimiterStatistics:
    """A snapshot of a [`RateLimiter`][pride.llm.RateLimiter].

    Attributes:
        queued: callers waiting for admission, up to ``queue_capacity``.
        waiting_for_place: further callers waiting for a place in the queue.
        in_flight: admitted callers that have not released yet.
        window_requests: requests admitted in the current window.
        window_tokens: tokens charged to the current window.
    """

    queued: int
    waiting_for_place: int
    in_flight: int
    window_requests: int
    window_tokens: int


@attrs.define(eq=False)
class _Waiter:
    tokens: int
    event: trio.Event = attrs.field(factory=trio.Event)
    admitted: bool = False


class RateLimiter:
    """FIFO admission under request, token and concurrency limits.

    Args:
        limit_requests: requests admitted per window; ``None`` for no limit.
        limit_tokens: estimated tokens admitted per window; ``None`` for no limit.
        capacity_refresh_time: window length in seconds.
        concurrency_limit: calls admitted at once; ``None`` for no limit.
        queue_capacity: waiting calls counted as queued (see module docs).

    Use ``await acquire(tokens)`` before a call and ``release()`` after it,
    whatever happened. State is per trio run: used from a new run, the limiter
    starts afresh (trio clocks of different runs are unrelated).
    """

    def __init__(
        self,
        *,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        capacity_refresh_time: float = 60.0,
        concurrency_limit: int | None = None,
        queue_capacity: int = 100,
    ) -> None:
        for name, value in (
            ("limit_requests", limit_requests),
            ("limit_tokens", limit_tokens),
            ("concurrency_limit", concurrency_limit),
        ):
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value!r}")
        if capacity_refresh_time <= 0:
            raise ValueError(f"capacity_refresh_time must be > 0, got {capacity_refresh_time!r}")
        if queue_capacity < 1:
            raise ValueError(f"queue_capacity must be >= 1, got {queue_capacity!r}")
        self.limit_requests = limit_requests
        self.limit_tokens = limit_tokens
        self.capacity_refresh_time = float(capacity_refresh_time)
        self.concurrency_limit = concurrency_limit
        self.queue_capacity = queue_capacity
        self._run: trio.lowlevel.TrioToken | None = None
        self._reset()

    @classmethod
    def when_limited(
        cls,
        *,
        limit_requests: int | None,
        limit_tokens: int | None,
        capacity_refresh_time: float,
        concurrency_limit: int | None,
        queue_capacity: int,
    ) -> RateLimiter | None:
        """A limiter for these limits, or ``None`` when none is set (no limiter is needed)."""
        if limit_requests is None and limit_tokens is None and concurrency_limit is None:
            return None
        return cls(
            limit_requests=limit_requests,
            limit_tokens=limit_tokens,
            capacity_refresh_time=capacity_refresh_time,
            concurrency_limit=concurrency_limit,
            queue_capacity=queue_capacity,
        )

    def _reset(self) -> None:
        # Invariant: every waiter in _queue is unadmitted; after any _pump() the
        # head is admitted, blocked by concurrency (a release will pump), or
        # blocked by the window (and nudged, so it sleeps until _window_end).
        self._queue: deque[_Waiter] = deque()
        self._in_flight = 0
        self._window_end: float | None = None
        self._window_requests = 0
        self._window_tokens = 0

    def _check_run(self) -> None:
        token = trio.lowlevel.current_trio_token()
        if token is not self._run:
            if self._queue:
                logger.warning(
                    "rate limiter: discarding %d waiters left by a finished trio run",
                    len(self._queue),
                )
            self._run = token
            self._reset()

    def _roll_window(self) -> None:
        if self._window_end is not None and trio.current_time() >= self._window_end:
            self._window_end = None
            self._window_requests = 0
            self._window_tokens = 0

    def _window_allows(self, tokens: int) -> bool:
        if self.limit_requests is not None and self._window_requests >= self.limit_requests:
            return False
        return not (
            self.limit_tokens is not None
            and self._window_tokens > 0
            and self._window_tokens + tokens > self.limit_tokens
        )

    def _concurrency_allows(self) -> bool:
        return self.concurrency_limit is None or self._in_flight < self.concurrency_limit

    def _admit(self, tokens: int) -> None:
        if self._window_end is None:
            self._window_end = trio.current_time() + self.capacity_refresh_time
        if self.limit_tokens is not None and tokens > self.limit_tokens:
            logger.warning(
                "rate limiter: a request estimated at %d tokens exceeds limit_tokens=%d; "
                "admitting it alone in a fresh window",
                tokens,
                self.limit_tokens,
            )
        self._window_requests += 1
        self._window_tokens += tokens
        self._in_flight += 1

    def _pump(self) -> None:
        """Admit waiters from the head while they fit; nudge a window-blocked head."""
        self._roll_window()
        queue = self._queue
        while queue:
            head = queue[0]
            if not self._concurrency_allows():
                return
            if not self._window_allows(head.tokens):
                head.event.set()
                return
            queue.popleft()
            self._admit(head.tokens)
            head.admitted = True
            head.event.set()

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until this call may run, in arrival order.

        Args:
            tokens: the call's estimated token cost, charged to the window.

        Cancellation: a cancelled waiter leaves the queue and the callers
        behind it move up; nothing is charged for it. Once this returns, the
        caller must call [`release`][pride.llm.RateLimiter.release] exactly once.
        """
        self._check_run()
        self._roll_window()
        if not self._queue and self._concurrency_allows() and self._window_allows(tokens):
            self._admit(tokens)
            try:
                await trio.lowlevel.checkpoint()
            except BaseException:
                self.release()
                raise
            return
        waiter = _Waiter(tokens)
        self._queue.append(waiter)
        try:
            while not waiter.admitted:
                window_end = self._window_end
                waiter.event = trio.Event()
                if (
                    self._queue[0] is waiter
                    and window_end is not None
                    and not self._window_allows(waiter.tokens)
                ):
                    # Until the window ends, or until a pump admits this waiter
                    # first (`settle` gave back part of an estimate): it must
                    # not sleep on past its admission, holding its place.
                    with trio.move_on_at(window_end) as ended:
                        await waiter.event.wait()
                    if ended.cancelled_caught:
                        self._pump()
                    continue
                await waiter.event.wait()
        except BaseException:
            if waiter.admitted:
                self.release()
            else:
                self._queue.remove(waiter)
                self._pump()
            raise

    def release(self) -> None:
        """End an admitted call: free its concurrency slot and admit waiters."""
        if self._in_flight > 0:
            self._in_flight -= 1
        self._pump()

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the current window by the difference between estimate and usage."""
        if self.limit_tokens is None or actual == estimated:
            return
        self._window_tokens = max(0, self._window_tokens + actual - estimated)
        if actual < estimated:
            self._pump()

    def statistics(self) -> LimiterStatistics:
        """A snapshot of the queue, in-flight calls and the current window."""
        waiting = len(self._queue)
        queued = min(waiting, self.queue_capacity)
        return LimiterStatistics(
            queued=queued,
            waiting_for_place=waiting - queued,
            in_flight=self._in_flight,
            window_requests=self._window_requests,
            window_tokens=self._window_tokens,
        )
