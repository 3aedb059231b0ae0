"""Value types that cross the model boundary: requests, replies, tool calls.

They are frozen attrs classes: a request can be reused for retries and handed
to several models, and a response can be stored or compared without copying.
Nothing here knows about HTTP or a provider; endpoints translate to and from
these shapes. A reply's usage is [`pride.Usage`][pride.Usage], the one usage
type (``pride.llm.Usage`` names it too).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Any

import attrs

from pride.messages import Reasoning, Usage

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "ModelStatistics",
    "ScriptedReply",
    "ToolCall",
    "new_call_id",
]


def new_call_id() -> str:
    """A fresh tool-call id (``call_<24 hex digits>``), of the characters every
    provider accepts in an id (Anthropic's are ``[a-zA-Z0-9_-]``)."""
    return f"call_{secrets.token_hex(12)}"


@attrs.frozen
class ToolCall:
    """One tool call the model asked for.

    Attributes:
        name: the tool's name.
        arguments: the decoded JSON arguments (always a dict).
        id: the provider's call id; generated (``call_<hex>``) when not given.
        arguments_error: set when the provider's argument JSON could not be
            decoded into an object; ``arguments`` is then ``{}``. The caller
            decides whether to report it back to the model.
    """

    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    id: str = attrs.field(factory=new_call_id)
    arguments_error: str | None = None


def _to_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return value if type(value) is tuple else tuple(value)  # every request and reply


@attrs.frozen
class ModelRequest:
    """What a model is asked, already in the model's wire format.

    Attributes:
        messages: the conversation in the format of the model's ``api_format``.
            For ``"openai"`` the system entry (if any) is the first message;
            for ``"anthropic"`` the system text goes in ``system`` instead.
        system: the system text for ``"anthropic"`` models.
        tools: provider-neutral tool specs ``{"name", "description",
            "parameters": <JSON schema>}``; each endpoint converts them.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or a tool name.
        response_format: ``{"name": str, "schema": <JSON schema>}`` to ask for
            JSON matching the schema (natively where the provider supports it,
            else by an instruction appended to the system text).
        options: per-call request options (``temperature``, ``max_tokens``,
            ...) merged over the model's configured options.
    """

    messages: list[dict[str, Any]]
    system: str | None = None
    tools: tuple[dict[str, Any], ...] = attrs.field(default=(), converter=_to_tuple)
    tool_choice: str | None = None
    response_format: dict[str, Any] | None = None
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ModelResponse:
    """A model's complete reply, normalised across providers.

    ``finish_reason`` uses the OpenAI vocabulary (``"stop"``, ``"tool_calls"``,
    ``"length"``, ...); Anthropic stop reasons are mapped onto it.

    ``reasoning`` holds the model's reasoning blocks or items, in the order
    given (see `pride.messages.reasoning`): never part of ``text``, and
    recorded before the reply's other messages so they are sent back with it.
    """

    text: str
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_to_tuple)
    usage: Usage = attrs.field(factory=Usage)
    model: str = ""
    provider: str = ""
    finish_reason: str | None = None
    reasoning: tuple[Reasoning, ...] = attrs.field(default=(), converter=_to_tuple)


@attrs.frozen
class ScriptedReply:
    """One scripted reply: text, tool calls, and optionally the usage to report.

    Used by [`ScriptedModel`][pride.ScriptedModel] and by the loopback server in
    [`pride.testing`][pride.testing]. When ``usage`` is ``None`` it is estimated.

    ``thinking`` is the reasoning the model shows before its answer, and
    ``redacted`` reasoning it withholds. The loopback server sends them over
    Anthropic Messages as a signed ``thinking`` block and a ``redacted_thinking``
    block (chat completions have no place for them); a ``ScriptedModel``
    returns them as [`Reasoning`][pride.Reasoning] of provider ``"scripted"``,
    which no provider reads.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_to_tuple)
    usage: Usage | None = None
    thinking: str = ""
    redacted: str = ""

    @classmethod
    def from_item(cls, item: object) -> ScriptedReply:
        """The reply a script item stands for: a ``str`` (text), a [`ToolCall`][pride.llm.ToolCall]
        or a list of them, or a ``ScriptedReply`` (returned as is).

        The one definition of a script item, shared by [`ScriptedModel`][pride.ScriptedModel]
        and the loopback server of [`pride.testing`][pride.testing].

        Raises:
            TypeError: the item is none of those.
        """
        if isinstance(item, ScriptedReply):
            return item
        if isinstance(item, str):
            return cls(text=item)
        if isinstance(item, ToolCall):
            return cls(tool_calls=(item,))
        if isinstance(item, list | tuple) and all(isinstance(c, ToolCall) for c in item):
            return cls(tool_calls=tuple(item))
        raise TypeError(
            "a scripted reply must be a str, a ToolCall, a list of ToolCall or a "
            f"ScriptedReply, not {type(item).__name__}"
        )


@attrs.frozen
class ModelStatistics:
    """A snapshot of one model's counters (see [`iModel.statistics`][pride.iModel.statistics]).

    Attributes:
        calls: invoke/stream calls started (counted as they ask for admission),
            sent or not.
        retries: attempts repeated after a retryable failure.
        failures: calls that ended in an exception.
        queued: calls waiting for admission by the rate limiter.
        in_flight: calls admitted and not yet finished.
        usage: the summed usage of every successful call, and pride's estimate
            of what each stream ended before its reply spent
            ([`ModelStream.usage`][pride.llm.ModelStream.usage]).
        unsent: calls among ``calls`` that ended without their request reaching
            the provider: no API key, a connection refused, an error status
            answering every attempt, cancelled (or refused) before it was sent.
            They spent nothing, and [`Usage.model_calls`][pride.Usage] (of a
            branch, a session, a budget) does not count them, so ``calls -
            unsent - queued - in_flight`` are the calls the provider ran. Most
            are failures too (``failures``); a call cancelled before it was
            sent is not.
    """

    calls: int
    retries: int
    failures: int
    queued: int
    in_flight: int
    usage: Usage
    unsent: int = 0
