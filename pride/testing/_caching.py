"""The loopback server's Anthropic prompt cache: cache writes and reads, as the API reports them.

Anthropic caches a request's prefix (tools, then system, then messages, block
by block) up to each ``cache_control`` breakpoint, and reports what a call
wrote (``cache_creation_input_tokens``) and read (``cache_read_input_tokens``).
This cache does the same, so a test sees pride's breakpoints work without a
network: the first call with a breakpoint writes its prefix; a later call
whose prefix up to a breakpoint matches one written reads it (the longest
match), and writes the rest up to its last breakpoint. Prefixes are compared
by content, the markers left out, as the API does; they never expire while
the server runs and have no minimum length (the API's 1,024 tokens do not
apply). A scripted reply's own ``usage`` is reported as given, uncached.

Token counts are the server's estimate (about four characters a token, as
for the rest of its usage).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs

from pride.llm import ScriptedReply, Usage

from ._wire import estimated_usage

__all__ = ["PromptCache"]

#: Characters per estimated token (as `pride.testing._wire.estimated_usage`).
_CHARS_PER_TOKEN = 4


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request's prefix as (canonical JSON, marked) pairs, in the API's order."""
    out: list[tuple[str, bool]] = []

    def add(kind: str, block: Any) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        if marked:
            block = {k: v for k, v in block.items() if k != "cache_control"}
        out.append((json.dumps([kind, block], sort_keys=True), marked))

    for tool in _listed(body.get("tools")):  # a request is hostile: only lists are read
        add("tool", tool)
    system = body.get("system")
    if isinstance(system, list):
        for block in system:
            add("system", block)
    elif system:
        add("system", {"type": "text", "text": system})
    for message in _listed(body.get("messages")):
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if isinstance(content, list):
            for block in content:
                add(str(role), block)
        else:
            add(str(role), {"type": "text", "text": content})
    return out


class PromptCache:
    """Prefixes written by earlier requests, by digest, with their sizes in tokens."""

    __slots__ = ("_written",)

    def __init__(self) -> None:
        self._written: dict[str, int] = {}

    def cached(self, reply: ScriptedReply, body: Any, wire: str) -> ScriptedReply:
        """``reply`` to ``body``, an Anthropic one's usage counting the request's cache
        reads and writes (a scripted ``usage`` is reported as given)."""
        if wire != "anthropic" or reply.usage is not None:
            return reply
        return attrs.evolve(reply, usage=self.usage(body, estimated_usage(reply, body)))

    def usage(self, body: Any, estimate: Usage) -> Usage:
        """``estimate`` (the request's usage, uncached) with this request's cache reads
        and writes, recording what it writes, its input counting the whole prompt
        (tools and system text too). A request without breakpoints reads and
        writes nothing."""
        if not isinstance(body, dict):
            return estimate
        digest = hashlib.sha256()
        size = 0
        prefixes: list[tuple[str, int, bool]] = []  # (digest, tokens, marked) at each block
        for text, marked in _blocks(body):
            digest.update(text.encode())
            size += len(text)
            prefixes.append((digest.hexdigest(), -(-size // _CHARS_PER_TOKEN), marked))
        # The whole prompt (tools and system text too), so cached and uncached requests
        # are counted alike.
        total = max(estimate.input_tokens, prefixes[-1][1] if prefixes else 0)
        marks = [index for index, (_, _, marked) in enumerate(prefixes) if marked]
        if not marks:
            return attrs.evolve(estimate, input_tokens=total)
        last = marks[-1]
        read = next(
            (tokens for key, tokens, _ in reversed(prefixes[: last + 1]) if key in self._written),
            0,
        )
        cached_to = prefixes[last][1]
        for index in marks:
            key, tokens, _ = prefixes[index]
            self._written[key] = tokens
        written = cached_to - read
        return Usage(
            input_tokens=total,
            output_tokens=estimate.output_tokens,
            cached_tokens=read,
            cost_usd=estimate.cost_usd,
            cache_write_tokens=written,
            reasoning_tokens=estimate.reasoning_tokens,
        )
