"""ScriptedModel: a model whose replies come from a list or a function."""

from __future__ import annotations

from typing import Any

from ._endpoint import Endpoint
from ._model import DEFAULT_TIMEOUT, iModel
from ._providers import ProviderInfo
from ._retry import RetryPolicy
from ._script import DEFAULT_CHUNK_SIZE, KEEP_CALLS, Script, ScriptedEndpoint
from ._types import ModelRequest

__all__ = ["ScriptedModel"]


class ScriptedModel(iModel):
    """A key-less model that replies from a script, through the real pipeline.

    Calls go through the same rate limiter, retries, usage accounting and
    statistics as HTTP models; only the reply is scripted. It is the embedded
    default for demos (``ScriptedModel()`` echoes) and for tests.

    Args:
        replies: a list whose items are used one per call, in order: a ``str``
            (text), a :class:`ToolCall` or a list of them, a
            :class:`ScriptedReply`, or an exception instance (raised for that
            call, so ``RateLimited(...)`` is retried like a real 429); items
            appended to the list later are used too. Or a function, sync or
            async, receiving the :class:`ModelRequest` and returning one of
            those. ``None`` echoes the last user message (``"echo: ..."``).
        delay: seconds (``trio.sleep``, so ``MockClock`` applies) before each reply.
        chunk_size: characters per text delta when streamed.
        model: the model name reported in responses.
        keep_calls: how many recent requests ``calls`` keeps (0: none).
        **kwargs: the :class:`iModel` options (limits, ``retry``, request options).

    Attributes:
        calls: the :class:`ModelRequest` objects received, one per attempt, in
            order: the most recent ``keep_calls`` (default 1,000) at least, the
            rest dropped, so a long-running scripted process does not grow
            forever; ``keep_calls=0`` records none.

    A list that runs out raises :class:`~pride.errors.ScriptExhausted`, saying
    how many replies it had and which call this was. Usage is estimated at
    about four characters per token when a reply does not carry its own.
    """

    def __init__(
        self,
        replies: Script = None,
        *,
        delay: float = 0.0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        model: str = "scripted",
        keep_calls: int = KEEP_CALLS,
        timeout: float | None = DEFAULT_TIMEOUT,
        limit_requests: int | None = None,
        limit_tokens: int | None = None,
        queue_capacity: int = 100,
        capacity_refresh_time: float = 60.0,
        concurrency_limit: int | None = None,
        retry: RetryPolicy | None = None,
        **request_options: Any,
    ) -> None:
        self.calls: list[ModelRequest] = []
        self._keep_calls = keep_calls
        self._script = replies
        self._delay = delay
        self._chunk_size = chunk_size
        super().__init__(
            model,
            provider="scripted",
            timeout=timeout,
            limit_requests=limit_requests,
            limit_tokens=limit_tokens,
            queue_capacity=queue_capacity,
            capacity_refresh_time=capacity_refresh_time,
            concurrency_limit=concurrency_limit,
            retry=retry,
            **request_options,
        )

    def _make_endpoint(self, info: ProviderInfo) -> Endpoint:
        return ScriptedEndpoint(
            self._script,
            model=self.model,
            delay=self._delay,
            chunk_size=self._chunk_size,
            calls=self.calls,
            keep_calls=self._keep_calls,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"provider": "scripted", "model": ...}``; a script is code, not data."""
        return {"provider": "scripted", "model": self.model}

    def copy(self) -> ScriptedModel:
        """A new model with the same script (from its start), options and limits."""
        script = self._script
        if isinstance(script, list):
            script = list(script)
        return ScriptedModel(
            script,
            delay=self._delay,
            chunk_size=self._chunk_size,
            model=self.model,
            keep_calls=self._keep_calls,
            timeout=self.timeout,
            limit_requests=self.limit_requests,
            limit_tokens=self.limit_tokens,
            queue_capacity=self.queue_capacity,
            capacity_refresh_time=self.capacity_refresh_time,
            concurrency_limit=self.concurrency_limit,
            retry=self.retry,
            **self.request_options,
        )
