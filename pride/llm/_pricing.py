"""A small price table, so usage can carry a cost when the provider does not.

Each kind of token has its price: fresh input, cached input (a cache read),
cache writes, and output (reasoning tokens are part of the output and billed as
it). Cost comes, in order of preference, from the provider itself (OpenRouter
reports ``usage.cost``), from this table, or not at all (``cost_usd=None``).
Prices are US dollars per million tokens as published by OpenAI and Anthropic
in 2025 and will go stale; they are an estimate for dashboards, not billing.
Model names match by prefix, longest first, so dated snapshots
(``gpt-4.1-mini-2025-04-14``) find their family.

The model name in a reply is the provider's word, and a reply is hostile
input: priced by that name alone, a reply naming a model with no price (free
under ``max_cost_usd``) or a cheaper one would make any call cheap. So a
reply is priced as the dearer of the model pride asked for and the one the
reply names (`price_reply`): a dated snapshot costs what its family does, and
an alias pride has no price for is still priced by the model it turns out to be.
"""

from __future__ import annotations

import attrs

from pride.messages import Usage

__all__ = ["PRICES", "price_reply", "price_usage", "priced"]

#: (provider, model prefix) -> (input, cached input, cache write, output) USD per
#: 1M tokens. Anthropic bills a cache write (its 5-minute cache) at 1.25x input;
#: OpenAI caches without a write charge, so its write price is the input price.
#: Reasoning tokens are billed as output by both, so they need no column.
PRICES: dict[tuple[str, str], tuple[float, float, float, float]] = {
    ("openai", "gpt-4.1-nano"): (0.1, 0.025, 0.1, 0.4),
    ("openai", "gpt-4.1-mini"): (0.4, 0.1, 0.4, 1.6),
    ("openai", "gpt-4.1"): (2, 0.5, 2, 8),
    ("openai", "gpt-4o-mini"): (0.15, 0.075, 0.15, 0.6),
    ("openai", "gpt-4o"): (2.5, 1.25, 2.5, 10),
    ("openai", "o4-mini"): (1.1, 0.275, 1.1, 4.4),
    ("anthropic", "claude-3-5-haiku"): (0.8, 0.08, 1, 4),
    ("anthropic", "claude-3-7-sonnet"): (3, 0.3, 3.75, 15),
    ("anthropic", "claude-sonnet-4"): (3, 0.3, 3.75, 15),
    ("anthropic", "claude-opus-4"): (15, 1.5, 18.75, 75),
}

_BY_LENGTH = sorted(PRICES.items(), key=lambda item: -len(item[0][1]))


def price_usage(provider: str, model: str, usage: Usage) -> float | None:
    """The estimated cost of ``usage`` for ``provider``/``model``, or ``None`` if unpriced."""
    for (known_provider, prefix), (inp, cached, write, out) in _BY_LENGTH:
        if provider == known_provider and model.startswith(prefix):
            # Figures are hostile: a read-plus-write larger than the input never
            # makes the fresh part negative, so nothing prices below zero.
            fresh = max(0, usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens)
            total = (
                fresh * inp
                + usage.cached_tokens * cached
                + usage.cache_write_tokens * write
                + usage.output_tokens * out
            )
            return total / 1_000_000
    return None


def priced(provider: str, model: str, usage: Usage) -> Usage:
    """``usage`` with its estimated cost (`price_usage`), or as it is when unpriced:
    what pride counts for a call that got no reply to carry its own."""
    cost = price_usage(provider, model, usage)
    return usage if cost is None else attrs.evolve(usage, cost_usd=cost)


def price_reply(provider: str, asked: str, named: str, usage: Usage) -> float | None:
    """The estimated cost of a reply of ``usage`` to a request for model ``asked``
    whose reply says it is model ``named``: the dearer of their prices, or ``None``
    when neither has one (see the module docstring)."""
    prices = [
        cost
        for cost in (price_usage(provider, asked, usage), price_usage(provider, named, usage))
        if cost is not None
    ]
    return max(prices, default=None)
