"""Reading provider JSON that must have a shape, naming the path of what does not.

A provider's reply is decoded JSON of any shape: a string where an object
belongs, an ``int`` for a list, a token count of ``"12"``. The endpoints read
every field through these helpers, which return the value when it has the
expected JSON type and raise `WrongShape` naming its path
(``choices[0].message.tool_calls``) when it does not; the HTTP endpoint turns
that into a [`MalformedResponse`][pride.MalformedResponse] with the provider and URL.

The rule is lenient about absence and strict about type: a missing field and
``null`` both mean "not given" (providers and compatible servers leave out
what they do not support), while a present value of the wrong type is an
error, never coerced. Paths are built only when a value is wrong, so reading a
good reply costs a few type checks per field.
"""

from __future__ import annotations

from typing import Any

from ..messages.budget import MAX_COST_USD, MAX_COUNT

__all__ = [
    "WrongShape",
    "as_object",
    "cost_field",
    "count_field",
    "list_field",
    "object_field",
    "str_field",
    "where",
]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class WrongShape(Exception):
    """A value of the wrong JSON type at ``path``; ``expected`` says what belongs there."""

    def __init__(self, path: str, expected: str, value: Any) -> None:
        super().__init__(path, expected)
        self.path = path or "the top level"
        self.expected = expected
        self.found = _json_type(value)

    def in_event(self, number: int) -> WrongShape:
        """Prefix the path with the number of the stream event it was found in (from 1)."""
        self.path = f"event {number}: {self.path}"
        return self

    def __str__(self) -> str:
        return f"{self.path} should be {self.expected}, not {self.found}"


def where(path: str, key: str | int) -> str:
    """The path of ``key`` (a field name or a list index) under ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def as_object(value: Any, path: str) -> dict[str, Any]:
    """``value`` itself, which must be a JSON object."""
    if not isinstance(value, dict):
        raise WrongShape(path, "an object", value)
    return value


def object_field(parent: dict[str, Any], key: str, path: str) -> dict[str, Any] | None:
    """``parent[key]`` as an object, or ``None`` when it is absent or null."""
    value = parent.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise WrongShape(where(path, key), "an object", value)


def list_field(parent: dict[str, Any], key: str, path: str) -> list[Any] | None:
    """``parent[key]`` as an array, or ``None`` when it is absent or null."""
    value = parent.get(key)
    if value is None or isinstance(value, list):
        return value
    raise WrongShape(where(path, key), "an array", value)


def str_field(parent: dict[str, Any], key: str, path: str) -> str | None:
    """``parent[key]`` as a string, or ``None`` when it is absent or null."""
    value = parent.get(key)
    if value is None or isinstance(value, str):
        return value
    raise WrongShape(where(path, key), "a string", value)


def count_field(parent: dict[str, Any], key: str, path: str) -> int:
    """``parent[key]`` as a count (an integer from 0 to `MAX_COUNT`), 0 if absent.

    An integral float (``12.0``, as some compatible servers write) is accepted.
    """
    value = parent.get(key)
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_COUNT:
        return int(value)
    raise WrongShape(where(path, key), f"a count (an integer from 0 to {MAX_COUNT})", value)


def cost_field(parent: dict[str, Any], key: str, path: str) -> float | None:
    """``parent[key]`` as a cost (a number from 0 to `MAX_COST_USD`), or ``None``
    when it is absent or null.

    A negative cost is refused like a negative count: summed, it would buy
    calls past ``max_cost_usd``.
    """
    value = parent.get(key)
    if value is None:
        return None
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and 0 <= value <= MAX_COST_USD  # False for NaN, too
    ):
        return float(value)
    raise WrongShape(where(path, key), f"a cost (a number from 0 to {MAX_COST_USD:g})", value)
