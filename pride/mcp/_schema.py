"""A server's JSON Schemas: checked when they are listed, applied within bounds.

Both sides of a schema check are untrusted here. The schemas are the
server's (a tool's ``inputSchema`` and ``outputSchema``), and what they are
applied to is the model's (a call's arguments) or the server's again (a
result's ``structuredContent``). jsonschema, the SDK's own dependency, has the
semantics right but puts no bound on the work:

* a ``pattern`` (or a ``patternProperties`` key) that backtracks, such as
  ``^(a|aa)+$``, runs in ``re`` for as long as it likes while holding the GIL,
  so neither a thread nor a cancel scope can stop it;
* ``uniqueItems`` compares every pair of items (3,000 objects took 6.9 s);
* a ``$ref`` that loops recurses until ``RecursionError``, and ``anyOf`` over
  ``$ref``\\ s doubles its paths at every level.

pride keeps jsonschema's keywords and bounds them (`bounded_validator`):

* regular expressions run on the ``regex`` engine, which takes a timeout and
  lets go of the GIL while it matches (``re`` does neither);
* ``uniqueItems`` hashes a canonical form of each item: linear, with JSON's
  equality (``1 == 1.0``, ``true != 1``, key order ignored);
* every keyword application is counted: more than `MAX_NESTING` nested at once
  is a schema that refers to itself (or absurd nesting); more than
  `MAX_STEPS` in all, or past `VALIDATION_SECONDS`, is more work than an
  honest call needs. Either way the check ends with an error saying so;
* ``unevaluatedProperties`` and ``unevaluatedItems`` are left to the server
  (jsonschema walks them outside its keywords, with ``re`` and unbounded
  recursion); a check on pride's side only spares the server a call it would
  refuse anyway, so skipping a keyword loses nothing the server does not keep.

Where a check runs (`BoundedSchema.first_error`): on the event loop with an
allowance that every ordinary call fits in (`LOOP_STEPS` keyword
applications, `LOOP_REGEX_SECONDS` per regular expression: microseconds in
all); a check that needs more starts over in a worker thread under the full
bounds, so the event loop is never held for longer than that allowance.

A schema is checked once, when its tool is listed (`check_tool`, run in worker
threads by ``_listing``): at most `MAX_SCHEMA_BYTES` as JSON, nested at most
`MAX_SCHEMA_DEPTH` levels, valid against its dialect's metaschema, and every
pattern one the engine compiles.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import json
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import jsonschema
import pydantic
import referencing
import referencing.exceptions
import regex
import trio
from jsonschema.exceptions import ValidationError
from mcp import types

__all__ = [
    "LOOP_REGEX_SECONDS",
    "LOOP_STEPS",
    "MAX_NESTING",
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_STEPS",
    "VALIDATION_SECONDS",
    "BoundedSchema",
    "CheckedTool",
    "Unchecked",
    "check_tool",
    "tool_key",
]

MAX_SCHEMA_BYTES = 64 * 1024
"""The largest schema accepted (as JSON); a tool with a larger one is not offered."""

MAX_SCHEMA_DEPTH = 64
"""How deeply a schema's JSON may nest (32 levels of objects in objects, say)."""

MAX_NESTING = 200
"""Keyword applications nested at once in one check; more is a ``$ref`` loop."""

MAX_STEPS = 200_000
"""Keyword applications in one check (an honest call needs a few, or thousands)."""

VALIDATION_SECONDS = 1.0
"""Wall-clock seconds one check may take in its worker thread."""

LOOP_STEPS = 2_000
"""Keyword applications a check may make on the event loop before it moves to a thread."""

LOOP_REGEX_SECONDS = 0.001
"""Seconds one regular expression may take on the event loop before the check moves."""

_LOOP_NESTING = 100  # the event loop's stack is shared with the turn that calls


class Unchecked(Exception):
    """The check could not be made within its bounds (the message says which)."""


class _Moved(Exception):
    """The event loop's allowance ran out: start over in a worker thread."""


@attrs.define(slots=True)
class _Work:
    """The bounds of one check, and how much of them it has used."""

    max_steps: int
    max_nesting: int
    deadline: float  # time.monotonic()
    regex_seconds: float | None  # None: whatever is left until the deadline
    on_loop: bool
    steps: int = 0
    nesting: int = 0
    stopped: bool = False

    def enter(self) -> None:
        self.steps += 1
        self.nesting += 1
        if self.nesting > self.max_nesting:
            if self.on_loop:
                raise _Moved
            raise Unchecked(
                f"its schema refers to itself (a $ref loop) or nests deeper than "
                f"{MAX_NESTING} levels (MAX_NESTING)"
            )
        if self.steps > self.max_steps:
            if self.on_loop:
                raise _Moved
            raise Unchecked(f"more than {MAX_STEPS:,} steps (MAX_STEPS)")
        if self.stopped:
            raise Unchecked("the check was cancelled")
        if not self.steps & 255 and time.monotonic() > self.deadline:
            raise Unchecked(f"{VALIDATION_SECONDS}s (VALIDATION_SECONDS)")

    def regex_timeout(self) -> float:
        if self.regex_seconds is not None:
            return self.regex_seconds
        return max(self.deadline - time.monotonic(), 0.0)


_work: contextvars.ContextVar[_Work] = contextvars.ContextVar("pride_mcp_schema_work")


# ------------------------------------------------------------------ the keywords


def _counted(keyword: Callable[..., Any]) -> Callable[..., Iterator[ValidationError]]:
    """``keyword``, counted against the check's bounds while it runs."""

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        work = _work.get()
        work.enter()
        try:
            errors = keyword(validator, value, instance, schema)
            if errors is not None:
                yield from errors
        finally:
            work.nesting -= 1

    return counted


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    work = _work.get()
    try:
        found = _compiled(pattern).search(
            text, timeout=work.regex_timeout(), concurrent=not work.on_loop
        )
    except TimeoutError:
        if work.on_loop:
            raise _Moved from None
        raise Unchecked(
            f"{VALIDATION_SECONDS}s (VALIDATION_SECONDS) matching the pattern {pattern[:100]!r}"
        ) from None
    return found is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(
            f"{_short(repr(instance), 100)} does not match {_short(repr(pattern), 100)}"
        )


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The keys neither ``properties`` nor a ``patternProperties`` pattern covers."""
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        key
        for key in instance
        if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    extras = sorted(_additional(instance, schema), key=str)
    if validator.is_type(allowed, "object"):
        for key in extras:
            yield from validator.descend(instance[key], allowed, path=key)
    elif allowed is False and extras:
        names = ", ".join(repr(key) for key in extras)
        yield ValidationError(f"additional properties are not allowed ({names} unexpected)")


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for index, item in enumerate(instance):
        key = _canonical(item)
        if key in seen:
            yield ValidationError(
                f"the array has non-unique elements (item {index} equals an earlier one)"
            )
            return
        seen.add(key)


def _canonical(value: Any) -> Any:
    """A hashable form of JSON data that is equal exactly when JSON Schema says so."""
    work = _work.get()
    work.enter()  # each item and part is a step: a huge array is counted like any work
    try:
        if isinstance(value, bool) or value is None:
            return ("b", value)
        if isinstance(value, int | float):
            return ("n", value)  # 1 == 1.0 and hash(1) == hash(1.0), as JSON Schema wants
        if isinstance(value, str):
            return ("s", value)
        if isinstance(value, list | tuple):
            return ("a", tuple(_canonical(item) for item in value))
        if isinstance(value, dict):
            return ("o", frozenset((key, _canonical(item)) for key, item in value.items()))
        return ("x", repr(value))
    finally:
        work.nesting -= 1


def _skipped(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
    return iter(())


@functools.cache
def _bounded_class(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with every keyword bounded."""
    replaced: dict[str, Callable[..., Any]] = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
        "unevaluatedProperties": _skipped,
        "unevaluatedItems": _skipped,
    }
    keywords = {
        name: _counted(replaced.get(name, keyword)) for name, keyword in cls.VALIDATORS.items()
    }
    return jsonschema.validators.extend(cls, keywords)  # type: ignore[no-untyped-call]


def _validator_class(schema: dict[str, Any]) -> Any:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


# ------------------------------------------------------------------ applying a schema


class BoundedSchema:
    """One untrusted schema, applied to untrusted data within bounds (module docstring).

    Args:
        schema: a schema `check_tool` accepted.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None  # made on first use: most listed tools are never called

    def _make(self) -> Any:
        if self._validator is None:
            cls = _bounded_class(_validator_class(self.schema))
            # An empty registry: a "$ref" resolves inside the schema only, never over the network.
            self._validator = cls(self.schema, registry=referencing.Registry())
        return self._validator

    def first_error_now(self, instance: Any) -> ValidationError | None:
        """The most relevant violation, or None; checked on the calling thread, fully bounded.

        Raises:
            Unchecked: the check could not be made within the bounds.
        """
        work = _Work(MAX_STEPS, MAX_NESTING, time.monotonic() + VALIDATION_SECONDS, None, False)
        return self._run(instance, work)

    async def first_error(self, instance: Any) -> ValidationError | None:
        """The most relevant violation, or None; the event loop is held only briefly.

        Raises:
            Unchecked: the check could not be made within the bounds.

        Cancellation: the check in a worker thread is abandoned, and stops at
        its next step.
        """
        loop = _Work(LOOP_STEPS, _LOOP_NESTING, math.inf, LOOP_REGEX_SECONDS, True)
        try:
            return self._run(instance, loop)
        except _Moved:
            pass
        work = _Work(MAX_STEPS, MAX_NESTING, time.monotonic() + VALIDATION_SECONDS, None, False)
        try:
            return await trio.to_thread.run_sync(self._run, instance, work, abandon_on_cancel=True)
        except trio.Cancelled:
            work.stopped = True
            raise

    def _run(self, instance: Any, work: _Work) -> ValidationError | None:
        validator = self._make()
        token = _work.set(work)
        try:
            error: ValidationError | None = jsonschema.exceptions.best_match(
                validator.iter_errors(instance)
            )
            return error
        except (Unchecked, _Moved):
            raise
        except RecursionError:
            if work.on_loop:
                raise _Moved from None
            raise Unchecked(
                "its schema refers to itself (a $ref loop) or nests too deeply"
            ) from None
        except referencing.exceptions.Unresolvable as exc:
            raise Unchecked(f"its schema has a reference that cannot be resolved ({exc})") from None
        except Exception as exc:  # a schema the metaschema let through, that jsonschema trips on
            raise Unchecked(
                f"its schema cannot be applied ({type(exc).__name__}: {_short(exc)})"
            ) from None
        finally:
            _work.reset(token)


# ------------------------------------------------------------------ checking a listed tool


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
        raise ValueError(f"it is not an MCP tool: {where}: {_short(problem['msg'])}") from None
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
        _validator_class(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(
            f"its {what} schema is not valid JSON Schema: {_short(exc.message)}"
        ) from None
    except Exception as exc:  # an unknown $schema, a metaschema check that trips
        raise ValueError(
            f"its {what} schema cannot be checked ({type(exc).__name__}: {_short(exc)})"
        ) from None
    for pattern in _patterns(schema):
        try:
            _compiled(pattern)
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


def _short(value: object, limit: int = 300) -> str:
    text = repr(value) if not isinstance(value, str | BaseException) else str(value)
    return text if len(text) <= limit else text[:limit] + "… (cut)"
