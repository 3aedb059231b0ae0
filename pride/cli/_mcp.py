"""``pride mcp APP --expose NAME...``: an application's branches served over MCP.

The app function is found and called as for ``pride run`` (it receives the
root [`Session`][pride.Session] and spawns its branches into it); then the
branches named with ``--expose`` are served to one MCP client over stdio
(standard input and output are the protocol; logs go to standard error), or
with ``--http PORT`` over streamable HTTP at ``http://127.0.0.1:PORT/mcp``.
Nothing is exposed unless named.

Over HTTP, once the socket listens the process prints one line on standard
output, ``pride mcp: serving on http://127.0.0.1:PORT/mcp``, with the port
actually bound: ``--http 0`` lets the system choose a free port, and a client
(or a test) reads the address from that line instead of guessing a free port
that another process could take first. Over stdio, standard output is the
protocol, so nothing is printed there.

Shutdown: over stdio the process stops when the client closes its input;
SIGINT or SIGTERM stops it in either mode. The session then stops with its
grace period (running turns may finish, then are cancelled) and the process
exits 0; 2 when the app cannot start, a name is not a branch or the HTTP port
cannot be bound (in use); 1 when the root session failed.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Callable, Sequence
from typing import Any

import trio

from ..errors import SupervisorFailed, UnknownBranch
from ..supervisors import Session
from ._loader import AppError, app_failed, call_app, load_app
from ._logs import configure, write_off_the_loop
from ._startup import cannot_start, listed

__all__ = ["ANNOUNCE", "serve_app"]

log = logging.getLogger("pride.cli")

ANNOUNCE = "pride mcp: serving on "
"""How the line on standard output that gives the HTTP endpoint's URL begins."""


def serve_app(
    app: str,
    expose: Sequence[str],
    *,
    http: int | None = None,
    grace: float = 5.0,
    log_level: str = "INFO",
    image_urls: tuple[str, ...] = (),
    allow_hosts: tuple[str, ...] = (),
    allow_origins: tuple[str, ...] = (),
    bounds: dict[str, int] | None = None,
) -> int:
    """Run ``pride mcp``; return the exit status (see the module docstring).

    ``bounds``: `serve_mcp`'s ``max_concurrent``, ``max_watchers`` and
    ``max_sessions`` (``--max-concurrent``, ...); its defaults where not given.

    ``image_urls``: image URL prefixes an operation's arguments may carry
    besides ``data:`` URLs (``--allow-image-url``; see `pride.messages.limits`).
    ``allow_hosts`` and ``allow_origins``: the ``Host`` and ``Origin`` headers
    the HTTP endpoint answers besides its own (`pride.messages.origins`).
    """
    try:
        configure(log_level)
    except ValueError as exc:
        return cannot_start("mcp", str(exc))
    if not expose:
        return cannot_start(
            "mcp", "name the branches to serve with --expose NAME (nothing is served by default)"
        )
    try:
        from ..mcp import serve_mcp  # noqa: F401  (the extra, with its install hint)
    except ImportError as exc:
        return cannot_start("mcp", str(exc))
    try:
        function = load_app(app)
    except AppError as exc:
        return app_failed("mcp", exc)
    try:
        serving = {
            "http": http,
            "image_urls": image_urls,
            "allow_hosts": allow_hosts,
            "allow_origins": allow_origins,
            **(bounds or {}),
        }
        main = functools.partial(_main, app, function, list(expose), grace=grace, serving=serving)
        return trio.run(write_off_the_loop, main)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


async def _main(
    app: str,
    function: Callable[..., Any],
    expose: list[str],
    *,
    grace: float,
    serving: dict[str, Any],
) -> int:
    """Serve the app; ``serving`` holds `serve_mcp`'s keyword arguments."""
    from ..mcp import serve_mcp

    try:
        async with Session("pride-mcp", grace=grace) as session:
            await call_app(function, session)
            names = [branch.name for branch in session.branches]
            for name in expose:
                if name not in names:  # said here, where the app's branches can be listed
                    return cannot_start(
                        "mcp",
                        f"--expose {name}: no branch {name!r} in {app} (branches: {listed(names)})",
                    )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_stop_on_signal, nursery.cancel_scope)

                async def serve(task_status: trio.TaskStatus[str | None]) -> None:
                    await serve_mcp(session, expose, task_status=task_status, **serving)
                    nursery.cancel_scope.cancel()  # stdio: the client closed its input

                url = await nursery.start(serve)
                log.info("app %s: serving %s over MCP (%s)", app, ", ".join(expose), url or "stdio")
                if url is not None:
                    print(f"{ANNOUNCE}{url}", flush=True)
    except AppError as exc:
        return app_failed("mcp", exc)
    except UnknownBranch as exc:  # named by id, or gone since the check
        return cannot_start("mcp", f"cannot expose it: {exc}")
    except OSError as exc:  # serve_mcp's bind: its strerror names host, port and why
        return cannot_start("mcp", exc.strerror or str(exc))
    except SupervisorFailed as exc:
        log.error("the root session failed: %s", exc)
        return 1
    return 0


async def _stop_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("%s: stopping", signal.Signals(signum).name)
            scope.cancel()
            return
