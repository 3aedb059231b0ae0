"""A listed tool's schemas, checked once, when the tool is listed.

A schema pride offers to models and applies to their arguments must be one
it can apply (`pride.mcp._bounds`) and one a provider will take: at most
`MAX_SCHEMA_BYTES` as JSON, nested at most `MAX_SCHEMA_DEPTH` levels, valid
against its dialect's metaschema, and every pattern one the ``regex`` engine
compiles. `check_tool` makes the checks (a millisecond a schema, most of it
the metaschema: ``_listing`` runs it in worker threads), and a tool that
fails one is not offered.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import attrs
import jsonschema
import pydantic
import regex
from mcp import types

from ._bounds import BoundedSchema, compiled_pattern, short, validator_class

__all__ = ["MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "CheckedTool", "check_tool", "tool_key"]

MAX_SCHEMA_BYTES = 64 * 1024
"""The largest schema accepted (as JSON); a tool with a larger one is not offered."""

MAX_SCHEMA_DEPTH = 64
"""How deeply a schema's JSON may nest (32 levels of objects in objects, say)."""


@attrs.frozen
class CheckedTool:
    """A listed tool pride can offer: its schemas, checked, and how to apply them.

    Attributes:
        tool: the server's tool, as listed.
        key: the tool's definition as JSON (name, description, schemas): equal
            keys mean an unchanged tool.
        input: its input schema.
        output: its output schema, if it has one.
    """

    tool: types.Tool
    key: str
    input: BoundedSchema
    output: BoundedSchema | None


def tool_key(raw: Any) -> str:
    """A listed tool's definition as JSON (equal for an unchanged tool).

    Raises:
        ValueError: it is not a JSON object (or not JSON data at all).
    """
    if not isinstance(raw, dict):
        raise ValueError("its definition is not a JSON object")
    try:
        return json.dumps(raw, sort_keys=True)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"its definition is not JSON data ({type(exc).__name__})") from None


def check_tool(
    raw: dict[str, Any], key: str, memo: dict[tuple[str, str], dict[str, Any] | str] | None = None
) -> CheckedTool:
    """A listed tool (a ``tools/list`` entry) checked; a worker thread's job for a long list.

    Args:
        raw: the tool's entry in the list.
        key: its `tool_key`.
        memo: schemas already checked in this listing (many tools share one),
            filled in here.

    Raises:
        ValueError: pride cannot offer the tool; the message says why.
    """
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ValueError("its name is empty")
    try:
        tool = types.Tool.model_validate(raw)
    except pydantic.ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "(the tool)"
        raise ValueError(f"it is not an MCP tool: {where}: {short(problem['msg'])}") from None
    memo = {} if memo is None else memo
    schema = _memoised("input", tool.inputSchema, memo)
    if schema.get("type") != "object":
        raise ValueError('its input schema is not a JSON schema of "type": "object"')
    output = None
    if tool.outputSchema is not None:
        output = BoundedSchema(_memoised("output", tool.outputSchema, memo))
    return CheckedTool(tool, key, BoundedSchema(schema), output)


def _memoised(
    what: str, schema: Any, memo: dict[tuple[str, str], dict[str, Any] | str]
) -> dict[str, Any]:
    """`_checked_schema`, once per distinct schema (the checked copy is shared: never changed)."""
    if not isinstance(schema, dict):
        raise ValueError(f"its {what} schema is not a JSON object")
    depth = _depth(schema, MAX_SCHEMA_DEPTH)
    if depth > MAX_SCHEMA_DEPTH:
        raise ValueError(
            f"its {what} schema nests deeper than {MAX_SCHEMA_DEPTH} levels (MAX_SCHEMA_DEPTH)"
        )
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"its {what} schema is not JSON data ({exc})") from None
    outcome = memo.get((what, text))
    if outcome is None:
        try:
            outcome = _checked_schema(what, schema, len(text))
        except ValueError as exc:
            outcome = str(exc)
        memo[what, text] = outcome
    if isinstance(outcome, str):
        raise ValueError(outcome)
    return outcome


def _checked_schema(what: str, schema: dict[str, Any], size: int) -> dict[str, Any]:
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"its {what} schema is {size} bytes (MAX_SCHEMA_BYTES={MAX_SCHEMA_BYTES})")
    try:
        validator_class(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(
            f"its {what} schema is not valid JSON Schema: {short(exc.message)}"
        ) from None
    except Exception as exc:  # an unknown $schema, a metaschema check that trips
        raise ValueError(
            f"its {what} schema cannot be checked ({type(exc).__name__}: {short(exc)})"
        ) from None
    for pattern in _patterns(schema):
        try:
            compiled_pattern(pattern)
        except (regex.error, RecursionError, ValueError) as exc:
            raise ValueError(
                f"its {what} schema has a pattern pride cannot apply: {pattern[:100]!r} ({exc})"
            ) from None
    return copy.deepcopy(schema)


def _depth(value: Any, limit: int, level: int = 1) -> int:
    """How deeply ``value`` nests (counting stops just past ``limit``)."""
    if level > limit:
        return level
    children: Any
    if isinstance(value, dict):
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return level - 1
    deepest = level
    for child in children:
        if isinstance(child, dict | list):
            deepest = max(deepest, _depth(child, limit, level + 1))
            if deepest > limit:
                break
    return deepest


def _patterns(value: Any) -> Iterator[str]:
    """Every ``pattern`` and ``patternProperties`` key in a schema (and a few look-alikes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "pattern" and isinstance(item, str):
                yield item
            elif key == "patternProperties" and isinstance(item, dict):
                yield from (name for name in item if isinstance(name, str))
            yield from _patterns(item)
    elif isinstance(value, list):
        for item in value:
            yield from _patterns(item)
