"""Response formats: their JSON schema, finding JSON in model text, and building the format.

A response format is one of:

* a class: attrs, dataclass, TypedDict or msgspec Struct (schema and
  validation by msgspec), or a pydantic model when pydantic is installed
  (its own ``model_json_schema``/``model_validate``; pride does not depend on
  pydantic);
* a JSON schema dict (``{"type": "object", "properties": ...}``), or
  ``{"name": ..., "schema": ...}``; the result is then the decoded dict,
  checked for required keys and top-level primitive types.
"""

from __future__ import annotations

import ast
import itertools
import json
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ..errors import ParseFailed

__all__ = [
    "FormatTarget",
    "convert",
    "extract_json",
    "format_name",
    "format_schema",
    "schema_keys",
]

# The language tag and the blanks after it are possessive (``*+``): the body's
# ``.*?`` matches their characters too, so a fence never closed made a
# backtracking tag or run of blanks rescan the rest of the reply once per
# character of it (quadratic: 40 KB of tag took 7 s of the event loop, 80 KB of
# blanks 30 s). A shorter one can never find a closing fence the longest missed.
_FENCE = re.compile(r"```[A-Za-z0-9_-]*+[ \t]*+\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")

# Fenced blocks of one reply tried as candidates. Each one that is not JSON
# costs a few microseconds (a failed decode and its repairs), and a reply may
# hold hundreds of thousands of small ones: 2.4 MB of them took 1.2 s of the
# event loop, so the 32 MiB a provider reply may hold, 17 s.
_MAX_FENCED_BLOCKS = 100

# Characters of one reply read as a Python literal, all its candidates together.
# ``ast.literal_eval`` builds the whole syntax tree first, about 500 bytes of
# memory for each character read (2 MB of a list took a gigabyte and 3 s of the
# event loop; a provider reply may hold 32 MiB), and many small fenced blocks
# add up to the same. The leniency is for a model's small slips (single quotes,
# ``None``); a longer candidate is only read as JSON.
_MAX_LITERAL_CHARS = 64 * 1024

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def format_schema(response_format: Any) -> dict[str, Any] | None:
    """``{"name", "schema"}`` for a response format, or None for no format.

    Raises:
        TypeError: no JSON schema can be derived from ``response_format``.
    """
    if response_format is None:
        return None
    if isinstance(response_format, Mapping):
        if "schema" in response_format and "name" in response_format:
            body = response_format["schema"]
            if not isinstance(body, Mapping):
                raise TypeError(
                    "response_format's schema must be a JSON schema object, "
                    f"got {type(body).__name__}"
                )
            return {"name": str(response_format["name"]), "schema": dict(body)}
        return {
            "name": str(response_format.get("title", "response")),
            "schema": dict(response_format),
        }
    name = format_name(response_format)
    schema_fn = getattr(response_format, "model_json_schema", None)
    if callable(schema_fn):  # pydantic
        return {"name": name, "schema": schema_fn()}
    try:
        schema = msgspec.json.schema(response_format)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot derive a JSON schema from response_format {name!r}: {exc}"
        ) from None
    return {"name": name, "schema": _inline(schema)}


def format_name(response_format: Any) -> str:
    """A readable name for a response format (its class name, or its schema's name)."""
    if isinstance(response_format, Mapping):
        return str(response_format.get("name") or response_format.get("title") or "response")
    return str(getattr(response_format, "__name__", None) or "response")


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve a top-level ``$ref`` into ``$defs`` so providers see an object schema."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        defs = schema.get("$defs", {})
        target = dict(defs.get(ref.removeprefix("#/$defs/"), {}))
        if len(defs) > 1:
            target["$defs"] = defs
        return target
    return schema


def schema_keys(schema: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(property names, required names)`` of an object schema's top level."""
    if not schema:
        return (), ()
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return (), ()
    required = schema.get("required") or ()
    return tuple(properties), tuple(name for name in required if isinstance(name, str))


def extract_json(text: str) -> Any:
    """The JSON value in ``text``.

    Tried in order: each fenced block (```` ```json ````; the first 100,
    `_MAX_FENCED_BLOCKS`), the whole text, the
    span from the first ``{`` to the last ``}`` (prose around an object). Each
    candidate is read as JSON, then leniently: trailing commas removed, and as
    a Python literal (single quotes, ``True``/``None``), which models produce
    often enough, when it holds only JSON data (string keys; no bytes, sets,
    tuples or complex numbers). Python literals are read only while the candidates read so
    far that way come to at most 64 KiB (`_MAX_LITERAL_CHARS`): reading one
    costs hundreds of times its length in memory.

    Raises:
        ParseFailed: no JSON value could be found.
    """
    fences = itertools.islice(_FENCE.finditer(text), _MAX_FENCED_BLOCKS)
    candidates = [match.group(1).strip() for match in fences]
    candidates.append(text.strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    literal_left = _MAX_LITERAL_CHARS
    for candidate in candidates:
        if candidate:
            literal = len(candidate) <= literal_left
            found, value = _lenient_loads(candidate, literal=literal)
            if found:
                return value
            if literal and candidate[:1] in "{[":
                literal_left -= len(candidate)
    raise ParseFailed("no JSON object found in the reply")


def _lenient_loads(candidate: str, *, literal: bool) -> tuple[bool, Any]:
    # Model output is hostile: JSON nested past the standard library's reach
    # raises RecursionError, and is then no JSON, as a syntax error is.
    try:
        return True, json.loads(candidate)
    except (ValueError, RecursionError):
        pass
    repaired = _TRAILING_COMMA.sub(r"\1", candidate)
    if repaired != candidate:
        try:
            return True, json.loads(repaired)
        except (ValueError, RecursionError):
            pass
    if literal and candidate[:1] in "{[":
        try:
            value = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return False, None
        # literal_eval also gives what JSON has no word for (bytes, sets,
        # tuples, complex numbers, keys that are not strings); such a value
        # is no JSON, or it would reach key matching and tool arguments.
        if isinstance(value, dict | list) and _is_json_data(value):
            return True, value
    return False, None


def _is_json_data(value: Any) -> bool:
    """True if ``value`` holds only what JSON decodes to (str keys, JSON scalars).

    Recursive: a literal nests no deeper than Python's parser allows (200).
    """
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if type(value) is list:
        return all(_is_json_data(item) for item in value)
    if type(value) is dict:
        return all(type(key) is str and _is_json_data(item) for key, item in value.items())
    return False


def convert(data: Any, response_format: Any) -> Any:
    """Validate decoded JSON ``data`` and build ``response_format`` from it.

    Raises:
        ParseFailed: the data does not fit the format; the message names the
            offending field.
    """
    if isinstance(response_format, Mapping):
        return _check_schema(data, format_schema(response_format))
    validate = getattr(response_format, "model_validate", None)
    if callable(validate):  # pydantic
        try:
            return validate(data)
        except Exception as exc:  # pydantic.ValidationError, without importing pydantic
            raise ParseFailed(f"does not match {format_name(response_format)}: {exc}") from None
    try:
        return msgspec.convert(data, response_format, strict=False)
    except (msgspec.ValidationError, TypeError) as exc:
        raise ParseFailed(f"does not match {format_name(response_format)}: {exc}") from None


def _check_schema(data: Any, schema: dict[str, Any] | None) -> Any:
    # The schema may come from outside (a decoded Parse), as the data does: a
    # part of it that is not what JSON schema says is passed over, never a
    # TypeError out of the turn.
    body = schema["schema"] if schema else {}
    if body.get("type", "object") == "object" and not isinstance(data, dict):
        raise ParseFailed(f"expected a JSON object, got {type(data).__name__}")
    properties, required = schema_keys(body)
    if not properties or not isinstance(data, dict):  # keys are checked on an object only
        return data
    missing = [name for name in required if name not in data]
    if missing:
        raise ParseFailed(f"missing required keys: {', '.join(missing)}")
    for name in properties:
        if name not in data:
            continue
        spec = body["properties"][name]
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else []
        kinds = [k for k in kinds if isinstance(k, str)]
        allowed = tuple(t for k in kinds for t in _JSON_TYPES.get(k, ()))
        value = data[name]
        if allowed and not (isinstance(value, allowed) and not _bool_as_number(value, kinds)):
            raise ParseFailed(
                f"key {name!r}: expected {' or '.join(kinds)}, got {type(value).__name__}"
            )
    return data


def _bool_as_number(value: Any, kinds: list[str]) -> bool:
    return isinstance(value, bool) and "boolean" not in kinds


class FormatTarget:
    """What a parse produces: a response format, or (None) the decoded JSON as is.

    The parse loop needs a target's ``schema`` (for key matching and reformat
    prompts) and ``build(data)`` (raises ParseFailed); operate supplies its own
    target with the same two members.
    """

    __slots__ = ("response_format", "schema")

    def __init__(self, response_format: Any) -> None:
        self.response_format = response_format
        self.schema = format_schema(response_format)

    @property
    def name(self) -> str:
        """The format's readable name."""
        return format_name(self.response_format) if self.response_format is not None else "JSON"

    def build(self, data: Any) -> Any:
        """The format built from ``data`` (or ``data`` itself when there is no format)."""
        if self.response_format is None:
            return data
        return convert(data, self.response_format)
