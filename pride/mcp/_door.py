"""The HTTP door of ``pride mcp --http``: what a request must be before the SDK sees it.

The SDK's streamable-HTTP session manager serves the MCP endpoint; every
request passes this door first, because every byte of it is hostile (DESIGN.md,
"What pride trusts"):

* ``Host`` and ``Origin`` are checked against DNS rebinding
  (`pride.messages.origins`, the rule ``pride serve`` applies too): 421 or 403.
* A POST body is read here, bounded in size (413 past `MAX_BODY_BYTES`, without
  reading the rest) and in time (408 past `BODY_TIMEOUT`), then handed on.
* A client whose POST connection closes before its answer has its calls'
  turns cancelled (`Departures`), as a ``notifications/cancelled`` or a
  DELETE of the session would: a vanished client costs no more turns.
* A GET stream (the server's messages outside any request, open as long as its
  client likes) holds one of ``max_watchers`` places of its own for as long as
  it is open; past them (within ``queue_wait``) it is 503 with ``Retry-After``,
  so idle streams cost bounded memory and never a tool call's place.
* A client that stays and reads nothing is taken for gone too: an answer's
  writes wait at most `SEND_TIMEOUT` for it to take some
  (`pride._hypercorn.Writer`).
  hypercorn's own write waits, shielded, for as long as the connection is
  open: a request stuck in it held its calls' handlers and, since hypercorn
  waits for every request, the server's shutdown after SIGTERM, forever.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import trio
from mcp.types import INTERNAL_ERROR

from .._hypercorn import ClientStalled, Writer, answer_lifespan
from .._places import Places
from .._repeats import Repeats
from ..messages.origins import Guard
from ._spec import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "BODY_TIMEOUT",
    "MAX_BODY_BYTES",
    "RETRY_AFTER",
    "SEND_TIMEOUT",
    "Departures",
    "door",
]

log = logging.getLogger("pride.mcp")

MAX_BODY_BYTES = DEFAULT_MAX_MESSAGE_BYTES
"""The largest POST body taken (16 MiB, the size of one message over stdio)."""

BODY_TIMEOUT = 30.0
"""Seconds a POST body may take to arrive whole."""

SEND_TIMEOUT = 30.0
"""Seconds an answer's writes may wait for the client to take some; past that the
client is taken for gone (its calls cancelled), as ``pride serve`` does."""

_REMEMBERED = 4096
"""Departed calls remembered for a handler that has not started yet (oldest forgotten)."""

Asgi = Callable[[Any, Any, Any], Awaitable[None]]


def _key(session_id: str | None, request_id: Any) -> str:
    # JSON's own spelling keeps the id 1 and the id "1" apart, as JSON-RPC does.
    return f"{session_id}\x00{json.dumps(request_id)}"


class Departures:
    """Which calls' clients have gone, and the cancel scopes of the calls still running.

    The door marks the calls of a POST whose connection closed before its
    answer (`depart`); a tool handler runs its turn inside `watch`, which is
    cancelled when its call departs, at once if it departed already.
    """

    def __init__(self) -> None:
        self._running: dict[str, trio.CancelScope] = {}
        self._departed: OrderedDict[str, None] = OrderedDict()

    def depart(self, keys: list[str]) -> None:
        """The client of these calls is gone: cancel each that runs, remember the rest."""
        for key in keys:
            scope = self._running.get(key)
            if scope is not None:
                scope.cancel()
                continue
            self._departed[key] = None
            while len(self._departed) > _REMEMBERED:
                self._departed.popitem(last=False)

    @contextlib.contextmanager
    def watch(self, context: Any) -> Iterator[trio.CancelScope]:
        """A cancel scope for one tool call, cancelled if its client goes.

        ``context`` is the SDK's request context; a call that did not come
        over HTTP (stdio) is never cancelled by this.
        """
        request = getattr(context, "request", None)
        headers = getattr(request, "headers", None)
        with trio.CancelScope() as scope:
            if headers is None:
                yield scope
                return
            key = _key(headers.get("mcp-session-id"), context.request_id)
            if self._departed.pop(key, False) is None:
                scope.cancel()
            self._running[key] = scope
            try:
                yield scope
            finally:
                if self._running.get(key) is scope:
                    del self._running[key]


def _refusal(guard: Guard, scope: dict[str, Any]) -> tuple[int, str] | None:
    """Why a request must not reach the endpoint (its status and a reason), or None."""
    headers = scope.get("headers", ())
    hosts = [value for name, value in headers if name == b"host"]
    if len(hosts) != 1 or not guard.host_allowed(hosts[0]):
        return 421, "this server does not answer for that Host (allow one with --allow-host)"
    origins = [value for name, value in headers if name == b"origin"]
    if len(origins) > 1 or not guard.origin_allowed(origins[0] if origins else None):
        return 403, "requests from that Origin are refused (allow one with --allow-origin)"
    return None


async def _respond(
    send: Any, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode()})


async def _read_body(receive: Any) -> bytes | int:
    """The whole body, or the status refusing it (413 too large, 408 too slow, 400 gone)."""
    body = bytearray()
    with trio.move_on_after(BODY_TIMEOUT):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return 400
            body += message.get("body", b"")
            if len(body) > MAX_BODY_BYTES:
                return 413
            if not message.get("more_body", False):
                return bytes(body)
    return 408


def _calls(body: bytes, session_id: str | None) -> list[str]:
    """The keys of the requests (those with an id) a POST body carries; none if unreadable
    (the SDK answers a body it cannot read)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return []
    messages = parsed if isinstance(parsed, list) else [parsed]
    return [
        _key(session_id, message["id"])
        for message in messages
        if isinstance(message, dict) and "method" in message and "id" in message
    ]


RETRY_AFTER = 1
"""Seconds a client refused for a full bound is told to wait (``Retry-After``)."""


def _sessions_refused(
    head: dict[str, Any], limit: int | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The SDK's refusal of one more session (``head`` its 503), said naming the bound.

    Without a session id the SDK answers 503 only at its session limit, and its
    body ("Too many open sessions") does not say which option sets it.
    """
    text = f"{limit} MCP sessions are open (--max-sessions); one must end first"
    error = {"code": INTERNAL_ERROR, "message": text}
    body = json.dumps({"jsonrpc": "2.0", "id": "server-error", "error": error}).encode()
    headers = [(name, value) for name, value in head["headers"] if name != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    return {**head, "headers": headers}, {"type": "http.response.body", "body": body}


def door(
    guard: Guard,
    departures: Departures,
    endpoint: Asgi,
    writes: trio.Nursery,
    send_timeout: float = SEND_TIMEOUT,
    *,
    watchers: Places | None,
    refused: Repeats,
    max_sessions: int | None = None,
) -> Asgi:
    """The ASGI app in front of ``endpoint`` (the SDK's ``/mcp``): see the module docstring.

    ``writes`` runs the writes of answers (`Writer`): a nursery that outlives
    the server's requests. ``watchers`` bounds the GET streams open at once
    (None: no bound), each refusal a warning of ``refused`` (bounded: a client
    asking in a loop cannot flood the log; its owner says the count left at its
    end, `Repeats.flush`); ``max_sessions`` is the endpoint's
    bound on sessions, named in its refusal of one more."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        writer = Writer(send, writes, send_timeout)
        try:
            await _app(scope, receive, writer)
            await writer.finish()  # hypercorn takes the app's return for the answer's end
        except ClientStalled as exc:  # a client that reads nothing is told nothing more
            log.warning("MCP over HTTP: %s", exc)
        finally:
            writer.close()

    async def _app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        refusal = _refusal(guard, scope)
        if refusal is not None:
            status, text = refusal
            log.info("MCP over HTTP: refused a request (%d): %s", status, text)
            await _respond(send, status, text)
            return
        if scope["path"].rstrip("/") != "/mcp":
            await _respond(send, 404, "not found: the MCP endpoint is /mcp")
            return
        if scope["method"] == "GET" and watchers is not None:
            await _watch(scope, receive, send)
            return
        if scope["method"] != "POST":
            await endpoint(scope, receive, send)
            return
        body = await _read_body(receive)
        if isinstance(body, int):
            reasons = {
                400: "the client closed the request before its body ended",
                408: f"the request body did not arrive within {BODY_TIMEOUT:g} s",
                413: f"the request body is over {MAX_BODY_BYTES} bytes",
            }
            log.info("MCP over HTTP: refused a request (%d): %s", body, reasons[body])
            with contextlib.suppress(OSError, trio.BrokenResourceError):
                await _respond(send, body, reasons[body])
            return
        session_id = dict(scope.get("headers", ())).get(b"mcp-session-id")
        keys = _calls(body, None if session_id is None else session_id.decode("latin-1"))
        handed = False
        answered = False

        async def replay() -> dict[str, Any]:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect" and not answered and keys:
                departures.depart(keys)
            return dict(message)

        held: list[dict[str, Any]] = []  # the head of the SDK's refusal of one more session

        async def sent(message: dict[str, Any]) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                if session_id is None and message["status"] == 503 and max_sessions is not None:
                    held.append(message)  # said again below, naming the bound
                    return
            elif held:
                head, message = _sessions_refused(held.pop(), max_sessions)
                await send(head)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            try:
                await send(message)
            except ClientStalled:
                # Taken for gone, as a closed connection is: its calls' turns end now,
                # not after running on for nobody.
                if not answered and keys:
                    departures.depart(keys)
                raise

        await endpoint(scope, replay, sent)

    async def _watch(scope: Any, receive: Any, send: Any) -> None:
        assert watchers is not None
        if not await watchers.take():
            text = f"{watchers.limit} GET streams are open (--max-watchers); try again shortly"
            refused.warning("MCP over HTTP: refused a GET stream (503): %s", text)
            await _respond(send, 503, text, [(b"retry-after", str(RETRY_AFTER).encode())])
            return
        try:
            await endpoint(scope, receive, send)
        finally:
            watchers.give_back()

    return app
