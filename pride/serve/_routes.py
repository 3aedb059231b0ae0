"""Which handler answers which path: the route table of the front door.

A path is matched segment by segment on its raw form, each segment
percent-decoded on its own, so a branch name may hold a ``/`` (a virtual
branch's ``kind/key``) written plainly or as ``%2F``: everything between
``/v1/branches/`` and the verb is the name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import _events, _native, _openai, _openapi
from ._app import Front, Handler
from ._auth import Grant
from ._http import HttpError, Request, respond
from ._metrics import CONTENT_TYPE

__all__ = ["route"]

_VERBS = {"ask": "POST", "stream": "POST", "send": "POST", "messages": "GET"}
_BRANCH_HANDLERS: dict[str, Handler] = {
    "ask": _native.ask,
    "stream": _native.stream_turn,
    "send": _native.send_turn,
    "messages": _native.messages,
}


async def metrics(front: Front, request: Request, grant: Grant) -> None:
    """``GET /metrics``: the tree's figures, for Prometheus."""
    reachable = [b for b in _all_branches(front.session) if b.id not in front.clones]
    text = front.metrics.render(front.session, reachable, front.in_flight, front.watching)
    await respond(request.send, 200, text, CONTENT_TYPE)


def _all_branches(session: Any) -> list[Any]:
    found = list(session.branches)
    for child in session.sessions:
        found.extend(_all_branches(child))
    return found


_FIXED: dict[tuple[str, ...], tuple[str, str, str, Handler]] = {
    ("metrics",): ("GET", "/metrics", "native", metrics),
    ("openapi.json",): ("GET", "/openapi.json", "native", _openapi.document),
    ("v1", "branches"): ("GET", "/v1/branches", "native", _native.branches),
    ("v1", "approvals"): ("GET", "/v1/approvals", "native", _native.approvals),
    ("v1", "events"): ("GET", "/v1/events", "native", _events.events),
    ("v1", "traces"): ("GET", "/v1/traces", "native", _native.traces),
    ("v1", "flows"): ("GET", "/v1/flows", "native", _native.flows),
    ("v1", "models"): ("GET", "/v1/models", "openai", _openai.models),
    ("v1", "chat", "completions"): ("POST", "/v1/chat/completions", "openai", _openai.completions),
}


def _wrong_method(allowed: str, label: str) -> HttpError:
    return HttpError(
        405,
        "MethodNotAllowed",
        f"{label} answers {allowed}",
        headers=[(b"allow", allowed.encode())],
    )


def route(method: str, segments: Sequence[str]) -> tuple[str, str, Handler, tuple[Any, ...]]:
    """The handler for a request: its route label (for metrics), its family
    (``"native"`` or ``"openai"``: the error body), the handler and its arguments.

    Raises:
        HttpError: 404 for no such path, 405 for a method the path does not answer.
    """
    parts = tuple(segments[1:]) if segments and segments[0] == "" else tuple(segments)
    fixed = _FIXED.get(parts)
    if fixed is not None:
        allowed, label, family, handler = fixed
        if method != allowed:
            raise _wrong_method(allowed, label)
        return label, family, handler, ()
    if len(parts) >= 4 and parts[:2] == ("v1", "branches") and parts[-1] in _VERBS:
        name = "/".join(parts[2:-1])
        verb = parts[-1]
        label = f"/v1/branches/{{name}}/{verb}"
        if name:
            if method != _VERBS[verb]:
                raise _wrong_method(_VERBS[verb], label)
            return label, "native", _BRANCH_HANDLERS[verb], (name,)
    if len(parts) == 3 and parts[:2] == ("v1", "turns") and parts[2]:
        if method != "GET":
            raise _wrong_method("GET", "/v1/turns/{turn_id}")
        return "/v1/turns/{turn_id}", "native", _native.turn, (parts[2],)
    if len(parts) == 4 and parts[:2] == ("v1", "turns") and parts[3] == "resolve":
        if method != "POST":
            raise _wrong_method("POST", "/v1/turns/{turn_id}/resolve")
        return "/v1/turns/{turn_id}/resolve", "native", _native.resolve, (parts[2],)
    raise HttpError(404, "NotFound", "no such path (GET /openapi.json lists them)")
