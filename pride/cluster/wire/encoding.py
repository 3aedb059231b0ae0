"""What crosses the wire between a caller and a host: plain JSON, never pickles.

Commands, conversation messages and signals go through pride's one codec
(`pride.messages.codec`). Results and stream items are encoded by
`encode_value`: JSON scalars and lists as they are, and every other
shape as a one-key object naming it:

```text
{"$tuple": [...]}                 a tuple
{"$dict": {...}}                  a str-keyed dict (or a user's attrs, dataclass or
                                  pydantic value, as its fields)
{"$pride": {...}}                 a codec type (Instruction, AssistantResponse, RunEnd,
                                  ReasoningDelta, ...)
{"$result": {"class": "OperateResult", "fields": {...}}}   one of pride's result types
```

Errors are encoded by `encode_error` and come back as the same pride
exception class (with the same message and public attributes), or as the
builtin class for builtins; anything else arrives as `RemoteError`
naming the original type (`RemoteError`). Decoding is strict: data that does not fit
raises `InvalidMessage` naming the path, because a peer's bytes
are input like any other.

Nothing here imports ray: the caller and host sides both use it, and tests
check it without a cluster.
"""

from __future__ import annotations

import builtins
import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any, cast

import attrs
import msgspec

from ... import errors
from ...errors import InvalidMessage, PrideError, RemoteError
from ...messages import (
    ActionCall,
    Command,
    ReasoningDelta,
    RoledMessage,
    Signal,
    structure,
    unstructure,
)
from ...messages.codec import MAX_DEPTH, is_scalar_text, registered_types, scrub
from ...operations import Analysis, OperateResult, ReActAnalysis, Reason, Unparsed

__all__ = [
    "MAX_MESSAGE_BYTES",
    "decode_error",
    "decode_value",
    "dumps",
    "dumps_text",
    "encode_error",
    "encode_value",
    "loads",
    "loads_text",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest batch either side accepts (a peer's bytes are bounded input)."""

_RESULT_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (OperateResult, Reason, ReActAnalysis, Analysis, Unparsed, ActionCall)
}
_TAGGED: dict[str, type] = {cls.__name__: cls for cls in registered_types()}
_WIRE_TYPES = (RoledMessage, Command, Signal, ReasoningDelta)

# Builtin exceptions that come back as themselves (anything else builtin is RemoteError).
_BUILTIN_ERRORS = frozenset(
    {
        "ArithmeticError",
        "AssertionError",
        "AttributeError",
        "ConnectionError",
        "ImportError",
        "KeyError",
        "LookupError",
        "ModuleNotFoundError",
        "NotImplementedError",
        "OSError",
        "RecursionError",
        "RuntimeError",
        "TimeoutError",
        "TypeError",
        "ValueError",
        "ZeroDivisionError",
    }
)


def _problem(path: str, reason: str) -> InvalidMessage:
    return InvalidMessage([(path, reason)])


# ------------------------------------------------------------------ values


# A path into a value is built only when something in it is refused: each level
# passes ``(parent, key)`` down (a pair, not a formatted string per item).
_Path = tuple[Any, str | int] | str
_SCALARS = frozenset({str, int, bool, type(None)})
_JSON_SCALARS = (str, bool, int, float)


def _where(path: _Path) -> str:
    keys: list[str | int] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    text = path
    for key in reversed(keys):
        text += f"[{key}]" if isinstance(key, int) else f".{key}"
    return text


def encode_value(value: Any, path: str = "result") -> Any:
    """Plain JSON data for ``value`` (see the module docstring).

    Raises:
        InvalidMessage: ``value`` (or something inside it) has no wire form, or
            its containers nest deeper than `MAX_DEPTH` levels.
    """
    return _encode(value, path, MAX_DEPTH)


def _too_deep(path: _Path) -> InvalidMessage:
    # Deeper data would exhaust the stack of whatever walks it (this encoder, the
    # peer's decoder), far from where it came in: refused here, naming where.
    return _problem(_where(path), f"nested deeper than {MAX_DEPTH} levels")


def _encode(value: Any, path: _Path, depth: int) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, list):
        if not depth:
            raise _too_deep(path)
        return [_encode(item, (path, i), depth - 1) for i, item in enumerate(value)]
    if value is None or isinstance(value, str | bool | int):  # subclasses of the scalars
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _problem(
                _where(path), f"{value!r} cannot cross the wire (JSON has no such number)"
            )
        return value
    if not depth:
        if isinstance(value, tuple | Mapping | _WIRE_TYPES) or _fields_of(value):
            raise _too_deep(path)
    elif isinstance(value, _WIRE_TYPES):
        return {"$pride": unstructure(value)}  # the codec bounds the depth inside it
    elif isinstance(value, tuple):
        return {"$tuple": [_encode(item, (path, i), depth - 1) for i, item in enumerate(value)]}
    elif isinstance(value, Mapping):
        return {"$dict": _encode_mapping(value, path, depth)}
    name = type(value).__name__
    if _RESULT_TYPES.get(name) is type(value):
        fields = {
            field.name: _encode(getattr(value, field.name), (path, field.name), depth - 1)
            for field in attrs.fields(cast(Any, type(value)))
        }
        return {"$result": {"class": name, "fields": fields}}
    # A user's own types cross as their fields (the class stays on the host).
    if attrs.has(type(value)):
        return {"$dict": _encode_mapping(attrs.asdict(value, recurse=False), path, depth)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"$dict": _encode_mapping(fields, path, depth)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic
        return {"$dict": _encode_mapping(dump(mode="json"), path, depth)}
    raise _problem(
        _where(path), f"a {name} has no wire form (return JSON data, messages or attrs values)"
    )


def _fields_of(value: Any) -> bool:
    """True for a value that crosses as its fields (a result type, a user's class)."""
    cls = type(value)
    return (
        _RESULT_TYPES.get(cls.__name__) is cls
        or attrs.has(cls)
        or (dataclasses.is_dataclass(value) and not isinstance(value, type))
        or callable(getattr(value, "model_dump", None))
    )


def _encode_mapping(value: Mapping[Any, Any], path: _Path, depth: int) -> dict[str, Any]:
    if not depth:
        raise _too_deep(path)
    out = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise _problem(_where(path), f"has a non-string key {key!r}")
        out[key] = _encode(item, (path, key), depth - 1)
    return out


def decode_value(data: Any, path: str = "result") -> Any:
    """The value `encode_value` encoded.

    Raises:
        InvalidMessage: ``data`` is not a well-formed encoded value (its values
            nested deeper than `MAX_DEPTH` levels included: `encode_value` never
            writes them).
    """
    return _decode(data, path, MAX_DEPTH)


def _decode(data: Any, path: _Path, depth: int) -> Any:
    if data is None or isinstance(data, _JSON_SCALARS):
        return data
    if not depth:
        raise _too_deep(path)
    if isinstance(data, list):
        return [_decode(item, (path, i), depth - 1) for i, item in enumerate(data)]
    if not isinstance(data, dict) or len(data) != 1:
        raise _problem(_where(path), "expected a JSON value or a one-key encoded object")
    ((kind, inner),) = data.items()
    if kind == "$tuple" and isinstance(inner, list):
        return tuple(_decode(item, (path, i), depth - 1) for i, item in enumerate(inner))
    if kind == "$dict" and isinstance(inner, dict):
        return {str(key): _decode(item, (path, str(key)), depth - 1) for key, item in inner.items()}
    if kind == "$pride" and isinstance(inner, dict):
        tag = inner.get("type")
        cls = _TAGGED.get(tag) if isinstance(tag, str) else None
        if cls is None:
            raise _problem(_where(path), f"unknown pride type tag {inner.get('type')!r}")
        return structure(inner, cls)
    if kind == "$result" and isinstance(inner, dict):
        cls = _RESULT_TYPES.get(str(inner.get("class")))
        fields = inner.get("fields")
        if cls is None or not isinstance(fields, dict):
            raise _problem(_where(path), f"unknown result class {inner.get('class')!r}")
        values = {key: _decode(item, (path, str(key)), depth - 1) for key, item in fields.items()}
        try:
            return cls(**values)
        except TypeError as exc:
            raise _problem(_where(path), f"{cls.__name__}: {exc}") from None
    raise _problem(_where(path), f"unknown encoded kind {kind!r}")


# ------------------------------------------------------------------ errors


def encode_error(exc: BaseException) -> dict[str, Any]:
    """Plain data for an exception raised on a host (see `decode_error`)."""
    cls = type(exc)
    data: dict[str, Any] = {"type": cls.__name__, "message": str(exc)}
    if isinstance(exc, PrideError) and getattr(errors, cls.__name__, None) is cls:
        data["kind"] = "pride"
        fields: dict[str, Any] = {}
        for key, item in vars(exc).items():
            if key.startswith("_"):
                continue
            try:
                fields[key] = encode_value(item, key)
            except InvalidMessage:
                continue  # an attribute with no wire form stays behind; the message says enough
        data["fields"] = fields
    elif cls.__module__ == "builtins" and cls.__name__ in _BUILTIN_ERRORS:
        data["kind"] = "builtin"
    else:
        data["kind"] = "other"
        data["type"] = f"{cls.__module__}.{cls.__qualname__}"
    return data


def decode_error(data: Any) -> BaseException:
    """The exception `encode_error` encoded: the same pride class where it is one.

    Never raises: data that does not describe an error becomes an
    `InvalidMessage` to raise instead.
    """
    if not isinstance(data, dict):
        return _problem("error", "expected an encoded error object")
    name, message, kind = data.get("type"), data.get("message"), data.get("kind")
    if not isinstance(name, str) or not isinstance(message, str):
        return _problem("error", "an encoded error needs a string type and message")
    if kind == "pride":
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, PrideError):
            exc = cls.__new__(cls)
            Exception.__init__(exc, message)
            fields = data.get("fields")
            if isinstance(fields, dict):
                for key, item in fields.items():
                    if isinstance(key, str) and not key.startswith("_"):
                        try:
                            setattr(exc, key, decode_value(item, key))
                        except Exception:  # "never raises": the field stays unset
                            # Undecodable, or refused by the class (``args`` set to a
                            # number raises TypeError): the message says enough.
                            continue
            return exc
    if kind == "builtin" and name in _BUILTIN_ERRORS:
        builtin: type[BaseException] = getattr(builtins, name)
        return builtin(message)
    return RemoteError(name, message)


# ------------------------------------------------------------------ batches


_parse_json = msgspec.json.decode
"""A peer's JSON is parsed by msgspec (a dependency already): 2-3x faster than the
standard library's, and stricter where a peer could lie (``NaN`` and ``Infinity``
literals, numbers out of a float's range, lone surrogates are refused, not
turned into values nothing here could send back). Its errors are ValueErrors."""


def dumps(data: Any) -> bytes:
    """Compact JSON bytes (``data`` is already plain)."""
    return dumps_text(data).encode()


def dumps_text(data: Any) -> str:
    """Compact JSON text (``data`` is already plain)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_scrubbed(data: Any) -> str:
    """``dumps_text(data)``, with each lone surrogate in its strings replaced by U+FFFD.

    A lone surrogate (what a JSON ``"\\ud800"`` escape decodes to) has no UTF-8
    form, so no text holding one can travel. A local branch records it as U+FFFD
    (every conversation message does); a command or an answer crossing the wire
    is given the same replacement, so a remote branch answers as a local one would.
    """
    text = dumps_text(data)
    return text if is_scalar_text(text) else dumps_text(scrub(data))


def loads(payload: Any, what: str, *, limit: int | None = None) -> Any:
    """Parse a peer's JSON bytes, at most ``limit`` of them (`MAX_MESSAGE_BYTES`).

    Raises:
        InvalidMessage: not bytes, too large, or not JSON.
    """
    if limit is None:
        limit = MAX_MESSAGE_BYTES
    if not isinstance(payload, bytes | bytearray):
        raise _problem(what, f"expected JSON bytes, got {type(payload).__name__}")
    if len(payload) > limit:
        raise _problem(what, f"{len(payload)} bytes is over the {limit}-byte limit")
    try:
        return _parse_json(payload)
    except (ValueError, RecursionError) as exc:
        raise _problem(what, f"invalid JSON: {exc}") from None


def loads_text(text: str, what: str) -> Any:
    """Parse JSON text found inside a peer's batch (already bounded with it).

    Raises:
        InvalidMessage: not JSON.
    """
    try:
        return _parse_json(text)
    except (ValueError, RecursionError) as exc:
        raise _problem(what, f"invalid JSON: {exc}") from None
