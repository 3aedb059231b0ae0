"""The structure ``operate`` asks the model for, and how its JSON is taken apart.

The reference system builds a dynamic model from the response format plus a
``reason`` field and the action fields. pride composes the same thing at the
JSON-schema level: the response format's top-level properties, then

* ``reason``: ``{title, content, confidence_score}`` (``reason=True``);
* ``action_required`` and ``action_requests: [{function, arguments}]`` (only
  on the fenced-JSON path: with native tool calling the model calls tools
  through the provider instead);
* ``answer``: a string, when there is no response format but the reply must
  be JSON anyway (so the answer has somewhere to go).

The model's object is split back: the extra fields become a
[`Reason`][pride.Reason] and
[`ActionCall`][pride.ActionCall] s, the rest is built into the response
format as a parse would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import msgspec

from ..errors import ParseFailed
from ..messages import ActionCall
from ..messages.codec import scrub
from .formats import convert, format_name, format_schema
from .results import Reason

__all__ = ["Operative", "Parsed"]

_REASON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Your reasoning: a short title, the content, and a confidence_score in [0, 1].",
    "properties": {
        "title": {"type": ["string", "null"]},
        "content": {"type": ["string", "null"]},
        "confidence_score": {"type": ["number", "null"]},
    },
}
_ACTION_REQUESTS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": (
        "Tool calls to make now, each {'function': tool name, 'arguments': {...}}; "
        "empty when no tool is needed."
    ),
    "items": {
        "type": "object",
        "properties": {"function": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["function", "arguments"],
    },
}
_ANSWER_SCHEMA: dict[str, Any] = {"type": "string", "description": "Your answer."}


@attrs.frozen
class Parsed:
    """A structured reply taken apart: the output, the reason, the requested calls."""

    output: Any
    reason: Reason | None = None
    calls: tuple[ActionCall, ...] = ()


class Operative:
    """What one operate call asks for: ``schema`` for the request, ``build`` for the reply.

    Args:
        response_format: the caller's format, or None.
        reason: add the ``reason`` field.
        actions: add the action fields (the fenced-JSON path).

    Raises:
        TypeError: no JSON schema can be derived from ``response_format``.
        ValueError: the response format is not an object, or already has a
            field operate needs to add.
    """

    __slots__ = ("actions", "answer", "reason", "response_format", "schema")

    def __init__(self, response_format: Any, *, reason: bool, actions: bool) -> None:
        self.response_format = response_format
        self.reason = reason
        self.actions = actions
        self.answer = response_format is None and (reason or actions)
        base = format_schema(response_format)
        self.schema: dict[str, Any] | None = base
        if not (reason or actions):
            return
        body: dict[str, Any] = dict(base["schema"]) if base is not None else {"type": "object"}
        if body.get("type", "object") != "object":
            raise ValueError(
                f"operate with reason or actions needs an object response format, "
                f"not {body.get('type')!r}"
            )
        found = body.get("properties")
        properties = dict(found) if isinstance(found, Mapping) else {}  # a schema from outside
        added: dict[str, Any] = {}
        if reason:
            added["reason"] = _REASON_SCHEMA
        if actions:
            added["action_required"] = {"type": "boolean"}
            added["action_requests"] = _ACTION_REQUESTS_SCHEMA
        if self.answer:
            added["answer"] = _ANSWER_SCHEMA
        clash = sorted(set(added) & set(properties))
        if clash:
            raise ValueError(
                f"response_format {format_name(response_format)!r} already has "
                f"{', '.join(clash)}, which operate adds; rename the field or turn the option off"
            )
        body["properties"] = {**properties, **added}
        name = base["name"] if base is not None else "operate_response"
        self.schema = {"name": name, "schema": body}

    @property
    def structured(self) -> bool:
        """True when the reply must be JSON (anything beyond plain text was asked for)."""
        return self.schema is not None

    @property
    def name(self) -> str:
        """A readable name for error messages."""
        return format_name(self.response_format) if self.response_format is not None else "JSON"

    def build(self, data: Any) -> Parsed:
        """Take the model's decoded JSON apart.

        Raises:
            ParseFailed: it is not an object, a field does not fit, or an
                action request is malformed.
        """
        if not (self.reason or self.actions):
            return Parsed(convert(data, self.response_format))
        if not isinstance(data, dict):
            raise ParseFailed(f"expected a JSON object, got {type(data).__name__}")
        rest = dict(data)
        reason = _reason(rest.pop("reason", None)) if self.reason else None
        calls: tuple[ActionCall, ...] = ()
        if self.actions:
            rest.pop("action_required", None)
            calls = _calls(rest.pop("action_requests", None))
        if self.response_format is None:
            answer = rest.pop("answer", None)
            # Read leniently from the model's text (a NaN included), given back as
            # strict JSON text (null for a NaN).
            output = (
                answer if answer is None or isinstance(answer, str) else json.dumps(scrub(answer))
            )
        else:
            output = convert(rest, self.response_format)
        return Parsed(output, reason, calls)


def _reason(raw: Any) -> Reason | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return Reason(content=raw)
    try:
        return msgspec.convert(raw, Reason, strict=False)
    except (msgspec.ValidationError, TypeError) as exc:
        raise ParseFailed(f"reason: {exc}") from None


def _calls(raw: Any) -> tuple[ActionCall, ...]:
    if raw is None:
        return ()
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        raise ParseFailed(f"action_requests must be a list, got {type(raw).__name__}")
    calls = []
    for index, item in enumerate(raw):
        where = f"action_requests[{index}]"
        if not isinstance(item, Mapping):
            raise ParseFailed(f"{where} must be an object, got {type(item).__name__}")
        function = item.get("function", item.get("name"))
        if not isinstance(function, str) or not function:
            raise ParseFailed(f"{where}.function must be a tool name")
        arguments = item.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except (ValueError, RecursionError):  # RecursionError: nested past the reader's depth
                raise ParseFailed(f"{where}.arguments is not valid JSON") from None
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ParseFailed(f"{where}.arguments must be an object")
        calls.append(ActionCall(function, dict(arguments)))
    return tuple(calls)
