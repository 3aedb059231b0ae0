"""The scripted endpoint: replies from a list or a function, no network.

This is a real endpoint kind, not a test double: [`ScriptedModel`][pride.ScriptedModel]
(and any iModel whose provider is ``"scripted"``) sends every call through the
same pipeline as the HTTP models (rate limiter, retries, usage, statistics)
and only the last step, producing the reply, is scripted.

A reply's ``thinking`` and ``redacted`` become [`Reasoning`][pride.Reasoning]
of provider ``"scripted"`` (read by no provider), streamed first as
[`ReasoningDelta`][pride.ReasoningDelta] items. A streamed reply's tool calls
follow its text as their arguments' JSON in ``chunk_size`` pieces, handed to
no consumer but counted as generated, as a provider's are (`Generated`).

Usage is estimated when the script does not give it: input tokens from the
request text, output tokens from the reply text, reasoning and tool-call
arguments (the reasoning's share is ``reasoning_tokens``, as a provider reports
it), all by `estimate_text_tokens` (about four characters per
token); cost is ``None``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, TypeAlias

import trio

from pride.errors import ProviderTimeout, ScriptExhausted
from pride.messages import Reasoning, ReasoningDelta, Usage
from pride.messages.reasoning import SCRIPTED

from ._endpoint import Endpoint, Generated, StreamItem
from ._reading import Deadline, Exchange
from ._tokens import CHARS_PER_TOKEN, estimate_text_tokens
from ._types import ModelRequest, ModelResponse, ScriptedReply, ToolCall

__all__ = ["DEFAULT_CHUNK_SIZE", "KEEP_CALLS", "Reply", "Script", "ScriptedEndpoint", "echo_text"]

#: Characters per streamed chunk of a scripted reply.
DEFAULT_CHUNK_SIZE = 8

#: One scripted item: text, a tool call or several, a full reply, or an error to raise.
Reply: TypeAlias = str | ToolCall | Sequence[ToolCall] | ScriptedReply | Exception

#: A script: a list of replies, or a function (sync or async) of the request.
Script: TypeAlias = Sequence[Reply] | Callable[[ModelRequest], Any] | None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return ""


def echo_text(messages: Sequence[dict[str, Any]]) -> str:
    """``"echo: <text of the last user message>"``: what the echo model answers.

    The scripted echo model (``ScriptedModel()``) and the loopback server of
    [`pride.testing`][pride.testing] both answer this to a request without a script.
    """
    for message in reversed(messages):
        if message.get("role") == "user":
            return f"echo: {_text(message.get('content'))}"
    return "echo: "


def reply_usage(request: ModelRequest, reply: ScriptedReply) -> Usage:
    """The reply's own usage, or an estimate from the reply and the request's new input.

    The input estimate counts the system text and the last message only, not
    the whole history: walking every message on every call would make a
    scripted turn's cost grow with the conversation, which is exactly what
    the benchmarks measure. Real providers report real usage.
    """
    if reply.usage is not None:
        return reply.usage
    reasoning = 0
    if reply.thinking or reply.redacted:  # reasoning is generated, and billed, as output
        reasoning = estimate_text_tokens(reply.thinking + reply.redacted)
    output = estimate_text_tokens(reply.text) + reasoning
    if reply.tool_calls:
        output += sum(
            estimate_text_tokens(call.name + json.dumps(call.arguments))
            for call in reply.tool_calls
        )
    return _estimated(request, output, reasoning)


def _estimated(request: ModelRequest, output_tokens: int, reasoning_tokens: int = 0) -> Usage:
    """The estimated usage of a reply of ``output_tokens`` to ``request``, ``reasoning_tokens``
    of them spent reasoning (see `reply_usage`)."""
    chars = len(request.system or "")
    if request.messages:
        chars += len(_text(request.messages[-1].get("content")))
    # input, output (the reasoning part of it, as `Usage.reasoning_tokens` is)
    return Usage(-(-chars // CHARS_PER_TOKEN), output_tokens, reasoning_tokens=reasoning_tokens)


KEEP_CALLS = 100
"""How many of its latest requests a scripted model keeps in ``calls`` by default.

Each request holds the conversation as it was sent (a list as long as the
history then), so what the record costs is this number times the history's
length: small, so that a long-running scripted process (the demo, ``pride
run``, a soak test) stays small, and still more than a test reads back."""


class ScriptedEndpoint(Endpoint):
    """Replies from a script.

    Args:
        script: a sequence of replies used in order, a function (sync or
            async) of the [`ModelRequest`][pride.llm.ModelRequest] returning a reply,
            or ``None`` to echo the last user message.
        model: the model name reported in responses.
        delay: seconds (``trio.sleep``) before each reply.
        chunk_size: characters per streamed text delta (and per piece of a
            tool call's arguments).
        calls: where each received request is appended (one per attempt).
        keep_calls: keep exactly the last this-many requests in ``calls``
            (fewer until that many came); 0 keeps none. ``received`` counts
            them all.
    """

    provider = "scripted"

    def __init__(
        self,
        script: Script,
        *,
        model: str,
        calls: list[ModelRequest],
        delay: float = 0.0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        keep_calls: int = KEEP_CALLS,
    ) -> None:
        if keep_calls < 0:
            raise ValueError(f"keep_calls must be >= 0, got {keep_calls!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size!r}")
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay!r}")
        if (
            script is not None
            and not callable(script)
            and (isinstance(script, str | bytes) or not isinstance(script, Sequence))
        ):
            raise TypeError("replies must be a list of replies, a function, or None")
        self.model = model
        self.script = script
        self.delay = delay
        self.chunk_size = chunk_size
        self.calls = calls
        self.keep_calls = keep_calls
        self.received = 0
        self.used = 0

    async def _within(self, deadline: Deadline, awaitable: Any) -> Any:
        """Await ``awaitable`` (an async script function's result) within ``deadline``."""
        with trio.move_on_at(deadline.at):
            return await awaitable
        raise self._too_slow(deadline)

    def _too_slow(self, deadline: Deadline) -> ProviderTimeout:
        return ProviderTimeout(
            f"ScriptedModel {self.model!r}: no reply within call_timeout={deadline.seconds:g} s",
            provider=self.provider,
        )

    async def _reply(
        self, request: ModelRequest, deadline: Deadline, exchange: Exchange | None = None
    ) -> ScriptedReply | str:
        """The script's reply to ``request``: text as it is (the common reply, which
        needs no ScriptedReply made for it), anything else as a ScriptedReply.

        ``exchange`` is told the request was delivered once the script gave a
        reply that is not an exception (a scripted ``RateLimited`` refuses it):
        from then on, the ``delay`` is the model at work on it."""
        self.received += 1
        keep = self.keep_calls
        if keep:
            calls = self.calls
            calls.append(request)
            if len(calls) > keep:  # a long-running scripted process keeps the latest ones
                del calls[: len(calls) - keep]
        script = self.script
        item: Any
        if script is None:
            item = echo_text(request.messages)
        elif callable(script):
            item = script(request)
            if not isinstance(item, str) and inspect.isawaitable(item):  # text: the common reply
                item = await self._within(deadline, item)
        else:
            if self.used >= len(script):
                raise ScriptExhausted(
                    f"ScriptedModel {self.model!r} ran out of replies: it has {len(script)} and "
                    f"this is call {self.received}; add replies or pass a function",
                    provider=self.provider,
                )
            item = script[self.used]
            self.used += 1
        if exchange is not None and not isinstance(item, Exception):
            exchange.sent = True
        if self.delay:
            end = trio.current_time() + self.delay
            await trio.sleep_until(min(end, deadline.at))
            if end > deadline.at:
                raise self._too_slow(deadline)
        else:
            # A cancellation point without a yield: a scripted reply is instant, and
            # the caller (a branch's actor) yields between items anyway.
            await trio.lowlevel.checkpoint_if_cancelled()
        if isinstance(item, str):
            return item
        if isinstance(item, Exception):
            try:  # its traceback holds this frame: no cycle through the local
                raise item
            finally:
                del item
        try:
            return ScriptedReply.from_item(item)
        except TypeError:
            raise TypeError(
                "a scripted reply must be a str, a ToolCall, a list of ToolCall, a "
                f"ScriptedReply or an exception instance, not {type(item).__name__}"
            ) from None

    def _response(self, request: ModelRequest, reply: ScriptedReply | str) -> ModelResponse:
        if isinstance(reply, str):
            return ModelResponse(
                text=reply,
                usage=_estimated(request, estimate_text_tokens(reply)),
                model=self.model,
                provider=self.provider,
                finish_reason="stop",
            )
        return ModelResponse(
            text=reply.text,
            tool_calls=reply.tool_calls,
            usage=reply_usage(request, reply),
            model=self.model,
            provider=self.provider,
            finish_reason="tool_calls" if reply.tool_calls else "stop",
            reasoning=_reasoning(reply),
        )

    async def send(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> ModelResponse:
        return self._response(request, await self._reply(request, deadline, exchange))

    async def stream(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        reply = await self._reply(request, deadline, exchange)
        text = reply if isinstance(reply, str) else reply.text
        size = self.chunk_size
        if not isinstance(reply, str) and reply.thinking:
            for start in range(0, len(reply.thinking), size):
                yield ReasoningDelta(reply.thinking[start : start + size], provider=SCRIPTED)
                await trio.lowlevel.checkpoint()
        for start in range(0, len(text), size):
            if start:
                await trio.lowlevel.checkpoint()
            yield text[start : start + size]
        if not isinstance(reply, str):
            # After the text, as a provider streams them: each piece is
            # generated (and counted by a stream cut here) before the next.
            for call in reply.tool_calls:
                arguments = json.dumps(call.arguments)
                for start in range(0, len(arguments), size):
                    yield Generated(arguments[start : start + size])
                    await trio.lowlevel.checkpoint()
        yield self._response(request, reply)


def _reasoning(reply: ScriptedReply) -> tuple[Reasoning, ...]:
    blocks = []
    if reply.thinking:
        blocks.append(Reasoning(provider=SCRIPTED, reasoning=reply.thinking))
    if reply.redacted:
        blocks.append(Reasoning(provider=SCRIPTED, encrypted=reply.redacted))
    return tuple(blocks)
