"""The front door as an ASGI application: the gates every request passes, then its route.

Each request goes through the same gates, in order, before any handler
runs: its ``Host`` must be the server's (421), its ``Origin``, if any, its
own or allowed (403); ``GET /healthz`` and ``GET /readyz`` answer then;
everything else needs a bearer token (401 with ``WWW-Authenticate``), or,
with ``--console``, the console's cookie (`pride.serve._console`; a request
it signs that is not a GET must come from the server's own Origin). Then
the route (`pride.serve._routes`): a handler of the native API
(`pride.serve._native`), of the OpenAI-compatible one
(`pride.serve._openai`), or the events, metrics and OpenAPI documents.
Errors are answered in the body of the route's family, with the status of
`pride.serve._status`; an exception that is not a refusal is logged, and
answered 500 unless the answer has begun.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote

import trio

from .._hypercorn import ClientStalled, Writer, answer_lifespan
from . import _console
from ._app import Front
from ._http import (
    ClientGone,
    HttpError,
    Receive,
    Request,
    Scope,
    Send,
    respond,
    respond_json,
)
from ._routes import route
from ._status import native_error, openai_error, status_of

__all__ = ["App"]

log = logging.getLogger("pride.serve")

_PUBLIC = {"/healthz", "/readyz"}
_CORS = [
    (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
    (b"access-control-allow-headers", b"authorization, content-type"),
    (b"access-control-max-age", b"600"),
]
_SAFE = {"GET", "HEAD"}
_OPENAI_PATHS = {"/v1/chat/completions", "/v1/models"}


class App:
    """The ASGI application of one server, over its shared state ``front``."""

    def __init__(self, front: Front) -> None:
        self.front = front

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            request = Request(scope, receive, send)
            try:
                await self._http(request)
            except ClientGone:  # left before its body was whole: no one to answer
                log.debug("%s %s: the client left before its body", request.method, request.path)
            except ClientStalled as exc:  # a client that reads nothing is told nothing more
                log.warning("%s %s: %s", request.method, request.path, exc)
        elif kind == "lifespan":
            await answer_lifespan(receive, send)
        # websockets are not served: hypercorn closes them when the app returns

    async def _http(self, request: Request) -> None:
        """Answer ``request``, its answer written out before this returns (`Writer`)."""
        started = trio.current_time()
        front = self.front
        assert front.nursery is not None  # requests come once the server is serving
        writer = Writer(request.send, front.nursery, front.options.send_timeout)
        exchange = _Exchange()

        async def spy(message: Any) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
                if exchange.cors:
                    message["headers"] = [*message["headers"], *exchange.cors]
            await writer(message)

        request.send = spy
        try:
            await self._answer(request, exchange)
            await writer.finish()
        finally:
            writer.close()
            front.metrics.request(exchange.label, exchange.status, trio.current_time() - started)

    async def _answer(self, request: Request, exchange: _Exchange) -> None:
        exchange.family = "openai" if request.path in _OPENAI_PATHS else "native"
        try:
            guard = self.front.guard
            if not guard.host_allowed(request.header(b"host")):
                raise HttpError(
                    421,
                    "MisdirectedRequest",
                    "this server does not answer for that Host (a proxy's name is allowed "
                    "with --allow-host)",
                )
            origin = request.header(b"origin")
            if not guard.origin_allowed(origin):
                raise HttpError(
                    403,
                    "Forbidden",
                    "requests from that Origin are refused (allow one with --allow-origin)",
                )
            if guard.cross_origin(origin):
                assert origin is not None
                exchange.cors = [(b"access-control-allow-origin", origin), (b"vary", b"origin")]
                if request.method == "OPTIONS":  # a browser's preflight: no token on it
                    exchange.label = "OPTIONS"
                    await respond(request.send, 204, b"", b"text/plain", _CORS)
                    return
            path = request.path
            if path in _PUBLIC:
                exchange.label = path
                await self._health(request, path)
                return
            logins = self.front.logins
            grant = self.front.tokens.grant(request.header(b"authorization"))
            by_cookie = False
            if grant is None and logins is not None:
                grant = logins.grant(request.header(b"cookie"))
                by_cookie = grant is not None
            if logins is not None and (path == "/" or path.startswith("/console/")):
                exchange.label = "/" if path == "/" else "/console/{name}"
                if path == "/":
                    await _console.page(request, self.front.tokens, logins, grant)
                    return
                if grant is None:
                    raise _unauthorized()
                await _console.asset(request, path.removeprefix("/console/"))
                return
            if grant is None:
                raise _unauthorized()
            if by_cookie and request.method not in _SAFE and not guard.own_origin(origin):
                # A browser sends Origin on every such request; one forged from
                # another site cannot name this server (docs/console.md).
                raise HttpError(
                    403,
                    "Forbidden",
                    "a request signed in by the console's cookie that changes state must "
                    "come from the console's own page (its Origin)",
                )
            segments = [unquote(part) for part in request.scope["raw_path"].decode().split("/")]
            exchange.label, exchange.family, handler, arguments = route(request.method, segments)
            try:
                await handler(self.front, request, grant, *arguments)
            except (HttpError, ClientGone, ClientStalled):
                raise
            except Exception as exc:
                if exchange.status:  # the answer has begun (an event stream): nothing more to say
                    log.exception("a %s request failed after its answer began", exchange.label)
                    return
                await self._refuse(request, exc, exchange.family)
        except HttpError as exc:
            await self._refuse(request, exc, exchange.family)

    async def _refuse(self, request: Request, error: BaseException, family: str) -> None:
        code, headers = status_of(error)
        # A body refused unread is drained after the answer, but the server decides
        # whether to keep the connection when the app returns: if the body has not all
        # arrived by then, hypercorn closes it without saying so, and a client's next
        # request on it fails ("Server disconnected"). Saying close first is never wrong.
        if (isinstance(error, HttpError) and error.close) or request.body_unread:
            headers.append((b"connection", b"close"))
        if code == 500 and not isinstance(error, HttpError):  # a bug, not a refusal
            log.error("request %s %s failed", request.method, request.path, exc_info=error)
        body = openai_error(error, code) if family == "openai" else native_error(error)
        await respond_json(request.send, code, body, headers)
        await request.drain()

    async def _health(self, request: Request, path: str) -> None:
        if request.method != "GET":
            raise HttpError(405, "MethodNotAllowed", f"{path} answers GET")
        if path == "/healthz":
            await respond_json(request.send, 200, {"ok": True})
            return
        front = self.front
        ready = not front.draining and front.session.running
        body = {"ok": ready, "draining": front.draining}
        await respond_json(request.send, 200 if ready else 503, body)


class _Exchange:
    """What one request's answer has come to: its route's label and error family, the
    CORS headers its answer carries, and its status once the answer has begun (0 before)."""

    __slots__ = ("cors", "family", "label", "status")

    def __init__(self) -> None:
        self.label = "-"
        self.family = "native"
        self.cors: list[tuple[bytes, bytes]] = []
        self.status = 0


def _unauthorized() -> HttpError:
    return HttpError(
        401,
        "Unauthorized",
        "send Authorization: Bearer TOKEN (PRIDE_SERVE_TOKEN or --token-file)",
        headers=[(b"www-authenticate", b'Bearer realm="pride"')],
    )
