"""A server's JSON Schemas applied to untrusted data, within bounds.

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

pride keeps jsonschema's keywords and bounds them (`BoundedSchema`):

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

The schemas themselves were checked when their tool was listed
(`pride.mcp._schema`).
"""

from __future__ import annotations

import contextvars
import functools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import jsonschema
import referencing
import referencing.exceptions
import regex
import trio
from jsonschema.exceptions import ValidationError

__all__ = [
    "LOOP_REGEX_SECONDS",
    "LOOP_STEPS",
    "MAX_NESTING",
    "MAX_STEPS",
    "VALIDATION_SECONDS",
    "BoundedSchema",
    "Unchecked",
    "compiled_pattern",
    "short",
    "validator_class",
]

MAX_NESTING = 200
"""Keyword applications nested at once in one check; more is a ``$ref`` loop."""

MAX_STEPS = 200_000
"""Keyword applications in one check (an honest call needs a few, or thousands)."""

VALIDATION_SECONDS = 1.0
"""CPU seconds one check may take in its worker thread.

CPU time of the thread doing the check, not wall-clock time: a loaded machine
slows an honest check without making it more work, so it must not fail it.
"""

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
    seconds: float  # of the checking thread's CPU time (time.thread_time)
    regex_seconds: float | None  # None: whatever is left until the deadline
    on_loop: bool
    steps: int = 0
    nesting: int = 0
    stopped: bool = False
    deadline: float = math.inf  # time.thread_time(), set when the check starts on its thread

    def start(self) -> None:
        self.deadline = time.thread_time() + self.seconds

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
        if not self.steps & 255 and time.thread_time() > self.deadline:
            raise Unchecked(f"{VALIDATION_SECONDS}s (VALIDATION_SECONDS)")

    def regex_timeout(self) -> float:
        if self.regex_seconds is not None:
            return self.regex_seconds
        # regex's timeout is wall-clock: the CPU time left is the most it may take.
        return max(self.deadline - time.thread_time(), 0.0)


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
def compiled_pattern(pattern: str) -> Any:
    return regex.compile(pattern)


def _search(pattern: str, text: str) -> bool:
    work = _work.get()
    try:
        found = compiled_pattern(pattern).search(
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
            f"{short(repr(instance), 100)} does not match {short(repr(pattern), 100)}"
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


def validator_class(schema: dict[str, Any]) -> Any:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


# ------------------------------------------------------------------ applying a schema


class BoundedSchema:
    """One untrusted schema, applied to untrusted data within bounds (module docstring).

    Args:
        schema: a schema ``pride.mcp._schema.check_tool`` accepted.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None  # made on first use: most listed tools are never called

    def _make(self) -> Any:
        if self._validator is None:
            cls = _bounded_class(validator_class(self.schema))
            # An empty registry: a "$ref" resolves inside the schema only, never over the network.
            self._validator = cls(self.schema, registry=referencing.Registry())
        return self._validator

    def first_error_now(self, instance: Any) -> ValidationError | None:
        """The most relevant violation, or None; checked on the calling thread, fully bounded.

        Raises:
            Unchecked: the check could not be made within the bounds.
        """
        work = _Work(MAX_STEPS, MAX_NESTING, VALIDATION_SECONDS, None, False)
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
        work = _Work(MAX_STEPS, MAX_NESTING, VALIDATION_SECONDS, None, False)
        try:
            return await trio.to_thread.run_sync(self._run, instance, work, abandon_on_cancel=True)
        except trio.Cancelled:
            work.stopped = True
            raise

    def _run(self, instance: Any, work: _Work) -> ValidationError | None:
        validator = self._make()
        work.start()
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
                f"its schema cannot be applied ({type(exc).__name__}: {short(exc)})"
            ) from None
        finally:
            _work.reset(token)


def short(value: object, limit: int = 300) -> str:
    """``value`` as text, cut at ``limit`` characters (saying so)."""
    text = repr(value) if not isinstance(value, str | BaseException) else str(value)
    return text if len(text) <= limit else text[:limit] + "… (cut)"
