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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from ..messages.codec import dump_json

__all__ = ["projection_text", "row_text"]

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


def _plain(value: Any, depth: int) -> bool:
    """True when ``value`` is JSON that strict JSON carries unchanged: plain
    ``dict`` (string keys), ``list``, ``tuple``, ``str`` without a lone
    surrogate, ``bool``, ``None``, finite ``float``, 64-bit ``int``."""
    if depth > _MAX_DEPTH:
        return False
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _text(key) or not _item(item, depth):
                return False
        return True
    if kind is list or kind is tuple:
        return all(_item(item, depth) for item in value)
    return _item(value, depth - 1)


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
