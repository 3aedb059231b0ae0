"""Attempts with retries: the loop around one endpoint call, plain or streamed.

The policy (what is retried, how long to wait) is [`RetryPolicy`][pride.llm.RetryPolicy]; this
module only runs it. Sleeping is ``trio.sleep``, so cancellation ends a
backoff at once and ``MockClock`` drives it in tests.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

import trio

from pride.errors import ProviderError

from ._endpoint import Endpoint, Generated, Reported, StreamItem
from ._reading import Deadline, Exchange
from ._retry import RetryPolicy
from ._types import ModelRequest, ModelResponse

__all__ = ["OnRetry", "send_with_retries", "stream_with_retries"]

#: Called before each retry with the failure, the retry's number (from 1) and the delay.
OnRetry = Callable[[ProviderError, int, float], None]


def _delay(
    policy: RetryPolicy, retries: int, error: ProviderError, started: float, deadline: Deadline
) -> float | None:
    """The policy's delay before the next attempt, or ``None``: give up (the deadline included)."""
    now = trio.current_time()
    delay = policy.next_delay(retries, error, now - started)
    if delay is not None and now + delay >= deadline.at:
        return None  # the next attempt could not finish in time: the last failure says more
    return delay


async def send_with_retries(
    endpoint: Endpoint,
    request: ModelRequest,
    options: dict[str, Any],
    policy: RetryPolicy,
    *,
    on_retry: OnRetry,
    deadline: Deadline,
    exchange: Exchange | None = None,
) -> ModelResponse:
    """``endpoint.send``, repeated per ``policy`` while it fails retryably.

    No attempt starts, and no backoff sleeps, past ``deadline``. ``exchange``
    (one for all the attempts) says whether any request reached the provider.

    Raises:
        ProviderError: the last failure, once the policy (or the deadline) gives up.
    """
    started = trio.current_time()
    retries = 0
    while True:
        try:
            return await endpoint.send(request, options, deadline, exchange)
        except ProviderError as exc:
            # A bare raise: no local outlives this block holding the error, whose
            # traceback holds this frame (no reference cycle).
            delay = _delay(policy, retries, exc, started, deadline)
            if delay is None:
                raise
            retries += 1
            on_retry(exc, retries, delay)
        await trio.sleep(delay)


async def stream_with_retries(
    endpoint: Endpoint,
    request: ModelRequest,
    options: dict[str, Any],
    policy: RetryPolicy,
    *,
    on_retry: OnRetry,
    deadline: Deadline,
    exchange: Exchange | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """``endpoint.stream``, restarted per ``policy`` until its first delta went out.

    Yields the deltas (text, and reasoning pieces) and the generated pieces of
    tool calls' arguments, then the complete
    [`ModelResponse`][pride.llm.ModelResponse]. Once a
    delta (not a generated piece, which no consumer saw) has been yielded, a
    failure is raised as is: the caller has seen part of this reply, and a new
    attempt would produce a different one. No attempt starts past ``deadline``.
    ``exchange`` (one for all the attempts) says whether any request reached
    the provider.
    """
    started = trio.current_time()
    retries = 0
    while True:
        delivered = False
        try:
            async with aclosing(endpoint.stream(request, options, deadline, exchange)) as items:
                async for item in items:
                    if not isinstance(item, ModelResponse | Generated | Reported):
                        delivered = True
                    yield item
            return
        except ProviderError as exc:
            if delivered:
                raise
            delay = _delay(policy, retries, exc, started, deadline)
            if delay is None:
                raise
            retries += 1
            on_retry(exc, retries, delay)
        await trio.sleep(delay)
