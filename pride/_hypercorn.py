"""What pride's HTTP servers (``pride serve``, ``pride mcp --http``) share on hypercorn.

pride binds the listening socket itself and hands that very socket to
hypercorn (`bound_socket`, `hypercorn_config`): a refused address (a port in
use) is an ``OSError`` naming it before anything else is opened (hypercorn's
own bind leaves its socket to the garbage collector when it fails), and the
caller closes the one socket object on every path. Both write each answer
from a task of their own, bounded in time (`Writer`), so a client that reads
nothing holds no request, turn or shutdown. Both apps answer the ASGI
lifespan the same way (`answer_lifespan`): they start and stop with their
supervisor tree, not with hypercorn's lifespan. hypercorn is imported only
when a server is configured: ``import pride`` never loads it.
"""

from __future__ import annotations

import logging
import socket
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from hypercorn.config import Config

__all__ = [
    "AHEAD",
    "ClientStalled",
    "Writer",
    "answer_lifespan",
    "bound_socket",
    "hypercorn_config",
]

Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


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


class ClientStalled(Exception):
    """A write of an answer waited ``send_timeout`` seconds for the client to take
    its bytes: the client is taken for gone, and nothing more is written to it."""

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"the client took none of its answer for {timeout:g} s (send_timeout): taken for gone"
        )


AHEAD = 4
"""Writes a request may be ahead of its client: past them, it waits for the client
to take some (each wait bounded by ``send_timeout``). An answer of one or two
writes never waits until its end; a stream's turn stays within a few items of
what the client has taken."""


class Writer:
    """The ASGI ``send`` of one request: its writes made in order by a task of the server.

    hypercorn writes to the socket in a shielded cancel scope (so that no
    cancellation cuts an answer in half), and such a write waits for as long
    as a client that reads nothing keeps its connection open: a request's
    task stuck in it held its turn (a stream's branch stayed busy), its place
    and, since hypercorn waits for every request's task, the server's
    shutdown, however long the grace. So the request's writes go to a queue
    that one task in the server's ``nursery`` writes out, in order, and the
    request waits for that task only when it is `AHEAD` writes ahead and in
    `finish`: each such wait lasts at most ``timeout`` seconds without a
    write ending, past which `ClientStalled`, and the request unwinds as
    for a client gone (its turn cancelled). A write left waiting ends when
    hypercorn closes the connection: when the client leaves, or when the
    server stops (which it can, the request's task having ended).

    The request must end with `finish` (every write made) or `close` (what
    is not begun is dropped: a cancelled or failed request's), before it
    returns to hypercorn: one still writing after its app returned would
    find the answer closed under it. A write already begun is finished, as
    hypercorn's shield would have it.
    """

    __slots__ = (
        "_busy",
        "_closed",
        "_error",
        "_failed",
        "_nursery",
        "_progress",
        "_queue",
        "_running",
        "_send",
        "_stalled",
        "_timeout",
        "_work",
    )

    def __init__(self, send: Send, nursery: trio.Nursery, timeout: float) -> None:
        self._send = send
        self._nursery = nursery
        self._timeout = timeout
        self._queue: deque[MutableMapping[str, Any]] = deque()
        self._work = trio.lowlevel.ParkingLot()  # the writing task, waiting for a write
        self._progress = trio.lowlevel.ParkingLot()  # the request, waiting for one to end
        self._running = self._busy = False
        self._stalled = self._failed = self._closed = False
        self._error: Exception | None = None

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        """Queue ``message`` to be written after the ones before it.

        Raises:
            ClientStalled: the client took nothing for ``timeout`` seconds while
                this request waited for it, now or before.
            Exception: what hypercorn's own ``send`` raised for an earlier write.
        """
        self._check()
        self._queue.append(message)
        if self._running:
            self._work.unpark()
        else:
            self._running = True
            self._nursery.start_soon(self._write_all)
        while len(self._queue) + self._busy > AHEAD:
            await self._wait()

    async def finish(self) -> None:
        """Wait until every queued write is made.

        Raises:
            ClientStalled: the client took nothing for ``timeout`` seconds.
            Exception: what hypercorn's own ``send`` raised for a write.
        Cancellation: what is not begun stays queued; `close` drops it.
        """
        while self._queue or self._busy:
            await self._wait()
        self._check()

    def close(self) -> None:
        """Drop the writes not begun; a write begun is finished by its task."""
        self._closed = True
        self._queue.clear()
        self._work.unpark()

    def _check(self) -> None:
        if self._stalled:
            raise ClientStalled(self._timeout)
        if self._failed:
            error, self._error = self._error, None  # held by no frame once raised
            if error is not None:
                raise error
            raise RuntimeError(
                "an earlier write of this answer failed, or the server stopping cut it "
                "short: nothing more is written"
            )

    async def _wait(self) -> None:
        with trio.move_on_after(self._timeout) as waited:
            await self._progress.park()
        if waited.cancelled_caught:
            self._stalled = True
            raise ClientStalled(self._timeout)

    async def _write_all(self) -> None:
        queue = self._queue
        try:
            while not self._closed:
                if not queue:
                    await self._work.park()
                    continue
                message = queue.popleft()
                self._busy = True
                try:
                    await self._send(message)
                finally:
                    self._busy = False
                    self._progress.unpark_all()
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    return  # the answer is whole: nothing is written after it
        except Exception as exc:  # the request raises it at its next write or finish
            self._error, self._failed = exc, True
            queue.clear()
        except BaseException:  # the server's nursery cancelled: what is queued is not written
            self._failed = True
            queue.clear()
            raise
        finally:
            self._running = False
