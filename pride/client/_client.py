"""`Client`: ``pride serve``'s native API from an asyncio or a trio program, on httpx.

Every method is a plain coroutine over one ``httpx.AsyncClient``, which runs
on asyncio and on trio alike (httpx picks the event loop it finds), so the
client works in a FastAPI handler and in a trio program. Nothing of it
needs trio but `Client.ref`, whose target is served by tasks of the client's
own trio nursery.

Cancellation: cancelling the task that awaits an ``ask`` (or leaving a
``stream`` block early) closes its HTTP request, and the server cancels the
turn (a send's turn goes on). Errors are rebuilt as pride's own classes
(`pride.client._errors`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ..errors import InvalidMessage
from ..llm import LimitExceeded, SseParser
from ..messages import RoledMessage, Signal, WorkCommand, structure, unstructure
from ._errors import AnswerTooLarge, RequestRefused, rebuild
from ._ref import Carriers, ServedBranch, close_carriers, open_carriers

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_ANSWER_BYTES",
    "MAX_EVENT_BYTES",
    "TOKEN_ENV",
    "Client",
    "ServedItems",
]

log = logging.getLogger("pride.client")

TOKEN_ENV = "PRIDE_SERVE_TOKEN"
"""Where `Client` finds its token when none is given (the variable ``pride serve`` reads)."""

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None)
"""Connect within 10 s, send a body within 30 s; wait for answers as long as turns take
(an ask's own ``timeout`` bounds it on the server, which answers 504)."""

MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The largest server-sent event the client reads (a stream item, a signal): the
default of ``Client(max_event_bytes=)``."""

MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The largest answer the client reads, its body decoded (a result, a page of
messages, an error): the default of ``Client(max_answer_bytes=)``."""

ANSWER_MARGIN = 10.0
"""Seconds past an ask's ``timeout`` the client waits for the server's answer to it."""


def _wire(command: WorkCommand | Mapping[str, Any]) -> Any:
    if isinstance(command, Mapping):
        return dict(command)
    if not isinstance(command, WorkCommand):
        raise TypeError(f"expected a work command, got {type(command).__name__}")
    return unstructure(command)


def _path(name: str) -> str:
    # A name may hold "/" (a virtual branch's kind/key): the server takes everything
    # between /v1/branches/ and the verb, so only what a path cannot carry is quoted.
    return quote(name, safe="/")


class ServedItems:
    """What `Client.stream` yields: the turn's items in order, as plain data.

    After the last item, a failed turn raises its error from the ``async for``.
    ``turn_id`` is known once the turn has started.
    """

    def __init__(self, events: AsyncIterator[dict[str, Any]], name: str) -> None:
        self._events = events
        self._name = name
        self._finished = False
        self.turn_id: UUID | None = None

    def __aiter__(self) -> ServedItems:
        return self

    async def __anext__(self) -> Any:
        while not self._finished:
            try:
                event = await self._events.__anext__()
            except StopAsyncIteration:
                self._finished = True
                raise RequestRefused(
                    502, "StreamCut", f"the stream of {self._name!r} ended without its end"
                ) from None
            kind = event.get("event")
            if event.get("turn_id") is not None:  # null: a command that is no turn
                self.turn_id = _turn_id(event["turn_id"], "event.turn_id")
            if kind == "item":
                return event.get("item")
            if kind == "end":
                self._finished = True
            elif kind == "error":
                self._finished = True
                raise rebuild(200, event.get("error"), name=self._name)
        raise StopAsyncIteration


class Client:
    """A client of one ``pride serve``: ``async with Client(url, token) as client:``.

    Args:
        base_url: the server's URL (``http://127.0.0.1:8000``: what it prints).
        token: the bearer token; None reads ``PRIDE_SERVE_TOKEN``.
        timeout: httpx's timeouts (`DEFAULT_TIMEOUT`: no read timeout, since a
            turn takes as long as it takes).
        transport: an httpx transport (tests, proxies); None for httpx's own.
        max_answer_bytes: the largest answer read (`MAX_ANSWER_BYTES`);
            past it, `AnswerTooLarge`.
        max_event_bytes: the largest server-sent event read
            (`MAX_EVENT_BYTES`); past it, `AnswerTooLarge`.

    Raises (each method):
        pride's own errors as the server named them (``UnknownBranch``,
        ``InvalidMessage``, ``BudgetExceeded`` with ``.limit/.used/.allowed``,
        ``ApprovalRequired`` with ``.turn_id/.pending``, ``MailboxFull``, ...);
        `RequestRefused` for a refusal with no pride class (a wrong token is
        401); ``TimeoutError`` for an ask past its ``timeout``; `AnswerTooLarge`
        for an answer past the client's bounds;
        ``httpx.TransportError`` when the server cannot be reached.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        for field, value in (
            ("max_answer_bytes", max_answer_bytes),
            ("max_event_bytes", max_event_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive number of bytes, got {value!r}")
        token = token if token is not None else os.environ.get(TOKEN_ENV)
        # Uncompressed answers only: a compressed one is a bomb the bound would
        # count only after inflating each chunk (pride serve compresses nothing).
        headers = {"Accept-Encoding": "identity"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self.max_answer_bytes = max_answer_bytes
        self.max_event_bytes = max_event_bytes
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )
        self._refs: Carriers | None = None  # the carriers of `ref` targets, entered on trio

    def __repr__(self) -> str:
        return f"<pride.client.Client {self.base_url}>"  # never the token

    async def __aenter__(self) -> Client:
        self._refs = await open_carriers()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (and cancel the turns still carried for `ref` targets)."""
        try:
            carriers, self._refs = self._refs, None
            await close_carriers(carriers)
        finally:
            await self._http.aclose()

    # ------------------------------------------------------------ work

    async def ask(
        self, name: str, command: WorkCommand | Mapping[str, Any], timeout: float | None = None
    ) -> Any:
        """Run one turn of branch ``name`` and return its result (plain JSON data).

        Args:
            name: the branch (in the token's scope).
            command: a work command, or its wire form as a dict.
            timeout: seconds the turn may take; the server cancels it after
                that and the call raises ``TimeoutError``.

        Cancellation: cancelling the call closes the request; the server
        cancels the turn (or drops it, still queued).
        """
        result, _ = await self.ask_with_turn(name, command, timeout)
        return result

    async def ask_with_turn(
        self, name: str, command: WorkCommand | Mapping[str, Any], timeout: float | None = None
    ) -> tuple[Any, UUID | None]:
        """`ask`, returning the result and the turn's id (None for a command that is no turn)."""
        body: dict[str, Any] = {"command": _wire(command)}
        read = None
        if timeout is not None:
            body["timeout"] = timeout
            read = timeout + ANSWER_MARGIN
        answer = await self._call(
            "POST",
            f"/v1/branches/{_path(name)}/ask",
            json=body,
            name=name,
            timeout=httpx.Timeout(self._http.timeout.connect, read=read),
        )
        turn_id = answer.get("turn_id")
        if turn_id is None:  # a command that is no turn
            return answer.get("result"), None
        return answer.get("result"), _turn_id(turn_id, "answer.turn_id")

    async def send(self, name: str, command: WorkCommand | Mapping[str, Any]) -> UUID:
        """Queue a turn of branch ``name``; return its id once it has started.

        The turn goes on whatever the caller does; `turn` reports it.
        """
        body = {"command": _wire(command)}
        answer = await self._call("POST", f"/v1/branches/{_path(name)}/send", json=body, name=name)
        return _turn_id(answer.get("turn_id"), "answer.turn_id")

    async def turn(self, turn_id: UUID | str) -> dict[str, Any]:
        """A sent turn's ``state`` (``running``, ``done`` with ``result``, ``failed``
        with ``error``, ``suspended``) as the server reports it."""
        return await self._call("GET", f"/v1/turns/{turn_id}")

    @contextlib.asynccontextmanager
    async def stream(
        self, name: str, command: WorkCommand | Mapping[str, Any]
    ) -> AsyncIterator[ServedItems]:
        """Run a turn and iterate its items as they come, like `pride.stream`.

        ``async with client.stream("writer", Run("...")) as items: async for
        item in items: ...``. Items are plain data (a text chunk, a message in
        the codec's wire form). Leaving the block early closes the request,
        and the server cancels the turn.
        """
        body = {"command": _wire(command)}
        async with self._events("POST", f"/v1/branches/{_path(name)}/stream", body, name) as raw:
            yield ServedItems(raw, name)

    async def resolve(self, turn_id: UUID | str, decisions: Mapping[str, Any]) -> Any:
        """Decide a suspended turn's pending calls and return the continued turn's result.

        Args:
            turn_id: the turn (``ApprovalRequired.turn_id``).
            decisions: call id to ``pride.Approve()`` or ``pride.Deny(reason)``
                (or their wire forms).
        """
        wire = {
            call_id: decision if isinstance(decision, Mapping) else unstructure(decision)
            for call_id, decision in decisions.items()
        }
        answer = await self._call("POST", f"/v1/turns/{turn_id}/resolve", json={"decisions": wire})
        return answer.get("result")

    # ------------------------------------------------------------ the tree

    async def approvals(self) -> list[dict[str, Any]]:
        """The turns waiting for a decision (``turn_id``, ``branch``, ``pending``)."""
        answer = await self._call("GET", "/v1/approvals")
        return list(_field(answer, "approvals", list))

    async def branches(self) -> dict[str, Any]:
        """The tree as the token sees it: ``{"name", "branches": [...], "sessions": [...]}``,
        each branch with its ``state``, ``queued`` envelopes and ``turn_id``."""
        answer = await self._call("GET", "/v1/branches")
        return dict(_field(answer, "session", dict))

    async def messages(self, name: str, *, offset: int = 0, limit: int = 50) -> list[RoledMessage]:
        """A page of branch ``name``'s conversation, rebuilt as pride's messages."""
        answer = await self._call(
            "GET",
            f"/v1/branches/{_path(name)}/messages",
            params={"offset": offset, "limit": limit},
            name=name,
        )
        return structure(_field(answer, "messages", list), list[RoledMessage])

    @contextlib.asynccontextmanager
    async def events(
        self, *, branch: str | list[str] | None = None, types: list[type[Signal]] | None = None
    ) -> AsyncIterator[AsyncIterator[Signal]]:
        """The tree's signals as they happen, rebuilt as pride's `Signal` classes.

        ``async with client.events(branch="writer") as signals: async for s in
        signals: ...``. By default lifecycle, turns, approvals and tool
        progress; ``types`` picks signal classes instead. Signals the server
        dropped for a slow reader are logged here (a warning with the count).
        """
        params: dict[str, str] = {}
        if branch is not None:
            params["branch"] = branch if isinstance(branch, str) else ",".join(branch)
        if types:
            params["types"] = ",".join(cls.__name__ for cls in types)
        path = "/v1/events" + ("?" + str(httpx.QueryParams(params)) if params else "")
        async with self._events("GET", path, None, None) as raw:
            yield _Signals(raw)

    # ------------------------------------------------------------ targets

    def ref(self, name: str) -> ServedBranch:
        """A target for ``pride.ask/send/stream`` that reaches branch ``name`` through
        this server (`ServedBranch`): trio code only.

        Raises:
            RuntimeError: the client was not entered (``async with``) on trio.
        """
        if self._refs is None:
            raise RuntimeError(
                "client.ref() needs the client entered with `async with` in trio code "
                "(its targets are served by the client's own trio tasks)"
            )
        return ServedBranch(self, name, self._refs)

    # ------------------------------------------------------------ plumbing

    async def _call(
        self, method: str, path: str, *, name: str | None = None, **options: Any
    ) -> dict[str, Any]:
        request = self._http.build_request(method, path, **options)
        response = await self._http.send(request, stream=True)
        try:
            body = await self._answer(response)
        finally:
            await response.aclose()
        data = _json(body)
        if response.is_success and isinstance(data, dict):
            return data
        raise _refusal(response, data, name)

    async def _answer(self, response: httpx.Response) -> bytes:
        """The body of ``response`` (opened with ``stream=True``), decoded, within
        ``max_answer_bytes``.

        Raises:
            AnswerTooLarge: past the bound (a declared length, or the bytes read).
        """
        limit = self.max_answer_bytes
        declared = response.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise AnswerTooLarge("max_answer_bytes", limit, f"the answer ({int(declared):,} bytes)")
        body = bytearray()
        chunks = response.aiter_bytes()
        try:
            async for chunk in chunks:
                body += chunk
                if len(body) > limit:
                    raise AnswerTooLarge("max_answer_bytes", limit, "the answer")
        except AnswerTooLarge:
            await _close_half_read(response, chunks)
            raise
        return bytes(body)

    @contextlib.asynccontextmanager
    async def _events(
        self, method: str, path: str, body: Any, name: str | None
    ) -> AsyncIterator[_EventReader]:
        request = self._http.build_request(method, path, json=body)
        response = await self._http.send(request, stream=True)
        try:
            kind = response.headers.get("content-type", "")
            if not response.is_success or not kind.startswith("text/event-stream"):
                raise _refusal(response, _json(await self._answer(response)), name)
            reader = _EventReader(response, self.max_event_bytes)
            try:
                yield reader
            finally:
                await reader.aclose()
        finally:
            await response.aclose()


def _field(answer: Mapping[str, Any], key: str, kind: type) -> Any:
    """``answer[key]``, which must be a ``kind`` (a ``list`` or a ``dict``).

    Raises:
        InvalidMessage: it is missing or of another type (the server's bytes
            are as untrusted as a provider's: never a bare ``KeyError``).
    """
    value = answer.get(key)
    if not isinstance(value, kind):
        got = "nothing" if value is None else type(value).__name__
        raise InvalidMessage([(f"answer.{key}", f"expected a JSON {_KINDS[kind]}, got {got}")])
    return value


_KINDS: dict[type, str] = {list: "array", dict: "object"}


def _turn_id(value: Any, where: str) -> UUID:
    """The turn id the server sent at ``where``.

    Raises:
        InvalidMessage: it is not the text of a UUID.
    """
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return UUID(value)
    raise InvalidMessage([(where, f"expected a turn id, got {value!r:.80}")])


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past the reader's depth
        return body[:500].decode("utf-8", errors="replace")


def _refusal(response: httpx.Response, data: Any, name: str | None) -> BaseException:
    retry = response.headers.get("retry-after")
    # Whole seconds in ASCII digits: ``"²".isdigit()`` holds, and float() refuses it.
    retry_after = float(retry) if retry and retry.isascii() and retry.isdigit() else None
    described = data.get("error") if isinstance(data, dict) else data
    return rebuild(response.status_code, described, name=name, retry_after=retry_after)


class _EventReader:
    """The JSON data of each server-sent event of ``response``, in order.

    A class, not an async generator: one left unfinished (a block left early)
    is closed by `aclose`, where a generator would be left to the garbage
    collector, which trio warns about.
    """

    def __init__(self, response: httpx.Response, max_event_bytes: int) -> None:
        self._response = response
        self._chunks = response.aiter_raw()
        self._parser = SseParser(max_event_bytes)
        # A deque: one read may complete a million events (a transport may hand over
        # a whole answer at once), and taking each from the front of a list moved
        # the rest (16 MiB of events took 216 s).
        self._ready: collections.deque[str] = collections.deque()
        self._ended = False

    def __aiter__(self) -> _EventReader:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while not self._ready:
            if self._ended:
                raise StopAsyncIteration
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                self._ended = True
                self._ready.extend(self._parser.close())
                continue
            try:
                self._ready.extend(self._parser.feed(chunk))
            except LimitExceeded as exc:
                raise AnswerTooLarge(
                    "max_event_bytes", self._parser.max_event_bytes, "an event of the stream"
                ) from exc
        return _event(self._ready.popleft())

    async def aclose(self) -> None:
        """Close the response, and its body's iterators if the stream was left unread
        (`_close_half_read`)."""
        if self._ended:
            await self._response.aclose()
            return
        self._ended = True
        await _close_half_read(self._response, self._chunks)


async def _close_half_read(response: httpx.Response, chunks: AsyncIterator[bytes]) -> None:
    """Close ``response``, then run its body's iterator ``chunks`` to its end.

    httpx reads a body through a chain of async generators that do not close
    the ones they iterate: closing only the outermost would leave the inner
    ones to the garbage collector (trio warns of each). Closed first, the
    response makes the next read fail, and every layer ends by that.
    """
    await response.aclose()
    try:
        async for _ in chunks:
            pass
    except Exception as exc:  # the expected end of a read on a closed response
        log.debug("closing a half-read answer ended its read with %r", exc)


def _event(data: str) -> dict[str, Any]:
    try:
        event = json.loads(data)
    except (ValueError, RecursionError):
        raise InvalidMessage([("event", "the server sent an event that is not JSON")]) from None
    if not isinstance(event, dict):
        raise InvalidMessage([("event", "the server sent an event that is not an object")])
    return event


class _Signals:
    """Signals rebuilt from the events of ``GET /v1/events`` (drops logged, not yielded)."""

    def __init__(self, events: _EventReader) -> None:
        self._events = events

    def __aiter__(self) -> _Signals:
        return self

    async def __anext__(self) -> Signal:
        while True:
            event = await self._events.__anext__()
            if event.get("type") == "dropped":
                log.warning(
                    "the server dropped %s signals for this slow reader", event.get("count")
                )
                continue
            return structure(event, Signal)
