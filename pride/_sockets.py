"""The listening socket of a server pride runs (``pride serve``, ``pride mcp --http``).

pride binds the socket itself and hands that very socket to hypercorn: a
refused address (a port in use) is an ``OSError`` naming it before anything
else is opened (hypercorn's own bind leaves its socket to the garbage
collector when it fails), and the caller closes the one socket object on
every path.
"""

from __future__ import annotations

import socket

import trio

__all__ = ["bound_socket"]


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
