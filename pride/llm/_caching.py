"""Anthropic prompt caching: where pride puts ``cache_control`` breakpoints.

Problem: Anthropic caches a prompt's prefix only up to a block marked
``cache_control: {"type": "ephemeral"}`` (a *breakpoint*; at most 4 per
request), and a long agent conversation resends the same tools, system text
and history on every call of every turn. Unmarked, every call pays the full
input price; marked, a later call with the same prefix reads it at a tenth of
the price (a write costs 1.25x input once).

Choice: a default policy, on for Anthropic models, that marks what is stable
between calls, in the API's prefix order:

- ``"tools"``: the last tool (the whole tool list is the prefix);
- ``"system"``: the system text (sent as one text block to carry the marker);
- ``"history"``: the last message before this turn's new input, the input
  being the messages from the last user message that is not only tool
  results (so every round of a tool loop, and the next turn, reads the
  history written by the first call). A thinking block cannot carry a marker:
  the message's last other block does; a message of thinking only gets none.

The model option ``prompt_cache`` changes it: ``True`` (the default policy),
``False`` (no breakpoints), or a list of the parts to mark
(``["tools", "system"]``). Breakpoints already in the request (a tool given in
Anthropic's own form with its ``cache_control``) count against the limit of 4:
pride adds its own, in the order above, only while there is room. It is
checked when the model is made (``ValueError``) and when a call's own options
change it ([`BadRequest`][pride.BadRequest], nothing sent). Prefixes shorter
than the model's minimum (1,024 tokens for most models) are not cached by the
API; marking them costs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "CACHE_PARTS",
    "MAX_BREAKPOINTS",
    "check_prompt_cache",
    "mark_breakpoints",
]

#: The parts the default policy marks, in the API's prefix order.
CACHE_PARTS = ("tools", "system", "history")

#: The most ``cache_control`` breakpoints Anthropic accepts in one request.
MAX_BREAKPOINTS = 4

_MARKER = {"type": "ephemeral"}

#: Blocks the API refuses a ``cache_control`` on.
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})


def check_prompt_cache(value: Any) -> bool | list[str]:
    """``value`` as a ``prompt_cache`` option: ``True``, ``False`` or a list of parts.

    Raises:
        ValueError: not a bool or an iterable of names from `CACHE_PARTS`.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ValueError(
            "prompt_cache must be True, False or a list of the parts to cache "
            f"({', '.join(map(repr, CACHE_PARTS))}), not a {type(value).__name__}"
        )
    parts = list(value)
    unknown = [part for part in parts if part not in CACHE_PARTS]
    if unknown:
        shown = ", ".join(repr(part)[:40] for part in unknown[:3])  # hostile data: bounded
        raise ValueError(
            f"unknown prompt_cache part(s) {shown}; choose from {', '.join(map(repr, CACHE_PARTS))}"
        )
    return [part for part in CACHE_PARTS if part in parts]  # the API's order, once each


def _parts(option: bool | list[str]) -> tuple[str, ...]:
    if option is True:
        return CACHE_PARTS
    if option is False:
        return ()
    return tuple(option)


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


def _count_breakpoints(body: dict[str, Any]) -> int:
    """Breakpoints the request carries already (placed by the caller)."""
    count = sum(1 for tool in body.get("tools") or () if _marked(tool))
    system = body.get("system")
    if isinstance(system, list):
        count += sum(1 for block in system if _marked(block))
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            count += sum(1 for block in content if _marked(block))
    return count


def _new_input_start(messages: list[Any]) -> int | None:
    """The index of this turn's new input: the last user message not only tool results."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if (
            isinstance(content, list)
            and content
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            continue
        return index
    return None


def _mark_message(message: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of ``message`` with its last markable block marked (``None``: none is)."""
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return None
        return {**message, "content": [{"type": "text", "text": content, "cache_control": _MARKER}]}
    if not isinstance(content, list):
        return None
    for index in range(len(content) - 1, -1, -1):
        block = content[index]
        if isinstance(block, dict) and block.get("type") not in _UNMARKABLE:
            blocks = list(content)
            blocks[index] = {**block, "cache_control": dict(_MARKER)}
            return {**message, "content": blocks}
    return None


def mark_breakpoints(body: dict[str, Any], option: bool | list[str]) -> None:
    """Add the policy's breakpoints to ``body`` (copying what it changes, never the
    caller's tools or messages), within `MAX_BREAKPOINTS` in all."""
    room = MAX_BREAKPOINTS - _count_breakpoints(body)
    for part in _parts(option):
        if room <= 0:
            return
        if part == "tools" and body.get("tools"):
            tools = list(body["tools"])
            if _marked(tools[-1]):
                continue
            tools[-1] = {**tools[-1], "cache_control": dict(_MARKER)}
            body["tools"] = tools
        elif part == "system" and body.get("system"):
            system = body["system"]
            if isinstance(system, str):
                body["system"] = [{"type": "text", "text": system, "cache_control": dict(_MARKER)}]
            elif isinstance(system, list) and isinstance(system[-1], dict):
                if _marked(system[-1]):
                    continue
                body["system"] = [*system[:-1], {**system[-1], "cache_control": dict(_MARKER)}]
            else:
                continue
        elif part == "history":
            messages = body.get("messages")
            if not isinstance(messages, list):
                continue
            start = _new_input_start(messages)
            if not start:  # no history before the new input (or no new input)
                continue
            message = messages[start - 1]
            marked = _mark_message(message) if isinstance(message, dict) else None
            if marked is None:
                continue
            body["messages"] = [*messages[: start - 1], marked, *messages[start:]]
        else:
            continue
        room -= 1
