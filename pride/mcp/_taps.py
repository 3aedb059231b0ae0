"""Taps on the streams between the SDK's ``ClientSession`` and pride's transports.

`RequestTap` notes the id of each request a task sends (the SDK keeps request
ids to itself, and a cancelled call needs its id for
``notifications/cancelled``); `ReadTap` tells the server handle when the
server's message stream ends (a crash, unless pride is stopping it), marks
each JSON-RPC error the server sends as the server's (`ServerError`), drops
answers whose id no request could have had and notifications that are not the
MCP notifications they claim to be (the SDK would log each such id or message
whole, at WARNING on the root logger), and refuses requests that are not MCP's
itself (the SDK refused each with a warning of thousands of characters on the
root logger, as many as the server sent). It also drops a result of more than
`MAX_CONTENT_BLOCKS` content blocks, answering its request with a `TooManyBlocks`
error instead: the SDK validates a result block by block on the event loop
(about 10 µs a block), and 500,000 one-letter blocks, 14 MB of JSON within
``max_message_bytes``, held every turn of the process for 5.3 s.

Why the mark: when the connection closes, the SDK answers every request still
waiting with an error of its own, code -32000 (``CONNECTION_CLOSED``), and a
server may send that very code itself (the JSON-RPC range -32000 to -32099 is
the server's to use). Only the mark tells a closed connection from a server's
answer; taken for a dead connection, a server's -32000 failed the other calls
in flight and restarted the server.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable
from typing import Any

import anyio
import pydantic
from mcp import types
from mcp.shared.message import SessionMessage

from .._repeats import Repeats

__all__ = [
    "MAX_CONTENT_BLOCKS",
    "ReadTap",
    "RequestTap",
    "ServerError",
    "TooManyBlocks",
    "forget_requests",
    "last_request_id",
]

log = logging.getLogger("pride.mcp")

MAX_CONTENT_BLOCKS = 2000
"""Content blocks a result may have; one with more is refused (`TooManyBlocks`).

2,000 blocks are validated in about 20 ms, as long as the longest stall pride
allows itself elsewhere; a tool's answer of text, images and links has far fewer.
"""

_UNREAD_LOGGED = 20  # unreadable notifications and requests logged one by one, per incarnation

_sent_request: contextvars.ContextVar[types.RequestId | None] = contextvars.ContextVar(
    "pride_mcp_sent_request", default=None
)


def last_request_id() -> types.RequestId | None:
    """The id of the last request the current task sent since `forget_requests`, if any."""
    return _sent_request.get()


def forget_requests() -> None:
    """Note no request for the current task: what `last_request_id` says from now on is its own.

    A task starts with a copy of its parent's context, and with it the id of the
    parent's last request: a call's task, started by the serving task, held the id
    of the serving task's tools/list, and a call cancelled before its own request
    left told the server to cancel that one.
    """
    _sent_request.set(None)


class RequestTap:
    """The session's write stream, noting the id of each request sent by the calling task.

    ``send`` runs in the task that sends the request (the call's), so a
    context variable carries the id back to it (`last_request_id`).
    """

    def __init__(self, inner: anyio.abc.ObjectSendStream[SessionMessage]) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        root = item.message.root
        if isinstance(root, types.JSONRPCRequest):
            _sent_request.set(root.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()  # type: ignore[attr-defined]

    async def __aenter__(self) -> RequestTap:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


def _ours(request_id: Any) -> bool:
    """An id the SDK's requests could have: an integer (or its digits, which it accepts)."""
    if isinstance(request_id, str):
        return len(request_id) <= 20 and request_id.isdigit()
    return isinstance(request_id, int)


class ServerError(types.ErrorData):
    """A JSON-RPC error the server sent (not one the SDK made up for a closed connection)."""


class TooManyBlocks(types.ErrorData):
    """pride's answer to a request whose result had more than `MAX_CONTENT_BLOCKS` blocks
    (the result was dropped unread; the message says how many it had)."""


def _too_many_blocks(root: types.JSONRPCResponse, server: str) -> types.JSONRPCError | None:
    """The error that replaces ``root`` when its result has too many content blocks."""
    content = root.result.get("content")
    if not isinstance(content, list) or len(content) <= MAX_CONTENT_BLOCKS:
        return None
    message = (
        f"the result has {len(content)} content blocks, more than pride takes "
        f"({MAX_CONTENT_BLOCKS}); it was dropped"
    )
    log.warning("MCP server %r: %s", server, message)
    error = TooManyBlocks(code=types.INTERNAL_ERROR, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=root.id, error=error)


class ReadTap:
    """The session's read stream, telling the server handle when it ends.

    Args:
        inner: the transport's read stream.
        on_end: called when it ends.
        server: the server's name (for messages).
        replies: the transport's write stream, for the refusal of a request that
            is not MCP's (without one such a request goes to the SDK).
    """

    def __init__(
        self, inner: Any, on_end: Callable[[], None], server: str = "", replies: Any = None
    ) -> None:
        self._inner = inner
        self._on_end = on_end
        self._server = server
        self._replies = replies
        self.strays = 0  # answers with an id no request of the SDK's could have
        # Notifications and requests that are not the MCP ones they claim to be: a
        # server sending them in a loop would log a warning each.
        self.unread = Repeats(
            log,
            f"messages of MCP server {server!r} that pride cannot read",
            first=_UNREAD_LOGGED,
        )

    def _unreadable(self, kind: str, method: str, exc: pydantic.ValidationError) -> None:
        self.unread.warning(
            "MCP server %r sent a %s pride cannot read (%s): %.100r, %d problems",
            self._server,
            kind,
            "refused" if kind == "request" else "dropped",
            method,
            exc.error_count(),
        )

    def flush(self) -> None:
        """Say how many unreadable messages were not logged yet (at the incarnation's end)."""
        self.unread.flush()

    async def _refuse_unreadable(self, root: types.JSONRPCRequest) -> bool:
        """Refuse ``root`` if it is not a request the SDK reads (True when refused)."""
        if self._replies is None:
            return False
        try:
            types.ServerRequest.model_validate(
                root.model_dump(by_alias=True, mode="json", exclude_none=True)
            )
        except pydantic.ValidationError as exc:
            self._unreadable("request", root.method, exc)
            error = types.ErrorData(code=types.INVALID_PARAMS, message="Invalid request parameters")
            refusal = types.JSONRPCError(jsonrpc="2.0", id=root.id, error=error)
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._replies.send(SessionMessage(types.JSONRPCMessage(refusal)))
            return True
        return False

    def _readable(self, root: types.JSONRPCNotification) -> bool:
        """True for a notification the SDK reads; another it would log whole, at WARNING."""
        try:
            types.ServerNotification.model_validate(
                root.model_dump(by_alias=True, mode="json", exclude_none=True)
            )
        except pydantic.ValidationError as exc:
            self._unreadable("notification", root.method, exc)
            return False
        return True

    async def receive(self) -> Any:
        while True:
            try:
                item = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._on_end()
                raise
            if not isinstance(item, SessionMessage):
                return item
            root = item.message.root
            if isinstance(root, types.JSONRPCResponse | types.JSONRPCError) and not _ours(root.id):
                # Never asked: the SDK would log the whole id (at WARNING, on the root
                # logger) and then the whole message, for each one.
                self.strays += 1
                log.debug("MCP: an answer to a request never made was dropped (%d)", self.strays)
                continue
            if isinstance(root, types.JSONRPCResponse):
                refusal = _too_many_blocks(root, self._server)
                if refusal is not None:
                    return SessionMessage(types.JSONRPCMessage(refusal))
            if isinstance(root, types.JSONRPCNotification) and not self._readable(root):
                continue
            if isinstance(root, types.JSONRPCRequest) and await self._refuse_unreadable(root):
                continue
            if isinstance(root, types.JSONRPCError) and not isinstance(
                root.error, ServerError | TooManyBlocks
            ):
                # The SDK hands this very object to the waiting request's McpError.
                root.error = ServerError.model_validate(root.error.model_dump())
            return item

    def __aiter__(self) -> ReadTap:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> ReadTap:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()
