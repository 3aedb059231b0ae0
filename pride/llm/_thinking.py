"""Anthropic's extended thinking as a validated model option, and its blocks read back.

Problem: Anthropic's Messages API turns thinking on with a request field,
``thinking: {"type": "enabled", "budget_tokens": N}``, and refuses a request
that gets it wrong, at the cost of a round trip: a budget under 1,024 tokens,
a ``max_tokens`` not above the budget, ``temperature`` other than 1,
``top_k``, ``top_p`` under 0.95, or a tool choice that forces a tool.

Options: pass the field through as any request option (the user learns of a
mistake from a 400, on the first call, possibly deep in a turn); or check it
where the model is configured. Choice: check it twice, at the same rules: when
the model is made (``iModel(..., thinking=...)`` raises ``ValueError``, as any
bad configuration does) and when a call's own options change it (a command's
``request_options`` come from outside: [`BadRequest`][pride.BadRequest],
not retried, before anything is sent). ``thinking`` takes the budget as an
``int`` (``thinking=4096``), Anthropic's own object, or ``False`` /
``{"type": "disabled"}``; it is kept as Anthropic's object, so ``to_dict``
carries it as plain data.

``max_tokens`` counts the thinking too. A model with thinking and no
``max_tokens`` of its own asks for the budget plus
Anthropic's default ``max_tokens`` (4,096: room for the answer after the
thinking), so the default never fails the budget rule.

The option is Anthropic's: on models of another wire format ``thinking`` is
sent as given (OpenAI-compatible servers define their own meanings for it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "MIN_THINKING_BUDGET",
    "check_thinking",
    "thinking_enabled",
    "thinking_option",
]

#: The smallest ``budget_tokens`` Anthropic accepts.
MIN_THINKING_BUDGET = 1024

#: The lowest ``top_p`` Anthropic accepts while thinking.
_MIN_TOP_P = 0.95


def thinking_option(value: Any) -> dict[str, Any]:
    """``value`` (a budget, Anthropic's object, or ``False``) as Anthropic's object.

    Raises:
        ValueError: not one of those, or a budget under `MIN_THINKING_BUDGET`.
    """
    if value is False or value is None:
        return {"type": "disabled"}
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"type": "enabled", "budget_tokens": value}
    if not isinstance(value, Mapping):
        raise ValueError(
            "thinking must be a budget of tokens (an int), False, or Anthropic's "
            f'{{"type": "enabled", "budget_tokens": N}}, not {type(value).__name__}'
        )
    kind = value.get("type")
    if kind == "disabled":
        if set(value) != {"type"}:
            raise ValueError('thinking {"type": "disabled"} takes no other fields')
        return {"type": "disabled"}
    if kind != "enabled":
        raise ValueError(f'thinking "type" must be "enabled" or "disabled", not {kind!r}')
    unknown = set(value) - {"type", "budget_tokens"}
    if unknown:
        raise ValueError(f"unknown thinking fields: {', '.join(sorted(map(str, unknown)))}")
    budget = value.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool):
        raise ValueError(f"thinking budget_tokens must be an int, not {type(budget).__name__}")
    if budget < MIN_THINKING_BUDGET:
        raise ValueError(
            f"thinking budget_tokens must be at least {MIN_THINKING_BUDGET}, got {budget}"
        )
    return {"type": "enabled", "budget_tokens": budget}


def thinking_enabled(options: Mapping[str, Any]) -> bool:
    """Whether ``options`` (already checked) turn thinking on."""
    thinking = options.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") == "enabled"


def check_thinking(options: dict[str, Any], default_max_tokens: int) -> dict[str, Any]:
    """``options`` with ``thinking`` in Anthropic's form and the rules around it held.

    Returns ``options`` itself when it has no ``thinking``; otherwise a new
    dict, with ``max_tokens`` set to the budget plus ``default_max_tokens``
    when thinking is on and none was given.

    Raises:
        ValueError: the thinking option is malformed, or another option clashes
            with thinking (``max_tokens`` not above the budget, ``temperature``,
            ``top_k``, ``top_p``), the message naming both.
    """
    if "thinking" not in options:
        return options
    thinking = thinking_option(options["thinking"])
    checked = {**options, "thinking": thinking}
    if thinking["type"] != "enabled":
        return checked
    budget = thinking["budget_tokens"]
    max_tokens = checked.get("max_tokens")
    if max_tokens is None:
        checked["max_tokens"] = budget + default_max_tokens
    elif not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= budget:
        raise ValueError(
            f"max_tokens ({max_tokens!r}) must be an int above the thinking budget "
            f"({budget}): it counts the thinking and the answer"
        )
    temperature = checked.get("temperature")
    if temperature is not None and temperature != 1:
        raise ValueError(f"thinking works only with temperature 1 (or unset), not {temperature!r}")
    if checked.get("top_k") is not None:
        raise ValueError("thinking does not take top_k")
    top_p = checked.get("top_p")
    if top_p is not None and not (isinstance(top_p, int | float) and _MIN_TOP_P <= top_p <= 1):
        raise ValueError(f"thinking takes top_p from {_MIN_TOP_P} to 1 only, not {top_p!r}")
    return checked
