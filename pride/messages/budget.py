"""Budgets and usage: how much work a turn, a branch or a session may do, and did.

A [`Budget`][pride.Budget] is a set of optional limits; a limit left at ``None``
does not apply. It travels: every work command has a ``budget`` field, so a
request line can bound the turn it asks for (the codec refuses a negative
or non-finite limit). Where a budget applies and what happens when one is
exceeded is the runtime's business (`pride.budget.accounts`); this module
only holds the values.

[`Usage`][pride.Usage] is what was used: tokens (and which of them were cached
or reasoning) and cost as the models reported them, and how many model and tool
calls were made. It is the one usage type: a model's reply carries one
(``pride.llm.Usage`` is this class), and so do a turn's terminal signal,
``branch.usage`` and ``session.usage``.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

__all__ = ["BUDGET_FIELDS", "MAX_COST_USD", "MAX_COUNT", "Budget", "Usage", "limit_problem"]

# Which limits are whole numbers and which may be fractional.
_COUNTS = ("max_input_tokens", "max_output_tokens", "max_model_calls", "max_tool_calls")
_AMOUNTS = ("max_cost_usd", "max_duration")
BUDGET_FIELDS = (
    "max_input_tokens",
    "max_output_tokens",
    "max_cost_usd",
    "max_model_calls",
    "max_tool_calls",
    "max_duration",
)
"""The limits of a Budget, in declaration order."""


def limit_problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the limit ``name`` of a Budget, or None if it can.

    Token and call limits are non-negative ints; ``max_cost_usd`` and
    ``max_duration`` non-negative finite numbers. ``None`` (no limit) is fine.
    """
    if value is None:
        return None
    if name in _COUNTS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"expected a whole number or null, got {type(value).__name__}"
    elif isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected a number or null, got {type(value).__name__}"
    elif not math.isfinite(value):
        return f"{value!r} is not a finite number (leave the limit null for none)"
    if value < 0:
        return f"must be >= 0, got {value!r}"
    if isinstance(value, int) and abs(value) >= 2**63:
        return "is outside the signed 64-bit range"
    return None


def _check(instance: Budget, attribute: attrs.Attribute[Any], value: Any) -> None:
    problem = limit_problem(attribute.name, value)
    if problem is not None:
        kind = TypeError if problem.startswith("expected") else ValueError
        raise kind(f"Budget.{attribute.name}: {problem}")


def _limit() -> Any:
    return attrs.field(default=None, validator=_check)


@attrs.frozen
class Budget:
    """Limits on the work of a turn, a branch's turns, or a session.

    ```python
    Branch(budget=Budget(max_model_calls=10, max_cost_usd=0.50))
    await branch.ReAct("plan it", budget=Budget(max_duration=30))
    Session(budget=Budget(max_output_tokens=20_000))
    ```

    Every limit is optional (``None``: no limit).

    Attributes:
        max_input_tokens: prompt tokens, summed over model calls.
        max_output_tokens: completion tokens, summed over model calls; a
            streamed reply is cut as soon as its text runs past what is left.
        max_cost_usd: cost in US dollars as the models report or price it (a
            call of unknown cost counts as free, and is logged once).
        max_model_calls: model calls; ``3`` lets exactly three through.
        max_tool_calls: tool calls (each call of a batch counts).
        max_duration: seconds, from the start of the turn (for a session:
            from the session's start), enforced as a cancel-scope deadline.

    Calls are checked before they are made, against the usage so far; token
    and cost limits are exceeded when the use is greater than the limit,
    which is noticed as soon as a call reports its usage.

    Raises:
        TypeError: a limit of the wrong type (a token or call limit must be an int).
        ValueError: a negative or non-finite limit.
    """

    max_input_tokens: int | None = _limit()
    max_output_tokens: int | None = _limit()
    max_cost_usd: float | None = _limit()
    max_model_calls: int | None = _limit()
    max_tool_calls: int | None = _limit()
    max_duration: float | None = _limit()

    @property
    def limited(self) -> bool:
        """True when at least one limit is set."""
        return any(getattr(self, name) is not None for name in BUDGET_FIELDS)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in BUDGET_FIELDS
            if getattr(self, name) is not None
        )
        return f"Budget({shown})"


#: The largest token count pride reads as one reply's (from a provider, or from a
#: journal): JSON's safe integer range. A larger count is no real figure, and
#: would overflow float arithmetic on prices.
MAX_COUNT = 2**53 - 1

#: The largest cost in US dollars pride reads as one call's. A reply claiming more
#: is no real figure; and a bound keeps every sum of costs finite (two costs of
#: 1e308 would sum to infinity, which no budget compares and no JSON carries).
MAX_COST_USD = 1_000_000.0


@attrs.frozen
class Usage:
    """Work done: tokens, cost, and model and tool calls; of one model call, a
    turn, a branch or a session (``pride.llm.Usage`` is this class).

    ```python
    Usage(input_tokens=1_200, output_tokens=80, cost_usd=0.002, model_calls=1)
    ```

    ``input_tokens`` counts every prompt token, including those served from a
    provider cache (``cached_tokens`` says how many of them were) and those
    written to it (``cache_write_tokens``, Anthropic's
    ``cache_creation_input_tokens``; OpenAI reports none). ``output_tokens``
    counts every generated token, including the model's hidden reasoning
    (``reasoning_tokens`` says how many of them were).

    ``cost_usd`` is None when no model call reported or priced its cost: it is
    never made up as 0, so ``0.0`` means calls were priced and were free.
    Compare it to a number as ``(usage.cost_usd or 0.0) < 1.0`` (a budget's
    ``max_cost_usd`` counts an unknown cost as free the same way). Adding two
    usages sums every field; a known cost plus an unknown one is the known cost.

    One model call's usage, as its reply (``ModelResponse.usage``) carries it,
    leaves ``model_calls`` and ``tool_calls`` at 0: calls are counted by the
    turn that makes them.

    The first five fields may be given by position (in this order); the token
    details only by name.

    Attributes:
        input_tokens: prompt tokens, summed over model calls.
        output_tokens: completion tokens, summed over model calls.
        cost_usd: US dollars, or None when unknown.
        model_calls: model calls made.
        tool_calls: tool calls made.
        cached_tokens: the part of ``input_tokens`` served from a provider cache.
        cache_write_tokens: the part of ``input_tokens`` written to a provider cache.
        reasoning_tokens: the part of ``output_tokens`` spent reasoning.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    model_calls: int = 0
    tool_calls: int = 0
    cached_tokens: int = attrs.field(default=0, kw_only=True)
    cache_write_tokens: int = attrs.field(default=0, kw_only=True)
    reasoning_tokens: int = attrs.field(default=0, kw_only=True)

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None:
            cost = other.cost_usd
        elif other.cost_usd is None:
            cost = self.cost_usd
        else:
            cost = self.cost_usd + other.cost_usd
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            self.model_calls + other.model_calls,
            self.tool_calls + other.tool_calls,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )
