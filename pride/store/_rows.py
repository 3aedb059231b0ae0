"""The JSON text of a stored row: the codec's strict JSON, made fast.

Every recorded message becomes one row, so making its text is on the path of
every turn of a branch with a store, and ``json.dumps`` followed by the
strictness scan of [`dump_json`][pride.messages.codec.dump_json] costs more
than the rest of a short turn's store work. msgspec (already pride's schema
library) encodes plain data about ten times faster than ``json.dumps``, but
it is lenient where pride is strict (a non-finite float becomes ``null``
without a word, an integer of any size is written, a non-string key is
turned into one, more types than JSON's are encoded). So one walk over the
data first checks that it holds nothing but what strict JSON carries as it
is; only then is msgspec's text used. Text is not walked: msgspec refuses a
string with a lone surrogate (``UnicodeEncodeError``), which is taken as the
walk's "no". Anything else (rare: a model's or a tool's odd output) goes the
documented way, `dump_json` with its replacements and warning.

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
# Field values msgspec writes as the codec does, with no check (text with a lone
# surrogate makes msgspec raise; `message_text` then steps aside).
_AS_IS_FIELD = frozenset({str, type(None), bool, UUID})


def row_text(data: Any) -> str:
    """Strict JSON text for ``data``, the same as ``dump_json(data)`` would accept.

    Raises:
        InvalidMessage: as `dump_json` (the data is not JSON, or strict JSON
            cannot carry it).
    """
    if _plain(data, 0):
        try:
            return _ENCODER.encode(data).decode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: msgspec refuses it, as strict JSON
            pass
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
        # Text, nothing, a flag, a UUID are written as they are; a lone surrogate
        # in text is not, but msgspec refuses it (below). The rest is checked here.
        if kind in _AS_IS_FIELD:
            continue
        if kind is float:
            if not math.isfinite(value):
                return None
        elif kind is tuple or kind is list or kind is dict:
            if value and not _plain(value, 1):
                return None
        elif kind is not int or not _INT_MIN <= value <= _INT_MAX:
            return None
    try:
        body = _ENCODER.encode(message)
    except UnicodeEncodeError:  # a lone surrogate (in a field no converter scrubs)
        return None
    return (prefix + body[1:]).decode("utf-8")


def id_text(identity: Any) -> str:
    """``str(identity)``; for a `UUID` made by msgspec (about 3x faster than
    ``UUID.__str__``, which formats in Python; every stored message needs its
    id as text)."""
    if type(identity) is not UUID:
        return str(identity)
    return _ENCODER.encode(identity)[1:-1].decode("ascii")


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` is JSON that strict JSON carries unchanged, text apart:
    plain ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``bool``,
    ``None``, finite ``float``, 64-bit ``int``. A string is not looked at: one
    with a lone surrogate makes msgspec raise, and its caller steps aside then.

    One call per container, its leaves checked inline: every stored message's
    metadata comes this way.
    """
    kind = type(value)
    if kind is dict:
        if depth > _MAX_DEPTH:
            return False
        for key in value:
            if type(key) is not str:
                return False
        items: Any = value.values()
    elif kind is list or kind is tuple:
        if depth > _MAX_DEPTH:
            return False
        items = value
    else:
        return _leaf(value)
    for item in items:
        kind = type(item)
        if kind is str or item is None or kind is bool:
            continue
        if kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return False
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is dict or kind is list or kind is tuple:
            if item and not _plain(item, depth + 1):
                return False
        else:
            return False
    return True


def _leaf(value: Any) -> bool:
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if kind is float:
        return math.isfinite(value)
    return False


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
