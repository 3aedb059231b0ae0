"""The JSON text of a stored row: the codec's strict JSON, made fast.

Every recorded message becomes one row, so making its text is on the path of
every turn of a branch with a store, and ``json.dumps`` followed by the
strictness scan of [`dump_json`][pride.messages.codec.dump_json] costs more
than the rest of a short turn's store work. msgspec (already pride's schema
library) encodes plain data about ten times faster than ``json.dumps``, but
it is lenient where pride is strict (a non-finite float becomes ``null``
without a word, an integer up to 2**64 - 1 is written, a non-string key is
turned into one, more types than JSON's are encoded). So one walk over the
data first checks that it holds nothing but what strict JSON carries as it
is; only then is msgspec's text used. Anything else (rare: a model's or a
tool's odd output) goes the documented way, `dump_json` with its
replacements and warning.

A conversation message takes a shorter way still (`message_text`): msgspec
encodes the frozen attrs message itself, in one call, once the same walk
has checked every field's value; the codec's unstructuring (cattrs, a dict
per message) is skipped. That way writes exactly the codec's row, key order
apart (a test compares the two for every message class), and a message with
anything else in a field goes the codec's way. Measured with
`benchmarks/bench_durable.py` (docs/durability.md, "Throughput").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any
from uuid import UUID

import attrs
import msgspec

from ..messages import ActionRequest, ActionResponse, AssistantResponse, Instruction, System
from ..messages.codec import TAG, dump_json

__all__ = ["id_text", "message_text", "projection_text", "row_text"]

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1
_MAX_DEPTH = 64
_ENCODER = msgspec.json.Encoder()


def row_text(data: Any) -> str:
    """Strict JSON text for ``data``, the same as ``dump_json(data)`` would accept.

    Raises:
        InvalidMessage: as `dump_json` (the data is not JSON, or strict JSON
            cannot carry it).
    """
    if _plain(data, 0):
        return _ENCODER.encode(data).decode("utf-8")
    return dump_json(data)


def _fields(cls: type) -> tuple[str, ...]:
    # What both the codec (cattrs skips init=False attributes) and msgspec (it
    # skips names with a leading underscore) write of an attrs class.
    return tuple(
        field.name for field in attrs.fields(cls) if field.init and not field.name.startswith("_")
    )


_MESSAGES: dict[type, tuple[bytes, Callable[[Any], tuple[Any, ...]]]] = {
    # Every field's value in one C call (attrgetter of several names returns a tuple).
    cls: (f'{{"{TAG}":"{cls.__name__}",'.encode(), attrgetter(*_fields(cls)))
    for cls in (System, Instruction, AssistantResponse, ActionRequest, ActionResponse)
}


def message_text(message: Any) -> str | None:
    """The row text of a conversation message, or None to go the codec's way.

    None unless ``message`` is one of the five message classes (exactly: a
    subclass may add fields or hooks) and every field holds what strict JSON
    carries as it is (a `UUID` as well: both ways write it as text).
    """
    known = _MESSAGES.get(type(message))
    if known is None:
        return None
    prefix, values = known
    for value in values(message):
        kind = type(value)
        # The usual fields inline (every stored message passes here): text,
        # nothing, a finite time, a UUID, an empty list or dict; anything else
        # is walked.
        if kind is str:
            if not value.isascii() and not _text(value):
                return None
        elif value is None or kind is UUID:
            continue
        elif kind is float:
            if not math.isfinite(value):
                return None
        elif (kind is tuple or kind is list or kind is dict) and not value:
            continue
        elif not _item(value, 0):
            return None
    body = _ENCODER.encode(message)
    return (prefix + body[1:]).decode("utf-8")


def id_text(identity: Any) -> str:
    """``str(identity)``; for a `UUID` made by msgspec (about 3x faster than
    ``UUID.__str__``, which formats in Python; every stored message needs its
    id as text)."""
    if type(identity) is not UUID:
        return str(identity)
    return _ENCODER.encode(identity)[1:-1].decode("ascii")


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` is JSON that strict JSON carries unchanged: plain
    ``dict`` (string keys), ``list``, ``tuple``, ``str`` without a lone
    surrogate, ``bool``, ``None``, finite ``float``, 64-bit ``int``."""
    if depth > _MAX_DEPTH:
        return False
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or _text(key)):
                return False
            if not _scalar(item) and not _item(item, depth):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_scalar(item) or _item(item, depth) for item in value)
    return _item(value, depth - 1)


def _scalar(value: Any) -> bool:
    """A quick yes for the common leaves (ASCII text, nothing, a small integer, a
    finite float); False means "look closer" (`_item`), not "refused"."""
    kind = type(value)
    if kind is str:
        return bool(value.isascii())
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    return kind is float and math.isfinite(value)


def _item(value: Any, depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return _text(value)
    if kind is bool or value is None:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if kind is float:
        return math.isfinite(value)
    if kind is dict or kind is list or kind is tuple:
        return _plain(value, depth + 1)
    return False


def _text(value: str) -> bool:
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def projection_text(projection: Mapping[str, Any]) -> str:
    """The JSON text of a branch's projection: what is not JSON-like becomes its
    ``str`` (as ``json.dumps(default=str)`` would), and what strict JSON cannot
    carry is replaced (`dump_json` with ``replace``)."""
    return dump_json(_projection_data(projection), replace=True)


def _projection_data(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Mapping):
        return {str(key): _projection_data(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_projection_data(item) for item in value]
    return str(value)
