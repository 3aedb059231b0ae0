"""A tool call to execute, and the loose forms read as one.

`ActionCall` is what ``Act`` carries and what a model's tool call becomes;
`act_calls` reads ``Act``'s argument (ActionCalls or
``{"function", "arguments", "call_id"}`` mappings) and `call_from_mapping`
one mapping, refusing anything else with a ``TypeError`` that names the call,
so a bad call fails where it is made rather than inside the actor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

import attrs

__all__ = ["ActionCall", "JsonValue", "act_calls", "call_from_mapping"]

# A marker the codec recognises (``Annotated`` keeps it ``Any`` for type checkers).
JsonValue = Annotated[Any, "pride:json"]
"""Any JSON value: None, bool, int, float, str, lists and str-keyed dicts of them."""


@attrs.frozen
class ActionCall:
    """One tool call to execute: ``function(**arguments)``."""

    function: str
    arguments: Mapping[str, JsonValue] = attrs.field(factory=dict)
    call_id: str | None = None


def act_calls(value: Any) -> tuple[ActionCall, ...]:
    """``Act``'s calls: ActionCalls, or ``{"function", "arguments", "call_id"}`` mappings.

    Raises:
        TypeError: ``value`` is not a sequence of calls, or a call is neither form
            (named by its position), so a bad call fails where it is made, not
            deep inside the actor.
    """
    if isinstance(value, Mapping | str | bytes) or not isinstance(value, Iterable):
        raise TypeError(
            f"Act takes a sequence of calls, got {type(value).__name__}: "
            "wrap one call in a tuple, Act((call,))"
        )
    calls = tuple(value)
    for call in calls:
        if not isinstance(call, ActionCall):
            break
    else:
        return calls
    return tuple(_action_call(call, index) for index, call in enumerate(calls))


def _action_call(call: Any, index: int) -> ActionCall:
    if isinstance(call, ActionCall):
        return call
    if isinstance(call, Mapping):
        return call_from_mapping(call, where=f"call {index}")
    raise TypeError(
        f"call {index} of Act is a {type(call).__name__}: give an ActionCall "
        'or a {"function": ..., "arguments": {...}} mapping'
    )


def call_from_mapping(call: Mapping[str, Any], *, where: str = "the call") -> ActionCall:
    """An ActionCall from ``{"function", "arguments", "call_id"}`` (``arguments`` and
    ``call_id`` optional).

    Raises:
        TypeError: ``function`` is missing or not a string, ``arguments`` is not a
            mapping, or ``call_id`` is neither None nor a string; ``where`` names
            the call in the message.
    """
    function = call.get("function")
    if not isinstance(function, str):
        raise TypeError(f'{where} needs a "function" naming the tool, got {function!r}')
    arguments = call.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        raise TypeError(
            f'"arguments" of {where} ({function}) must be a mapping, got {type(arguments).__name__}'
        )
    call_id = call.get("call_id")
    if call_id is not None and not isinstance(call_id, str):
        raise TypeError(f'"call_id" of {where} ({function}) must be a string or None')
    return ActionCall(function, dict(arguments), call_id)
