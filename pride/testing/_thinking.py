"""Anthropic's extended thinking on the loopback server: signed blocks, and the API's refusals.

The real API signs each thinking block it returns and, while thinking is on,
checks what comes back: the assistant's thinking blocks must be sent back
unchanged (an edited or made-up one fails its signature), and a request that
continues a tool loop must open the assistant's turn with its thinking block,
or the request is refused with HTTP 400. A client that drops the blocks works
against a lenient test server and fails against the real one at its second
call; so the loopback server, told to (``openai_server(require_thinking=True)``),
refuses the same requests with the same error shape.

`ThinkingSigner` makes the signatures (an HMAC of the text under a key of the
server's own, so only blocks this server returned verify) and
`thinking_refusal` applies the rules to a request body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from typing import Any

__all__ = ["MIN_BUDGET", "ThinkingSigner", "thinking_refusal"]

#: The smallest ``budget_tokens`` the API accepts.
MIN_BUDGET = 1024

#: What the API says when a tool loop's assistant turn does not open with thinking.
MISSING_THINKING = (
    "messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
    "disable `thinking`."
)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _bytes(text: str) -> bytes:
    # A client's text may hold a lone surrogate (JSON can escape one): no UTF-8 for it.
    return text.encode("utf-8", "surrogatepass")


def _same(one: str, other: str) -> bool:
    return hmac.compare_digest(_bytes(one), _bytes(other))


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ThinkingSigner:
    """Signatures for thinking blocks, and opaque data for redacted ones, under one key."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, kind: bytes, text: str) -> str:
        digest = hmac.new(self._key, kind + b"\0" + _bytes(text), hashlib.sha256)
        return _b64(digest.digest())

    def signature(self, thinking: str) -> str:
        """The signature of a thinking block with this text."""
        return self._mac(b"thinking", thinking)

    def redacted_data(self, thinking: str) -> str:
        """The ``data`` of a redacted thinking block hiding this text."""
        return f"{_b64(_bytes(thinking))}.{self._mac(b'redacted', thinking)}"

    def verifies(self, block: dict[str, Any]) -> bool:
        """Whether a thinking or redacted thinking block is one this server returned."""
        if block.get("type") == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            return (
                isinstance(text, str)
                and isinstance(signature, str)
                and _same(signature, self.signature(text))
            )
        data = block.get("data")
        if not isinstance(data, str) or data.count(".") != 1:
            return False
        hidden, mac = data.split(".")
        try:
            text = _unb64(hidden).decode("utf-8", "surrogatepass")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return False
        return _same(mac, self._mac(b"redacted", text))


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _kind(block: Any) -> str:
    return str(block.get("type")) if isinstance(block, dict) else type(block).__name__


def _is_tool_results(message: Any) -> bool:
    blocks = _blocks(message)
    return bool(blocks) and all(_kind(block) == "tool_result" for block in blocks)


def _is_plain_user(message: Any) -> bool:
    """A user message that starts a turn (not only tool results)."""
    return (
        isinstance(message, dict)
        and message.get("role") == "user"
        and not _is_tool_results(message)
    )


def thinking_refusal(body: Any, signer: ThinkingSigner) -> str | None:
    """Why the real API would refuse this request body for its thinking, or None.

    Checked as the API does while ``thinking`` is enabled: the budget (at
    least `MIN_BUDGET`, below ``max_tokens``); every thinking block sent back
    is one this server signed, unchanged; and a request continuing a tool
    loop (its last message a user message of tool results) opens the
    assistant's turn, the assistant messages since the last user message
    that is not only tool results, with a thinking block.
    """
    if not isinstance(body, dict):
        return None
    thinking = body.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < MIN_BUDGET:
        return (
            f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_BUDGET}"
        )
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`."
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        for position, block in enumerate(_blocks(message)):
            if _kind(block) in ("thinking", "redacted_thinking") and not signer.verifies(block):
                return (
                    f"messages.{index}.content.{position}: Invalid `signature` in `thinking` block"
                )
    if not messages or not _is_tool_results(messages[-1]):
        return None
    start = len(messages) - 1
    while start > 0 and not _is_plain_user(messages[start - 1]):
        start -= 1
    for index in range(start, len(messages)):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "assistant":
            blocks = _blocks(message)
            found = _kind(blocks[0]) if blocks else "nothing"
            if found not in ("thinking", "redacted_thinking"):
                return MISSING_THINKING.format(index=index, found=found)
            return None
    return None
