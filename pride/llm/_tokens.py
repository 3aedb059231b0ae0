"""Token estimates for rate limiting and for usage the provider did not report.

The estimate uses tiktoken's ``o200k_base`` encoding when the optional
``tiktoken`` package is installed (``pip install 'pride[tokens]'``) *and* its
encoding file loads; tiktoken downloads that file on first use, which fails or
hangs without network, so loading happens once per process in a worker thread
with a short bound (`load_encoding`). Otherwise, and until then, the
estimate is one token per `CHARS_PER_TOKEN` characters of text, rounded
up: close enough for English prose with GPT- and Claude-family tokenizers, and
cheap. Only message text, tool arguments, the system text and tool schemas are
counted; per-message framing overhead is ignored.
"""

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

import trio

from ._types import ModelRequest

__all__ = [
    "CHARS_PER_TOKEN",
    "encoding_tried",
    "estimate_request_tokens",
    "estimate_text_tokens",
    "load_encoding",
]

logger = logging.getLogger("pride.llm")

#: Characters per token in the fallback estimate.
CHARS_PER_TOKEN = 4

#: Seconds allowed for loading the tiktoken encoding before falling back.
ENCODING_LOAD_TIMEOUT = 2.0

_encoding: Any = None
_encoding_tried = False


def _load_tiktoken() -> Any:
    tiktoken = importlib.import_module("tiktoken")
    return tiktoken.get_encoding("o200k_base")


def encoding_tried() -> bool:
    """Whether `load_encoding` has run in this process."""
    return _encoding_tried


async def load_encoding() -> None:
    """Try once per process to load tiktoken's encoding; fall back quietly if not.

    Cancellation: the attempt runs in a worker thread that is abandoned on
    cancellation or after `ENCODING_LOAD_TIMEOUT` seconds.
    """
    global _encoding, _encoding_tried
    if _encoding_tried:
        return
    _encoding_tried = True
    try:
        importlib.import_module("tiktoken")
    except ImportError:
        logger.debug(
            "tiktoken is not installed; estimating %d characters per token", CHARS_PER_TOKEN
        )
        return
    with trio.move_on_after(ENCODING_LOAD_TIMEOUT):
        try:
            _encoding = await trio.to_thread.run_sync(_load_tiktoken, abandon_on_cancel=True)
        except Exception as exc:  # no network, corrupt cache, ...: the estimate still works
            logger.info("tiktoken encoding unavailable (%s); estimating by characters", exc)
            return
    if _encoding is None:
        logger.info("tiktoken encoding did not load in time; estimating by characters")


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens in ``text`` (tiktoken when loaded, else characters / 4)."""
    if not text:
        return 0
    if _encoding is not None:
        return len(_encoding.encode(text, disallowed_special=()))
    return -(-len(text) // CHARS_PER_TOKEN)


def _collect_text(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in ("type", "role", "id", "tool_call_id", "tool_use_id", "cache_control"):
                continue
            _collect_text(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect_text(item, out)


def estimate_request_tokens(request: ModelRequest) -> int:
    """Estimated prompt tokens of ``request``: messages, system text and tool schemas."""
    parts: list[str] = []
    _collect_text(request.messages, parts)
    if request.system:
        parts.append(request.system)
    if request.tools:
        parts.append(json.dumps(request.tools))
    if request.response_format:
        parts.append(json.dumps(request.response_format))
    return estimate_text_tokens("\n".join(parts))
