"""What pride's HTTP servers (``pride serve``, ``pride mcp --http``) share on hypercorn.

pride binds the listening socket itself and hands that very socket to
hypercorn (`bound_socket`, `hypercorn_config`): a refused address (a port in
use) is an ``OSError`` naming it before anything else is opened (hypercorn's
own bind leaves its socket to the garbage collector when it fails), and the
caller closes the one socket object on every path. Both apps answer the ASGI
lifespan the same way (`answer_lifespan`): they start and stop with their
supervisor tree, not with hypercorn's lifespan. hypercorn is imported only
when a server is configured: ``import pride`` never loads it.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from hypercorn.config import Config

__all__ = ["answer_lifespan", "bound_socket", "hypercorn_config"]


async def bound_socket(host: str, port: int, what: str) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening: hypercorn listens).

    ``what`` names the server in the error (``"serve"``, ``"serve MCP"``).

    Raises:
        OSError: the address cannot be resolved or bound (a port in use, say),
            with its errno and ``cannot {what} on host:port`` in its message.
    """
    try:
        family, kind, proto, _, address = (
            await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot {what} on {host}:{port}: {exc.strerror}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot {what} on {host}:{port}: {exc.strerror}") from exc
    except BaseException:
        sock.close()
        raise
    return sock


def hypercorn_config(listening: socket.socket, errorlog: logging.Logger) -> Config:
    """A hypercorn config serving ``listening`` (from `bound_socket`), with no access
    log and hypercorn's errors to ``errorlog``; the caller sets the rest."""
    from hypercorn.config import Config, Sockets

    class _Serving(Config):
        def create_sockets(self) -> Sockets:
            return Sockets(secure_sockets=[], insecure_sockets=[listening], quic_sockets=[])

    config = _Serving()
    config.accesslog = None
    config.errorlog = errorlog
    return config


async def answer_lifespan(
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
) -> None:
    """Answer an ASGI lifespan scope: startup and shutdown complete at once."""
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
