"""Loose input made into message types: what callers may pass where a message is meant.

* `system_message`: the system message a Branch's constructor arguments
  describe (a text or a [`System`][pride.System], a timestamp, pride's preamble);
* `action_call`: an [`ActionCall`][pride.ActionCall] from one, from a
  ``{"function", "arguments"}`` dict, or from a tool-call object with
  ``name``/``arguments``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import attrs

from .calls import ActionCall, call_from_mapping
from .conversation import DEFAULT_SYSTEM_MESSAGE, System

__all__ = ["PRIDE_SYSTEM_MESSAGE", "action_call", "action_calls", "system_message"]

PRIDE_SYSTEM_MESSAGE = (
    "You are an agent running on pride, an actor runtime: each conversation is served "
    "one turn at a time. Use the tools you are offered when they help, and answer "
    "plainly when they do not."
)
"""pride's built-in preamble, prepended when ``use_lion_system_message=True``."""


def system_message(
    system: System | str | None,
    system_datetime: bool | str | None = None,
    lion: bool = False,
    sender: str | None = None,
) -> System | None:
    """The system message these arguments describe, or None when they describe none.

    A system message exists only when ``system``, ``system_datetime`` or
    ``lion`` is truthy. ``system_datetime=True`` stamps the current UTC time;
    a string is used as the stamp. ``lion`` prepends
    `PRIDE_SYSTEM_MESSAGE`. ``sender`` replaces the message's sender.

    Raises:
        TypeError: ``system`` is neither a str nor a System message.
    """
    if system and not isinstance(system, System | str):
        raise TypeError(f"system must be a str or a System message, got {type(system).__name__}")
    if not (system or system_datetime or lion):
        return None
    if isinstance(system, System):
        base = system
    else:
        base = System(system_message=system or DEFAULT_SYSTEM_MESSAGE)
    stamp: str | None = base.system_datetime
    if system_datetime is True:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    elif isinstance(system_datetime, str) and system_datetime:
        stamp = system_datetime
    text = base.system_message
    if lion:
        text = f"{PRIDE_SYSTEM_MESSAGE}\n\n{text}" if system else PRIDE_SYSTEM_MESSAGE
    message = attrs.evolve(base, system_message=text, system_datetime=stamp)
    return message if sender is None else attrs.evolve(message, sender=sender)


def action_call(call: Any) -> ActionCall:
    """An ActionCall from an ActionCall, a ``{"function", "arguments", "call_id"}``
    mapping, or an object with ``name`` (or ``function``), ``arguments`` and ``id``.

    Raises:
        TypeError: ``call`` is none of those.
    """
    if isinstance(call, ActionCall):
        return call
    if isinstance(call, Mapping):
        return call_from_mapping(call)
    name = getattr(call, "name", None) or getattr(call, "function", None)
    if isinstance(name, str):
        return ActionCall(
            name, dict(getattr(call, "arguments", {}) or {}), getattr(call, "id", None)
        )
    raise TypeError(f"cannot read an action request from {type(call).__name__}")


def action_calls(calls: Any) -> tuple[ActionCall, ...]:
    """One call or a list (or tuple) of them, each read by `action_call`.

    Raises:
        TypeError: a call is none of the forms `action_call` reads.
    """
    items = calls if isinstance(calls, list | tuple) else [calls]
    return tuple(action_call(call) for call in items)
