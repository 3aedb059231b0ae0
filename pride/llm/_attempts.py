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

from ._endpoint import Endpoint
from ._retry import RetryPolicy
from ._types import ModelRequest, ModelResponse

__all__ = ["OnRetry", "send_with_retries", "stream_with_retries"]

#: Called before each retry with the failure, the retry's number (from 1) and the delay.
OnRetry = Callable[[ProviderError, int, float], None]


async def send_with_retries(
    endpoint: Endpoint,
    request: ModelRequest,
    options: dict[str, Any],
    policy: RetryPolicy,
    on_retry: OnRetry,
) -> ModelResponse:
    """``endpoint.send``, repeated per ``policy`` while it fails retryably.

    Raises:
        ProviderError: the last failure, once the policy gives up.
    """
    started = trio.current_time()
    try:
        return await endpoint.send(request, options)  # the common case: no bookkeeping
    except ProviderError as exc:
        error = exc
    retries = 0
    while True:
        delay = policy.next_delay(retries, error, trio.current_time() - started)
        if delay is None:
            raise error
        retries += 1
        on_retry(error, retries, delay)
        await trio.sleep(delay)
        try:
            return await endpoint.send(request, options)
        except ProviderError as exc:
            error = exc


async def stream_with_retries(
    endpoint: Endpoint,
    request: ModelRequest,
    options: dict[str, Any],
    policy: RetryPolicy,
    on_retry: OnRetry,
) -> AsyncGenerator[str | ModelResponse, None]:
    """``endpoint.stream``, restarted per ``policy`` until its first text delta went out.

    Yields the text deltas, then the complete [`ModelResponse`][pride.llm.ModelResponse]. Once a
    delta has been yielded, a failure is raised as is: the caller has seen
    part of this reply, and a new attempt would produce a different one.
    """
    started = trio.current_time()
    retries = 0
    while True:
        delivered = False
        try:
            async with aclosing(endpoint.stream(request, options)) as items:
                async for item in items:
                    if isinstance(item, str):
                        delivered = True
                    yield item
            return
        except ProviderError as exc:
            if delivered:
                raise
            delay = policy.next_delay(retries, exc, trio.current_time() - started)
            if delay is None:
                raise
            retries += 1
            on_retry(exc, retries, delay)
        await trio.sleep(delay)
