"""The native API: turns of the tree's branches over HTTP, in the codec's wire form.

* ``POST /v1/branches/{name}/ask`` ``{"command": <wire form>, "timeout": seconds?}``
  → ``{"ok": true, "result": ..., "turn_id": ...}``, or an error answer
  ``{"ok": false, "error": {"type", "message", ...}}`` with the status of
  `pride.serve._status`. A client that disconnects cancels the turn.
* ``POST /v1/branches/{name}/stream`` → ``text/event-stream``: ``start``
  (the turn id), one ``item`` per stream item, then ``end`` or ``error``;
  keep-alive comments while idle. A client that disconnects cancels the turn.
* ``POST /v1/branches/{name}/send`` → 202 ``{"ok": true, "turn_id": ...}``
  once the turn has started (`pride.serve._turns`); the turn goes on
  whatever the client does.
* ``GET /v1/turns/{turn_id}``, ``POST /v1/turns/{turn_id}/resolve``
  ``{"decisions": {call_id: {"type": "Approve"} | {"type": "Deny", "reason": ...}}}``,
  ``GET /v1/approvals``, ``GET /v1/branches``, ``GET /v1/branches/{name}/messages``.

Commands are decoded by `pride.messages.requests`, as ``pride run``'s
request lines are: the same wire form, the same trust rules.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any
from uuid import UUID

import trio

from ..actors import Reply, stream
from ..errors import InvalidMessage, TurnCancelled, UnknownTurn
from ..messages import Resume, WorkCommand, unstructure
from ..messages.requests import decode_command, plain_result
from ._app import Front, mailbox_full
from ._auth import Grant
from ._http import (
    KEEPALIVE_COMMENT,
    SSE_HEADERS,
    HttpError,
    Request,
    encode_sse,
    respond_json,
    watch_disconnect,
)
from ._status import TurnTimeout
from ._turns import StartedReply, waiting

__all__ = [
    "approvals",
    "ask",
    "branches",
    "flows",
    "messages",
    "read_body",
    "resolve",
    "send_turn",
    "stream_turn",
    "traces",
    "turn",
]

MAX_PAGE = 500
"""The most messages one page of ``GET /v1/branches/{name}/messages`` holds."""


async def read_body(front: Front, request: Request) -> Any:
    """The request's JSON body, within the server's size and time bounds."""
    return await request.json(front.options.max_body_bytes, front.options.body_timeout)


def _work(front: Front, body: Any, *, timeout: bool = True) -> tuple[WorkCommand, float | None]:
    """The command (decoded by the one decoder) and timeout of a work request's body."""
    if not isinstance(body, dict):
        raise InvalidMessage([("request", f"expected an object, got {type(body).__name__}")])
    allowed = {"command", "timeout"} if timeout else {"command"}
    problems = []
    unknown = sorted(set(body) - allowed)
    if unknown:
        problems.append(("request", f"unknown keys: {', '.join(unknown)}"))
    if "command" not in body:
        problems.append(("request.command", "missing"))
    seconds = body.get("timeout")
    if seconds is not None and (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        problems.append(("request.timeout", "expected a positive number of seconds"))
        seconds = None
    if problems:
        raise InvalidMessage(problems)
    command = decode_command(
        body["command"], image_urls=front.options.image_urls, where="request.command"
    )
    return command, (float(seconds) if seconds is not None else None)


def _deadline(timeout: float | None) -> contextlib.AbstractContextManager[Any]:
    return trio.fail_after(timeout) if timeout is not None else contextlib.nullcontext()


async def ask(front: Front, request: Request, grant: Grant, name: str) -> None:
    """``POST /v1/branches/{name}/ask``: run one turn and answer its result."""
    command, timeout = _work(front, await read_body(front, request))
    target, command = await front.target(name, grant, command)
    assert front.nursery is not None
    async with front.slot():
        with watch_disconnect(request, front.nursery) as watch:
            reply: Reply | None = None
            try:
                try:
                    with _deadline(timeout):
                        reply = await front.deliver(target, command)
                        result = await reply.result()
                except BaseException:
                    # Timed out, the client went away, or the server stops: the turn
                    # ends with its request (ask's rule), never runs on unanswered.
                    if reply is not None and not reply.done:
                        reply.cancel("caller")
                    raise
            except trio.TooSlowError:
                assert timeout is not None
                raise TurnTimeout(timeout) from None
        if watch.gone:
            return
    turn_id = str(reply.turn_id) if reply.turn_id is not None else None
    answer = {"ok": True, "result": plain_result(result), "turn_id": turn_id}
    await respond_json(request.send, 200, answer)


async def stream_turn(front: Front, request: Request, grant: Grant, name: str) -> None:
    """``POST /v1/branches/{name}/stream``: the turn's items as server-sent events."""
    command, timeout = _work(front, await read_body(front, request))
    target, command = await front.target(name, grant, command)
    assert front.nursery is not None
    async with front.slot():
        with watch_disconnect(request, front.nursery):
            async with contextlib.AsyncExitStack() as stack:
                with trio.move_on_after(front.options.queue_wait) as waiting:
                    items = await stack.enter_async_context(stream(target, command))
                if waiting.cancelled_caught:
                    raise mailbox_full(target)
                await request.send(
                    {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS}
                )
                await _pump(front, request, items, timeout)


async def _pump(front: Front, request: Request, items: Any, timeout: float | None) -> None:
    """Write ``items`` as events, keep-alive comments while idle, then the terminal event."""
    send = request.send
    iterator = items.__aiter__()
    reply = items.reply
    started = False
    error: BaseException | None = None
    keepalive = front.options.keepalive

    async def body(data: bytes) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})

    def start() -> bytes:
        """The ``start`` event, the first time only. It goes out in one write with the
        event after it: each write is a send on the socket, on the first item's path."""
        nonlocal started
        if started:
            return b""
        started = True
        turn_id = str(reply.turn_id) if reply.turn_id is not None else None
        return encode_sse("start", {"event": "start", "turn_id": turn_id})

    deadline = trio.current_time() + timeout if timeout is not None else math.inf
    while True:
        item: Any = None
        with trio.move_on_at(min(deadline, trio.current_time() + keepalive)) as idle:
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:  # the turn failed: its error is the terminal event
                error = exc
                break
        if idle.cancelled_caught:
            if trio.current_time() >= deadline:
                assert timeout is not None
                reply.cancel("timeout")
                error = TurnTimeout(timeout)
                break
            await body(KEEPALIVE_COMMENT)
            continue
        await body(start() + encode_sse("item", {"event": "item", "item": plain_result(item)}))
    opening = start()
    turn_id = str(reply.turn_id) if reply.turn_id is not None else None
    if error is None:
        final = encode_sse("end", {"event": "end", "ok": True, "turn_id": turn_id})
    else:
        from ._status import native_error

        described = {"event": "error", **native_error(error), "turn_id": turn_id}
        final = encode_sse("error", described)
    await send({"type": "http.response.body", "body": opening + final, "more_body": False})


async def send_turn(front: Front, request: Request, grant: Grant, name: str) -> None:
    """``POST /v1/branches/{name}/send``: queue a turn; 202 with its id once it starts."""
    command, _ = _work(front, await read_body(front, request), timeout=False)
    if not command.model_turn:
        raise InvalidMessage(
            [("request.command", f"{type(command).__name__} is not a turn; send it with ask")]
        )
    target, command = await front.target(name, grant, command)
    assert front.nursery is not None
    reply = StartedReply(target, command)
    # The place first: a 503 must mean nothing was queued (the client may retry).
    async with front.slot():
        delivered = False
        with trio.move_on_after(front.options.queue_wait):
            # send()'s rule: cancelled means nothing was queued (check before delivering).
            await trio.lowlevel.checkpoint_if_cancelled()
            await target.deliver(reply)
            delivered = True
        if not delivered:
            raise mailbox_full(target)
        with watch_disconnect(request, front.nursery) as watch:
            await reply.started.wait()  # the turn goes on if the client leaves meanwhile
    if reply.turn_id is None:  # refused before it started (the branch stopped, ...)
        front.nursery.start_soon(_consume, reply)
        if watch.gone:
            return
        await reply.result()  # raises its error, answered by the dispatcher
        return
    front.turns.follow(front.nursery, reply.turn_id, target.name, reply)
    if not watch.gone:
        await respond_json(request.send, 202, {"ok": True, "turn_id": str(reply.turn_id)})


async def _consume(reply: Reply) -> None:
    with contextlib.suppress(Exception):
        await reply.result()


def _turn_id(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise UnknownTurn(text, "this server (not a turn id)") from None


async def turn(front: Front, request: Request, grant: Grant, turn_id: str) -> None:
    """``GET /v1/turns/{turn_id}``: a sent turn's state and outcome."""
    followed = front.turns.get(_turn_id(turn_id))
    if followed is None or not grant.reaches(followed.branch):
        raise UnknownTurn(turn_id, "this server")
    await respond_json(request.send, 200, {"ok": True, **followed.describe()})


async def resolve(front: Front, request: Request, grant: Grant, turn_id: str) -> None:
    """``POST /v1/turns/{turn_id}/resolve``: decide a suspended turn's calls; its result."""
    identity = _turn_id(turn_id)
    body = await read_body(front, request)
    if not isinstance(body, dict) or set(body) - {"decisions"}:
        raise InvalidMessage([("request", 'expected {"decisions": {call_id: decision}}')])
    data = {"type": "Resume", "turn_id": str(identity), "decisions": body.get("decisions") or {}}
    command = decode_command(data, image_urls=front.options.image_urls, where="request")
    assert isinstance(command, Resume)
    waits = waiting(front.session, identity)
    if waits is None or not grant.reaches(waits.branch_name):
        raise UnknownTurn(turn_id, "this server (no turn waits for approval with that id)")
    followed = front.turns.get(identity)
    assert front.nursery is not None
    resolved = False
    async with front.slot():
        if followed is not None:
            front.turns.resolving(followed)
        with watch_disconnect(request, front.nursery) as watch:
            try:
                result = await front.session.resolve(identity, command.decisions)
                resolved = True
            except Exception as exc:
                if followed is not None:  # refused (an unknown call id) or the turn failed
                    front.turns.settled(followed, None, waiting(front.session, identity) or exc)
                raise
        if not resolved:  # the client left, and the resolve was cancelled with it
            # Its turn is cancelled with the request (ask's rule), unless the Resume
            # was dropped still queued: then the turn still waits for a decision.
            if followed is not None:
                gone = TurnCancelled("caller", "the request resolving it was closed")
                front.turns.settled(followed, None, waiting(front.session, identity) or gone)
            return
    # A client that left as the turn ended (``watch.gone`` after the result came) is
    # not answered, but the turn did end so: GET /v1/turns says it, not a cancellation.
    if followed is not None:
        front.turns.settled(followed, result, None)
    if watch.gone:
        return
    answer = {"ok": True, "result": plain_result(result), "turn_id": str(identity)}
    await respond_json(request.send, 200, answer)


async def approvals(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/approvals``: the turns waiting for a decision, within the token's scope."""
    waiting = [
        {
            "turn_id": str(t.turn_id),
            "branch": t.branch_name,
            "pending": [
                {"call_id": c.call_id, "function": c.function, "arguments": dict(c.arguments)}
                for c in t.pending
            ],
        }
        for t in front.session.suspended_turns()
        if grant.reaches(t.branch_name)
    ]
    await respond_json(request.send, 200, {"ok": True, "approvals": waiting})


def _describe_branch(front: Front, branch: Any) -> dict[str, Any]:
    mailbox = branch.mailbox_statistics()
    turn_id = branch.active_turn_id
    state = "stopped" if not branch.running else "busy" if turn_id is not None else "idle"
    activity = front.activity
    last = activity.last_turn(branch.id)
    usage = branch.usage
    return {
        "name": branch.name,
        "id": str(branch.id),
        "state": state,
        "queued": mailbox.queued if mailbox is not None else 0,
        "turn_id": str(turn_id) if turn_id is not None else None,
        "turn_elapsed": activity.elapsed(branch.id, turn_id),
        "restarts": activity.restarts(branch.id),
        "last_turn": last.describe() if last is not None else None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": usage.cost_usd,
        },
    }


def tree(front: Front, session: Any, grant: Grant) -> dict[str, Any]:
    """``session`` and those below it, with the branches ``grant`` reaches."""
    return {
        "name": session.name,
        "branches": [
            _describe_branch(front, branch)
            for branch in session.branches
            if branch.id not in front.clones and grant.reaches(branch.name)
        ],
        "sessions": [tree(front, child, grant) for child in session.sessions],
    }


async def branches(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/branches``: the tree, its branches' state and mailbox depth."""
    await respond_json(
        request.send, 200, {"ok": True, "session": tree(front, front.session, grant)}
    )


def _count(request: Request, key: str, default: int, ceiling: int) -> int:
    raw = request.query.get(key)
    if raw is None:
        return default
    # ASCII digits only: "²".isdigit() holds and int() refuses it; "٣" is int() 3.
    if not (raw.isascii() and raw.isdigit()) or int(raw) > ceiling:
        raise InvalidMessage([(f"query.{key}", f"expected a whole number up to {ceiling}")])
    return int(raw)


async def traces(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/traces?limit=20``: recent turns as trees of timed spans (``--console``)."""
    if front.traces is None:
        raise HttpError(404, "NotFound", "turns are recorded with --console only")
    limit = _count(request, "limit", 20, 100)
    recent = front.traces.recent(limit, grant.reaches)
    await respond_json(request.send, 200, {"ok": True, "traces": recent})


async def flows(front: Front, request: Request, grant: Grant) -> None:
    """``GET /v1/flows``: recent flow runs and their nodes' states (``--console``).

    Their nodes may target any branch: a token with scopes sees none.
    """
    if front.flows is None:
        raise HttpError(404, "NotFound", "flow runs are followed with --console only")
    runs = front.flows.describe() if not grant.scopes else []
    await respond_json(request.send, 200, {"ok": True, "flows": runs})


async def messages(front: Front, request: Request, grant: Grant, name: str) -> None:
    """``GET /v1/branches/{name}/messages?offset=0&limit=50``: a page of the conversation."""
    branch = await front.lookup(name, grant)
    offset = _count(request, "offset", 0, 2**53)
    limit = _count(request, "limit", 50, MAX_PAGE)
    history = branch.messages
    page = history[offset : offset + limit]
    answer = {
        "ok": True,
        "branch": branch.name,
        "total": len(history),
        "offset": offset,
        "limit": limit,
        "messages": [unstructure(message) for message in page],
    }
    await respond_json(request.send, 200, answer)
