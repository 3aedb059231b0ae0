"""One HTTP client per trio run, closed when asked or when the run ends.

An ``httpx.AsyncClient`` holds connections bound to the event loop that opened
them, and tests (and some programs) call ``trio.run`` more than once in a
process, so a model keeps one client per run: it is created on first use in a
run, looked up by ``trio.lowlevel.current_trio_token()`` (an identity check on
the hot path), and closed by `RunClient.aclose` or, if nobody calls it,
by a system task when that run ends, so no socket is left to the garbage
collector.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import trio

__all__ = ["DEFAULT_HTTP_LIMITS", "RunClient"]

logger = logging.getLogger("pride.llm")

#: The HTTP connection pool of every model's client: the limits the official
#: OpenAI and Anthropic SDKs use (1,000 connections, 100 kept alive, 5 s idle).
#: Requests beyond the pool size queue inside httpcore, whose pool does work
#: per queued request and per connection on every request (encode/httpcore
#: PR #1035), so bound concurrency with ``concurrency_limit`` (a cheap FIFO)
#: rather than with a small pool.
DEFAULT_HTTP_LIMITS = httpx.Limits(
    max_connections=1000, max_keepalive_connections=100, keepalive_expiry=5.0
)

_ssl_context: Any = None


def _shared_ssl_context() -> Any:
    # Building an SSL context loads the CA bundle (tens of ms); one per process
    # is enough, and SSLContext objects are safe to share between clients.
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx.create_ssl_context()
    return _ssl_context


async def _close_at_run_end(client: httpx.AsyncClient, scope: trio.CancelScope) -> None:
    """System task: wait for the run's end (or ``scope``), then close ``client``."""
    try:
        with scope:
            await trio.sleep_forever()
    finally:
        with trio.CancelScope(shield=True):
            try:
                await client.aclose()
            except Exception:  # a system task must not crash the run; report instead
                logger.exception("closing an HTTP client of pride.llm failed")


class RunClient:
    """The HTTP client of the current trio run, made on demand.

    Args:
        timeout: seconds per network operation, or ``None``.
        name: shown in the closer task's name.
    """

    def __init__(self, timeout: float | None, name: str) -> None:
        self._timeout = httpx.Timeout(timeout)
        self._name = name
        self._client: httpx.AsyncClient | None = None
        self._run: trio.lowlevel.TrioToken | None = None
        self._closer: trio.CancelScope | None = None

    def get(self) -> httpx.AsyncClient:
        """The client for the current run (must be called inside ``trio.run``)."""
        token = trio.lowlevel.current_trio_token()
        client = self._client
        if client is not None and self._run is token:
            return client
        client = httpx.AsyncClient(
            timeout=self._timeout, limits=DEFAULT_HTTP_LIMITS, verify=_shared_ssl_context()
        )
        closer = trio.CancelScope()
        trio.lowlevel.spawn_system_task(
            _close_at_run_end, client, closer, name=f"pride.llm client closer ({self._name})"
        )
        self._client, self._run, self._closer = client, token, closer
        return client

    async def aclose(self) -> None:
        """Close this run's client, if any; a later `get` makes a new one.

        Cancellation: closing is shielded; it does not wait on the network.
        """
        client, closer = self._client, self._closer
        if client is None or self._run is not trio.lowlevel.current_trio_token():
            await trio.lowlevel.checkpoint()
            return
        self._client = self._run = self._closer = None
        with trio.CancelScope(shield=True):
            await client.aclose()
        if closer is not None:
            closer.cancel()
