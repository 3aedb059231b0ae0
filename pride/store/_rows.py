"""The JSON text of a branch's projection row.

Every other row (a message, a journal record, a flow event) is the codec's
text (`to_json`, `dump_json`): one JSON writer for the whole store. A
projection is different only in what it accepts: it is ``to_dict`` output,
which may hold values of any type, shown the way a prompt shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages.codec import dump_json

__all__ = ["projection_text"]


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
