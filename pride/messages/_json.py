"""Strict JSON: how pride reads and writes the JSON text it exchanges with anything else.

Python's `json` is lenient both ways, and each leniency is a way in for
bytes from outside (request lines, stored rows, provider replies):

* ``NaN``, ``Infinity`` and ``-Infinity`` are read and written, though no JSON
  grammar has them; ``1e400`` is read as infinity;
* an integer of any length is read, and past 4,300 digits the read fails with
  a raw ``ValueError`` (CPython's guard against quadratic conversion);
* ``"\\ud800"`` (a lone UTF-16 surrogate) is valid JSON syntax, but the string
  it makes has no UTF-8 encoding: writing it to a file, a pipe or SQLite
  raises ``UnicodeEncodeError`` far from where it came in.

The choice here follows I-JSON (RFC 7493) where it is cheap to: numbers are
finite, integers fit in a signed 64-bit word (what SQLite's ``INTEGER`` and
most JSON libraries hold), strings are Unicode scalar values. Text that
breaks a rule is refused with [`InvalidMessage`][pride.InvalidMessage] naming the JSON
path (``$.context.k[0]``). Where pride writes data it did not choose (a
model's or a tool's output to the store, a result to ``pride run``'s
stdout), `dump_json` can instead *replace* what strict JSON cannot
carry, the documented way: a lone surrogate becomes U+FFFD, a non-finite
float ``null``, an oversize integer its decimal string.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ._errors import InvalidMessage

__all__ = [
    "ENCODER",
    "INT_MAX",
    "INT_MIN",
    "MAX_DEPTH",
    "JsonPath",
    "dump_json",
    "is_plain",
    "is_scalar_text",
    "json_path",
    "number_problem",
    "parse_json",
    "scrub",
    "scrub_text",
]

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
"""The integers strict JSON carries: a signed 64-bit word."""

MAX_DEPTH = 100
"""How deeply arrays and objects may nest in JSON pride reads. Everything that
walks data later (the converter, the store's writer, a message's text check)
recurses once per level on top of whatever stack it runs on, so data that
only just parsed would fail far from where it came in; no command or message
needs more than a few levels."""

TOO_DEEP = "nested too deeply (beyond the recursion limit)"

# "-9223372036854775808" is the longest in-range integer: 20 characters.
_LONGEST_INT = 20
# A surrogate escape (either half). Pairs are legal and decode to one code
# point; only a walk over the decoded data can tell a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


JsonPath = tuple[Any, str | int] | str
"""Where a value is in the data: its root's name, or ``(parent's path, key or index)``."""


def json_path(path: JsonPath) -> str:
    """``path`` as text: ``$.a[2]`` (a key under an empty root is the key alone: ``a[2]``)."""
    # A walk passes ``(parent, key)`` down and formats only what it refuses:
    # formatting at every level copied the parent's path into each child's, so
    # one long key over many values was quadratic (a 1 MB key over 80,000 lists
    # took 1.5 s of the event loop).
    keys: list[str | int] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    parts = [path]
    empty = not path
    for key in reversed(keys):
        if isinstance(key, int):
            parts.append(f"[{key}]")
            empty = False
        elif empty:
            parts.append(key)
            empty = not key
        else:
            parts.append(f".{key}")
    return "".join(parts)


class _Refused(Exception):
    """A strictness rule broken while decoding; its text is the reason."""


def number_problem(value: Any) -> str | None:
    """Why strict JSON cannot carry the number ``value``, or None if it can."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if INT_MIN <= value <= INT_MAX:
            return None
        return f"an integer of {value.bit_length()} bits is outside the signed 64-bit range"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number (strict JSON has no NaN or Infinity)"
    return None


def is_scalar_text(text: str) -> bool:
    """True if ``text`` has a UTF-8 encoding (holds no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (one for each)."""
    if is_scalar_text(text):
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def scrub(value: Any) -> Any:
    """``value`` (JSON-like data) with what strict JSON cannot carry replaced, the
    documented way (`dump_json`): a lone surrogate in a string or key by U+FFFD, a
    non-finite float by None.

    Containers without one are returned as they are (same object), so the
    common case allocates nothing.
    """
    # Every message runs its metadata (and an instruction its context) through
    # here: the exact built-in types are told apart by identity first, since the
    # abstract-class checks (Mapping above all) cost several times the rest, and
    # a message's metadata is mostly short ASCII keys over ints and None.
    kind = type(value)
    if kind is str:
        return value if value.isascii() else scrub_text(value)
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:  # a tool's NaN: the model is shown what the store keeps (null)
        return value if math.isfinite(value) else None
    if kind is dict:
        return _scrub_mapping(value) if value else value
    if kind is list or kind is tuple:
        return _scrub_sequence(value) if value else value
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return _scrub_mapping(value)
    if isinstance(value, list | tuple):
        return _scrub_sequence(value)
    return value


def _scrub_mapping(value: Mapping[Any, Any]) -> Mapping[Any, Any]:
    """``value`` itself when no key or item changes, else a dict of the scrubbed ones."""
    scrubbed: dict[Any, Any] | None = None
    for index, (key, item) in enumerate(value.items()):
        new_key, new = scrub(key), scrub(item)
        if scrubbed is None:
            if new_key is key and new is item:
                continue
            scrubbed = dict(itertools.islice(value.items(), index))
        scrubbed[new_key] = new
    return value if scrubbed is None else scrubbed


def _scrub_sequence(value: list[Any] | tuple[Any, ...]) -> list[Any] | tuple[Any, ...]:
    """``value`` itself when no item changes, else a list (or tuple) of the scrubbed ones."""
    scrubbed = [scrub(item) for item in value]
    if all(new is item for new, item in zip(scrubbed, value, strict=True)):
        return value
    return type(value)(scrubbed) if isinstance(value, tuple) else scrubbed


# ------------------------------------------------------------------- reading


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a finite number (strict JSON has no NaN or Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"{text} is not a finite number (it overflows a 64-bit float)")
    return value


def _int(text: str) -> int:
    if len(text) > _LONGEST_INT:  # refuse before converting: long conversions are slow
        raise _Refused(
            f"integer {text[:8]}... ({len(text.lstrip('-'))} digits) "
            "is outside the signed 64-bit range"
        )
    value = int(text)
    if not INT_MIN <= value <= INT_MAX:
        raise _Refused(f"integer {text} is outside the signed 64-bit range")
    return value


_DECODER = json.JSONDecoder(parse_float=_float, parse_int=_int, parse_constant=_constant)


def parse_json(text: str | bytes) -> Any:
    """Parse strict JSON text (bytes must be UTF-8) into plain data.

    Raises:
        InvalidMessage: the text is not JSON, has a non-finite number, an
            integer outside 64 bits, a lone surrogate, or nests beyond the
            recursion limit. The path is ``$`` or the place in the document
            (``$.a[2]``).
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidMessage([("$", f"invalid JSON: not UTF-8: {exc}")]) from None
    elif not isinstance(text, str):
        raise InvalidMessage([("$", f"invalid JSON: expected text, got {type(text).__name__}")])
    try:
        data = _DECODER.decode(text)
    except _Refused as exc:
        raise InvalidMessage([("$", str(exc))]) from None
    except json.JSONDecodeError as exc:
        raise InvalidMessage([("$", f"invalid JSON: {exc}")]) from None
    except RecursionError:
        raise InvalidMessage([("$", TOO_DEEP)]) from None
    if isinstance(data, dict | list):
        texts = not text.isascii() or _SURROGATE_ESCAPE.search(text) is not None
        problem = _unreadable(data, "$", MAX_DEPTH - 1, texts)
        if problem is not None:
            raise InvalidMessage([problem])
    elif isinstance(data, str) and not is_scalar_text(data):
        raise InvalidMessage([("$", _SURROGATE)])
    return data


_SURROGATE = "text holds a lone UTF-16 surrogate, which no UTF-8 text can carry"


def _unreadable(value: Any, path: JsonPath, depth: int, texts: bool) -> tuple[str, str] | None:
    """``(path, reason)`` of the first container nested past ``MAX_DEPTH`` or (when
    ``texts``) the first string or key with a lone surrogate; None if there is none."""
    if depth < 0:
        return (json_path(path), f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            if texts and not is_scalar_text(key):
                return (json_path(path), f"a key: {_SURROGATE}")
            if isinstance(item, dict | list) or (texts and isinstance(item, str)):
                found = _unreadable(item, (path, key), depth - 1, texts)
                if found is not None:
                    return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list) or (texts and isinstance(item, str)):
                found = _unreadable(item, (path, index), depth - 1, texts)
                if found is not None:
                    return found
    elif isinstance(value, str):
        return None if is_scalar_text(value) else (json_path(path), _SURROGATE)
    return None


# ------------------------------------------------------------------- writing


#: The one JSON writer: msgspec encodes plain data about ten times faster than
#: ``json.dumps`` (whose options build a new encoder per call). It is lenient where
#: pride is strict (a non-finite float becomes ``null``, an integer of any size
#: is written, more types than JSON's are encoded), so it is only given data
#: `is_plain` passed, or data made plain by `_replaced`. Its float forms are the
#: shortest that read back exactly (``1e16``, ``0.00001``), read by any JSON reader.
ENCODER = msgspec.json.Encoder()


def dump_json(data: Any, *, replace: bool = False) -> str:
    """Compact strict JSON text for plain ``data`` (non-ASCII kept as is).

    Args:
        replace: instead of refusing, replace what strict JSON cannot carry:
            a lone surrogate by U+FFFD, a non-finite float by ``null``, an
            integer outside 64 bits by its decimal string, anything that is
            not JSON data (a ``datetime``, a set) by its ``str`` (what a prompt
            shows of it), a key that is not a string by its ``str``.

    Raises:
        InvalidMessage: (without ``replace``) naming the first value strict
            JSON cannot carry; with or without it, for data nested beyond
            the recursion limit.
    """
    if is_plain(data):
        try:
            return ENCODER.encode(data).decode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: msgspec refuses it, as strict JSON
            pass
    try:
        problem = _unwritable(data, "$", MAX_DEPTH - 1)
        if problem is not None and not replace:
            raise InvalidMessage([problem])
        # Replaced, or JSON data of subclasses (a str enum, a dict subclass) made plain.
        return ENCODER.encode(_replaced(data, MAX_DEPTH - 1)).decode("utf-8")
    except RecursionError:
        raise InvalidMessage([("$", TOO_DEEP)]) from None


def is_plain(value: Any, depth: int = MAX_DEPTH - 1) -> bool:
    """True when ``value`` is data strict JSON carries as it is, text apart: plain
    ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``bool``, ``None``, finite
    ``float``, 64-bit ``int``, nested at most ``depth + 1`` levels. A string is
    not looked at: one with a lone surrogate makes msgspec raise
    ``UnicodeEncodeError``, and whoever encodes takes that as this check's "no".

    One call per container, its leaves checked inline: every stored message's
    metadata comes this way.
    """
    kind = type(value)
    if kind is dict:
        if depth < 0:
            return False
        for key in value:
            if type(key) is not str:
                return False
        items: Any = value.values()
    elif kind is list or kind is tuple:
        if depth < 0:
            return False
        items = value
    else:
        return _plain_leaf(value)
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not INT_MIN <= item <= INT_MAX:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict or kind is list or kind is tuple:
            if item:
                if not is_plain(item, depth - 1):
                    return False
            elif depth < 1:  # an empty container is a level too, as the reader counts
                return False
        else:
            return False
    return True


def _plain_leaf(value: Any) -> bool:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        return bool(INT_MIN <= value <= INT_MAX)
    if kind is float:
        return math.isfinite(value)
    return False


def _unwritable(value: Any, path: JsonPath, depth: int) -> tuple[str, str] | None:
    """``(path, reason)`` of the first value strict JSON cannot carry (or that
    nests past ``MAX_DEPTH``: pride would not read it back), or None."""
    if isinstance(value, Mapping | list | tuple) and depth < 0:
        return (json_path(path), f"nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return None if is_scalar_text(value) else (json_path(path), _SURROGATE)
    if isinstance(value, int | float):
        problem = number_problem(value)
        return None if problem is None else (json_path(path), problem)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return (json_path(path), f"a key is {type(key).__name__}, not a string")
            if not is_scalar_text(key):
                return (json_path(path), f"a key: {_SURROGATE}")
            found = _unwritable(item, (path, key), depth - 1)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = _unwritable(item, (path, index), depth - 1)
            if found is not None:
                return found
        return None
    return (json_path(path), f"expected JSON data, got {type(value).__name__}")


_TOO_DEEP_TEXT = f"<nested deeper than {MAX_DEPTH} levels>"


def _replaced(value: Any, depth: int) -> Any:
    """``value`` as plain data of exact builtin types (what `ENCODER` is given),
    with what strict JSON cannot carry replaced; a subclass of a JSON type (a str
    enum, a dict subclass) becomes its plain value, as ``json.dumps`` wrote it."""
    if isinstance(value, str):
        return scrub_text(str.__str__(value))
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        value = int.__int__(value)
        return value if INT_MIN <= value <= INT_MAX else str(value)
    if isinstance(value, float):
        return float.__float__(value) if math.isfinite(value) else None
    if isinstance(value, Mapping | list | tuple) and depth < 0:
        return _TOO_DEEP_TEXT
    if isinstance(value, Mapping):
        return {
            scrub_text(str.__str__(key) if isinstance(key, str) else str(key)): _replaced(
                item, depth - 1
            )
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_replaced(item, depth - 1) for item in value]
    if value is None:
        return None
    return scrub_text(str(value))
