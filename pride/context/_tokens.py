"""Token counting for the provider budget: the same counter the model layer uses.

tiktoken's count when it is installed and its encoding loads (it needs a
download the first time, so offline machines fall back), else an estimate of
one token per `CHARS_PER_TOKEN` characters. One definition lives in
[`pride.llm`][pride.llm]; this module names it for the context registry.
"""

from __future__ import annotations

from ..llm import (
    CHARS_PER_TOKEN,
    estimate_text_tokens as count_tokens,
    load_encoding as load_tokenizer,
)

__all__ = ["CHARS_PER_TOKEN", "count_tokens", "load_tokenizer"]
