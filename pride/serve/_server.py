"""The front door on hypercorn's trio worker: binding, serving, and the drain.

hypercorn parses HTTP/1.1 (h11) and hands each request to the ASGI app
(`pride.serve._asgi.App`) in a task of its own, on trio, in pride's own
event loop (uvicorn runs only on asyncio). pride binds the socket itself and
gives hypercorn that very socket, so a refused address is an ``OSError``
before anything is opened, and the URL printed is the one actually bound.

Slow senders: hypercorn closes a connection that has not sent a complete
request head within ``keep_alive_timeout`` of its opening (or of its last
answer), which is ``header_timeout`` here; the body is bounded by the app
(`pride.serve._http`). hypercorn's own per-read timeout stays off: it would
also cut an event stream whose client, rightly, sends nothing.

The drain (`Server.shutdown`): readyz turns false, event streams end,
hypercorn stops accepting and waits up to ``grace`` (plus a margin for the
last answers) for the requests in flight, whose turns the session's own
``stop(grace)`` lets finish or cancels.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from .._hypercorn import bound_socket, hypercorn_config
from ..errors import sole_exception
from ._app import Front
from ._asgi import App
from ._auth import Tokens
from ._options import ServeOptions

__all__ = ["ANSWER_MARGIN", "Server"]

log = logging.getLogger("pride.serve")

ANSWER_MARGIN = 2.0
"""Seconds past the grace period hypercorn waits for the last answers to be written
(turns cancelled at the deadline are answered just after it)."""


class Server:
    """One front door for ``session``'s tree (see the module docstring).

    Args:
        session: the running root session.
        options: where to listen, and the bounds.
        tokens: who may call.
        cluster: placed branches reachable by name too (``--cluster``), or None.
        grace: seconds requests in flight get once `shutdown` is called.
    """

    def __init__(
        self,
        session: Any,
        options: ServeOptions,
        tokens: Tokens,
        *,
        cluster: Any = None,
        grace: float = 5.0,
    ) -> None:
        self.front = Front(session, options, tokens, cluster=cluster)
        self.options = options
        self.grace = grace
        self._stop = trio.Event()
        self.url: str | None = None

    def shutdown(self) -> None:
        """Begin the drain (idempotent): `run` returns once it is over."""
        self.front.drain()
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until `shutdown`, then drain; reports the bound URL once listening.

        Raises:
            OSError: the address cannot be bound (a port in use, say).
        """
        from hypercorn.trio import serve

        options = self.options
        listening = await bound_socket(options.host, options.port, "serve")
        config = hypercorn_config(listening, log)
        config.include_server_header = False
        config.keep_alive_timeout = options.header_timeout
        config.keep_alive_max_requests = 1_000_000  # keep-alive clients keep their connection
        config.graceful_timeout = self.grace + ANSWER_MARGIN
        config.read_timeout = None
        front = self.front
        port = listening.getsockname()[1]
        front.bound(port)
        host = options.host if ":" not in options.host else f"[{options.host}]"
        self.url = f"http://{host}:{port}"
        server = self

        class _Started:
            def started(self, binds: Any = None) -> None:
                task_status.started(server.url)  # type: ignore[arg-type]

        try:
            with listening:
                async with trio.open_nursery() as nursery:
                    front.serving(nursery)
                    app: Any = App(front)  # hypercorn's own ASGI types are narrower
                    await serve(
                        app,
                        config,
                        shutdown_trigger=self._stop.wait,
                        task_status=_Started(),
                    )
                    # Followers of sent turns only watch: their turns go on without them.
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # hypercorn's nurseries wrap what serve raised; the caller opened none of them.
            sole = sole_exception(group)
            if sole is group:
                raise
            raise sole from None
        finally:
            front.closed()
