"""When to repeat a failed model call, and how long to wait first.

Problem: providers shed load with 429 and 5xx answers, and networks drop
connections; a long-running agent should ride that out, but must not hammer a
provider, retry a request the provider rejected as wrong, or wait forever.

Options: a fixed delay (hammers a provider that is already overloaded);
exponential backoff without jitter (callers that failed together retry
together); exponential backoff with jitter and a cap, honouring the provider's
``Retry-After`` (what the OpenAI and Anthropic SDKs and the reference system do).

Choice: the last, with the reference system's numbers (1 s doubling, capped at
60 s, 20 % jitter) and a total deadline (300 s, the reference's timeout) after
which no new attempt starts. Retried: 429, 5xx, 408, transport errors and
timeouts. Never retried: other 4xx, authentication failures, unreadable
replies, an exhausted script.
"""

from __future__ import annotations

import random
from typing import Any

import attrs

from pride.errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
)

__all__ = ["RETRYABLE", "RetryNotice", "RetryPolicy"]

#: The provider errors worth another attempt.
RETRYABLE = (RateLimited, ServerError, ProviderConnectionError, ProviderTimeout)

_random = random.Random()


def _non_negative(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class RetryPolicy:
    """Exponential backoff with jitter, honouring ``Retry-After``.

    Attributes:
        max_retries: attempts after the first (0 disables retrying).
        base_delay: seconds before the first retry.
        max_delay: cap on a computed backoff delay, in seconds.
        backoff_factor: multiplier per retry (delay ``n`` is
            ``base_delay * backoff_factor ** n``).
        jitter: fraction of random spread applied to a computed delay
            (0.2 means ±20 %); 0 makes delays deterministic.
        deadline: seconds from the first attempt after which no retry starts;
            ``None`` for no deadline. It bounds retrying, not an attempt in
            progress: bound that with the model's ``timeout`` or a cancel scope.

    A provider's ``Retry-After`` replaces the computed delay (it is honoured
    even above ``max_delay``); if it would end past the deadline, the error is
    raised at once instead.
    """

    max_retries: int = attrs.field(default=3, validator=_non_negative)
    base_delay: float = attrs.field(default=1.0, validator=_non_negative)
    max_delay: float = attrs.field(default=60.0, validator=_non_negative)
    backoff_factor: float = attrs.field(default=2.0, validator=_non_negative)
    jitter: float = attrs.field(default=0.2, validator=_non_negative)
    deadline: float | None = 300.0

    @classmethod
    def never(cls) -> RetryPolicy:
        """A policy that makes exactly one attempt."""
        return cls(max_retries=0)

    def next_delay(self, retries_done: int, error: BaseException, elapsed: float) -> float | None:
        """Seconds to sleep before the next attempt, or ``None`` to give up.

        Args:
            retries_done: retries already made for this call.
            error: the failure of the attempt that just ended.
            elapsed: seconds since the first attempt started.
        """
        if retries_done >= self.max_retries or not isinstance(error, RETRYABLE):
            return None
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            delay = float(retry_after)
        else:
            delay = min(self.max_delay, self.base_delay * self.backoff_factor**retries_done)
            if self.jitter:
                spread = min(self.jitter, 1.0)
                delay *= _random.uniform(1.0 - spread, 1.0 + spread)
                delay = min(delay, self.max_delay)
        if self.deadline is not None and elapsed + delay > self.deadline:
            return None
        return delay


@attrs.frozen
class RetryNotice:
    """What a model tells its ``on_retry`` callback before it waits to retry a call.

    Attributes:
        provider: the provider name.
        model: the model name.
        url: the endpoint URL (no credentials), or ``None`` for a scripted model.
        error: the failure of the attempt that just ended.
        status: its HTTP status, when it had one.
        retry: the number of the retry about to be made (from 1).
        max_retries: the policy's ``max_retries``.
        delay: seconds until that retry starts.
    """

    provider: str
    model: str
    url: str | None
    error: ProviderError
    status: int | None
    retry: int
    max_retries: int
    delay: float

    @property
    def message(self) -> str:
        """One line for a person: what failed, where, and when the retry comes."""
        error = self.error
        if self.status is not None:
            said = (error.provider_message or "")[:80]
            what = f"HTTP {self.status}" + (f" ({said})" if said else "")
        elif isinstance(error, ProviderTimeout):
            what = "no answer in time"
        elif isinstance(error, ProviderConnectionError):
            what = "connection failed"
        else:
            what = type(error).__name__
        where = f" from {self.url}" if self.url else ""
        return (
            f"{self.provider}/{self.model}: {what}{where}; retry {self.retry} of "
            f"{self.max_retries} in {self.delay:.1f} s"
        )
