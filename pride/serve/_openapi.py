"""``GET /openapi.json``: the front door described in OpenAPI 3.1 (paths, bodies, errors).

Written out here rather than generated: the handlers read bodies by hand
(bounded, strict), so there is no model class to generate it from, and the
document is the contract users read; ``tests/serve`` checks that every
route it lists is one the server answers.
"""

from __future__ import annotations

from typing import Any

from .._version import __version__
from ._app import Front
from ._auth import Grant
from ._http import Request, respond_json

__all__ = ["DOCUMENT", "document"]


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


_ERROR = _json(
    {
        "type": "object",
        "properties": {
            "ok": {"const": False},
            "error": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
                "required": ["type", "message"],
            },
        },
    }
)
_ERRORS = {
    str(code): {"description": text, **_ERROR}
    for code, text in (
        (400, "InvalidMessage: malformed JSON, wrong types, a model configuration"),
        (401, "no or wrong bearer token"),
        (404, "UnknownBranch / UnknownTurn (or out of the token's scope)"),
        (409, "ApprovalRequired / ApprovalPending"),
        (413, "the body is over --max-body-bytes"),
        (429, "BudgetExceeded"),
        (502, "ProviderError"),
        (503, "MailboxFull, --max-concurrent, --max-watchers, draining (Retry-After)"),
        (504, "the request's timeout passed (the turn was cancelled)"),
    )
}
_WORK = _json(
    {
        "type": "object",
        "properties": {
            "command": {
                "type": "object",
                "description": "a work command in pride's wire form: "
                '{"type": "ChatAndRecord", "instruction": "..."}',
                "properties": {"type": {"type": "string"}},
                "required": ["type"],
            },
            "timeout": {"type": "number", "exclusiveMinimum": 0},
        },
        "required": ["command"],
    }
)
_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
_TURN = {"name": "turn_id", "in": "path", "required": True, "schema": {"type": "string"}}
_SSE = {"content": {"text/event-stream": {"schema": {"type": "string"}}}}


def _op(summary: str, responses: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"summary": summary, "responses": {**responses, **_ERRORS}, **extra}


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "pride serve", "version": __version__},
    "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    "security": [{"bearer": []}],
    "paths": {
        "/healthz": {"get": {"summary": "alive", "security": [], "responses": {"200": {}}}},
        "/readyz": {
            "get": {
                "summary": "the tree is built and not draining",
                "security": [],
                "responses": {"200": {}, "503": {}},
            }
        },
        "/metrics": {"get": _op("Prometheus text format", {"200": {}})},
        "/openapi.json": {"get": _op("this document", {"200": {}})},
        "/v1/branches": {"get": _op("the tree: sessions, branches, state, mailboxes", {"200": {}})},
        "/v1/branches/{name}/ask": {
            "post": _op(
                "run one turn; its result",
                {"200": {"description": '{"ok": true, "result", "turn_id"}'}},
                parameters=[_NAME],
                requestBody=_WORK,
            )
        },
        "/v1/branches/{name}/stream": {
            "post": _op(
                "run one turn; its items as server-sent events (start, item..., end | error)",
                {"200": _SSE},
                parameters=[_NAME],
                requestBody=_WORK,
            )
        },
        "/v1/branches/{name}/send": {
            "post": _op(
                "queue one turn; 202 with its turn id once it starts",
                {"202": {"description": '{"ok": true, "turn_id"}'}},
                parameters=[_NAME],
                requestBody=_WORK,
            )
        },
        "/v1/branches/{name}/messages": {
            "get": _op(
                "a page of the conversation (?offset=0&limit=50)",
                {"200": {}},
                parameters=[_NAME],
            )
        },
        "/v1/turns/{turn_id}": {
            "get": _op("a sent turn's state and outcome", {"200": {}}, parameters=[_TURN])
        },
        "/v1/turns/{turn_id}/resolve": {
            "post": _op(
                "decide a suspended turn's pending calls; its result",
                {"200": {}},
                parameters=[_TURN],
                requestBody=_json({"type": "object", "properties": {"decisions": {}}}),
            )
        },
        "/v1/approvals": {"get": _op("turns waiting for a decision", {"200": {}})},
        "/v1/events": {"get": _op("the tree's signals (?types=...&branch=...)", {"200": _SSE})},
        "/v1/flows": {
            "get": _op("recent flow runs and their nodes' states (--console)", {"200": {}})
        },
        "/v1/traces": {
            "get": _op("recent turns as trees of timed spans (?limit=20; --console)", {"200": {}})
        },
        "/v1/models": {"get": _op("OpenAI: the branches, as models", {"200": {}})},
        "/v1/chat/completions": {
            "post": _op(
                "OpenAI: one turn of a transient clone of the branch named by model",
                {"200": {}},
                requestBody=_json({"type": "object", "required": ["model", "messages"]}),
            )
        },
    },
}
"""The OpenAPI document served."""


async def document(front: Front, request: Request, grant: Grant) -> None:
    """``GET /openapi.json``."""
    await respond_json(request.send, 200, DOCUMENT)
