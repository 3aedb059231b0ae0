"""CallLedger: admission and accounting of one model's calls.

Every call of an [`iModel`][pride.iModel], plain or streamed, is admitted
here first (the rate limiter, when the model has limits) and settled here
last (counters, summed usage, the limiter's window correction). Keeping both
ends in one object is what lets [`ModelStream`][pride.llm.ModelStream] run a call
without knowing the model that made it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pride.messages import Usage

from . import _tokens
from ._limiter import RateLimiter
from ._listen import notify_listeners
from ._retry import RetryNotice
from ._types import ModelRequest, ModelStatistics

__all__ = ["CallLedger"]

logger = logging.getLogger("pride.llm")


class CallLedger:
    """The counters and the limiter of one model.

    Args:
        limiter: the model's rate limiter, or ``None`` when it has no limits.
    """

    def __init__(self, limiter: RateLimiter | None) -> None:
        self.limiter = limiter
        self.calls = 0
        self.retries = 0
        self.failures = 0
        self.unsent = 0  # calls whose request never reached the provider
        self.in_flight = 0
        # Running usage totals, kept as plain numbers (a Usage per call is garbage).
        self._usage_totals = [0, 0, 0, 0, 0]
        self._cost_total: float | None = None

    async def admit(self, request: ModelRequest) -> int:
        """Count the call and wait for the limiter; returns the token estimate.

        Every admitted call must be settled with `settle`, exactly once.

        Cancellation: a call waiting for admission leaves the queue and is not
        admitted (nothing to settle); it is counted ``unsent``.
        """
        self.calls += 1
        limiter = self.limiter
        estimate = 0
        if limiter is not None:
            try:
                if limiter.limit_tokens is not None:
                    estimate = _tokens.estimate_request_tokens(request)
                await limiter.acquire(estimate)
            except BaseException:
                self.unsent += 1
                raise
            if limiter.limit_tokens is not None and not _tokens.encoding_tried():
                # After admission, so loading never reorders the FIFO queue.
                try:
                    await _tokens.load_encoding()
                except BaseException:
                    limiter.release()
                    self.unsent += 1
                    raise
        self.in_flight += 1
        return estimate

    def settle(self, estimate: int, usage: Usage | None, *, failed: bool) -> None:
        """Account for the end of an admitted call and free its place: ``usage``
        is what it spent (a stream left early: an estimate), None if its request
        never reached the provider (counted ``unsent``)."""
        self.in_flight -= 1
        if failed:
            self.failures += 1
        if usage is None:
            self.unsent += 1
        limiter = self.limiter
        if usage is not None:
            totals = self._usage_totals
            totals[0] += usage.input_tokens
            totals[1] += usage.output_tokens
            totals[2] += usage.cached_tokens
            totals[3] += usage.cache_write_tokens
            totals[4] += usage.reasoning_tokens
            if usage.cost_usd is not None:
                self._cost_total = (self._cost_total or 0.0) + usage.cost_usd
            if limiter is not None:
                limiter.settle(estimate, usage.total_tokens)
        if limiter is not None:
            limiter.release()

    def record_retry(
        self, notice: RetryNotice, observer: Callable[[RetryNotice], None] | None
    ) -> None:
        r"""Count a retry, log it (``pride.llm``, INFO) and tell ``observer`` and the
        calling context's [`retry_listener`][pride.llm.retry_listener]\ s.

        An exception raised by ``observer`` is logged and dropped: observing a
        call must not break it.
        """
        self.retries += 1
        logger.info("%s: %s", notice.message, notice.error)
        notify_listeners(notice)
        if observer is None:
            return
        try:
            observer(notice)
        except Exception:
            logger.exception("%s/%s: the on_retry callback failed", notice.provider, notice.model)

    def statistics(self) -> ModelStatistics:
        """A snapshot of the counters and summed usage."""
        queued = 0
        if self.limiter is not None:
            stats = self.limiter.statistics()
            queued = stats.queued + stats.waiting_for_place
        return ModelStatistics(
            calls=self.calls,
            retries=self.retries,
            failures=self.failures,
            queued=queued,
            in_flight=self.in_flight,
            unsent=self.unsent,
            usage=Usage(
                input_tokens=self._usage_totals[0],
                output_tokens=self._usage_totals[1],
                cached_tokens=self._usage_totals[2],
                cost_usd=self._cost_total,
                cache_write_tokens=self._usage_totals[3],
                reasoning_tokens=self._usage_totals[4],
            ),
        )
