"""Counting the tokens of a context block, for the provider budget.

Problem: the budget bounds the text injected into a request, in tokens, but
the model's own tokenizer is not at hand (and differs per provider).

Options: a real tokenizer (tiktoken's ``o200k_base``, what the reference
system uses), which needs the optional ``tiktoken`` package *and* its
encoding file, downloaded on first use (so it fails, or hangs, without
network); or an estimate from the text's length.

Choice: tiktoken when it is installed and its encoding loads (tried once per
process, in a worker thread, for at most :data:`LOAD_TIMEOUT` seconds, so an
offline machine never stalls a turn for long); otherwise one token per
:data:`CHARS_PER_TOKEN` characters, rounded up. The estimate is close for
English prose with GPT- and Claude-family tokenizers; the budget is a bound
on injected text, not an exact count for every model. A registry can be
given its own counter instead (``ContextProviderRegistry(tokenizer=...)``).
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import trio

__all__ = ["CHARS_PER_TOKEN", "LOAD_TIMEOUT", "count_tokens", "load_tokenizer"]

log = logging.getLogger("pride.context")

CHARS_PER_TOKEN = 4
"""Characters per token in the fallback estimate."""

LOAD_TIMEOUT = 2.0
"""Seconds allowed for loading tiktoken's encoding before falling back for good."""

_encoding: Any = None
_tried = False


def _load() -> Any:
    tiktoken = importlib.import_module("tiktoken")
    return tiktoken.get_encoding("o200k_base")


async def load_tokenizer() -> None:
    """Try once per process to load tiktoken's encoding; keep the estimate if it fails.

    Cancellation: the attempt runs in a worker thread that is abandoned on
    cancellation or after :data:`LOAD_TIMEOUT` seconds; the next call does
    not try again.
    """
    global _encoding, _tried
    if _tried:
        await trio.lowlevel.checkpoint()
        return
    _tried = True
    try:
        importlib.import_module("tiktoken")
    except ImportError:
        log.debug("tiktoken is not installed; estimating %d characters per token", CHARS_PER_TOKEN)
        await trio.lowlevel.checkpoint()
        return
    with trio.move_on_after(LOAD_TIMEOUT):
        try:
            _encoding = await trio.to_thread.run_sync(_load, abandon_on_cancel=True)
        except Exception as exc:  # offline, corrupt cache, ...: the estimate still works
            log.info("tiktoken encoding unavailable (%s); estimating by characters", exc)
            return
    if _encoding is None:
        log.info("tiktoken encoding did not load in time; estimating by characters")


def count_tokens(text: str) -> int:
    """Tokens in ``text``: tiktoken's count when loaded, else ``ceil(len(text) / 4)``."""
    if not text:
        return 0
    if _encoding is not None:
        return len(_encoding.encode(text, disallowed_special=()))
    return -(-len(text) // CHARS_PER_TOKEN)
