"""The endpoint seam, and what every endpoint shares: strict JSON and reply assembly.

An `Endpoint` turns a [`ModelRequest`][pride.llm.ModelRequest] into a
[`ModelResponse`][pride.llm.ModelResponse], once (``send``) or as a stream of text
deltas closed by the complete response (``stream``). It knows its wire format
and nothing about rate limits, retries or statistics: [`iModel`][pride.iModel]
wraps every endpoint in the same pipeline, the scripted one included.

A reply is gathered into a `ReplyParts` as it is read, whole or event
by event, whatever the wire format; `ReplyParts.tool_calls` and the
HTTP endpoint's ``response`` make the one [`ModelResponse`][pride.llm.ModelResponse] of both.
"""

from __future__ import annotations

import abc
import json
from collections.abc import AsyncGenerator
from typing import Any, NoReturn, TypeAlias

from pride.messages import Reasoning, ReasoningDelta, Usage
from pride.messages.codec import MAX_DEPTH

from ._reading import Deadline, Exchange
from ._types import ModelRequest, ModelResponse, ToolCall, new_call_id

__all__ = [
    "Delta",
    "Endpoint",
    "Generated",
    "ReplyParts",
    "Reported",
    "StreamItem",
    "decode_arguments",
    "json_instruction",
    "loads_strict",
]

Delta: TypeAlias = str | ReasoningDelta
"""What a stream yields before its reply: a text delta, or a piece of reasoning."""


class Generated:
    """Model output a stream reads but hands to no consumer: a piece of a tool
    call's arguments, whole only with the reply.

    The provider bills it as generated all the same, so an endpoint's stream
    yields each piece as it is read, and [`ModelStream`][pride.llm.ModelStream]
    counts it into what a stream cut before its reply spent, as it counts text
    and reasoning deltas, and yields nothing for it. It is not a delta for the
    retries either: a stream that failed after it alone is retried.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Generated({self.text!r})"


class Reported:
    """The usage a stream's provider has reported so far, before its reply is whole
    (Anthropic's ``message_start`` carries the input tokens; a chat-completions
    usage chunk may come before the stream's end).

    Like `Generated`, handed to no consumer and no delta for the retries:
    [`ModelStream`][pride.llm.ModelStream] counts it for a stream cut before its
    reply. The figures were checked as a reply's are (each a bounded count).
    """

    __slots__ = ("usage",)

    def __init__(self, usage: Usage) -> None:
        self.usage = usage

    def __repr__(self) -> str:
        return f"Reported({self.usage!r})"


StreamItem: TypeAlias = Delta | Generated | Reported | ModelResponse
"""What an endpoint's stream yields: deltas, generated pieces and reported usage, then
the complete reply last."""


class Endpoint(abc.ABC):
    """One way of calling a model (an HTTP API, or a script)."""

    provider: str
    model: str
    #: The URL called, as shown in messages (``None`` for in-process endpoints).
    public_url: str | None = None

    @property
    def origin(self) -> str:
        """What identifies this endpoint as the producer of a reply's reasoning
        (`Reasoning.origin`): the provider and the URL called, credentials and
        query left out (`public_url`), so never a secret."""
        return f"{self.provider} {self.public_url or ''}".rstrip()

    @abc.abstractmethod
    async def send(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> ModelResponse:
        """Make one attempt and return the whole reply.

        Args:
            request: what to ask.
            options: request options, already merged (model's, then the call's).
            deadline: when the whole call (this attempt included) must be over.
            exchange: told when the request reached the provider
                (`pride.llm._reading.Exchange`).

        Raises:
            ProviderError: a subclass saying what failed (see ``pride.llm._errors``);
                ``ProviderTimeout`` once the deadline passes.
        """

    @abc.abstractmethod
    def stream(
        self,
        request: ModelRequest,
        options: dict[str, Any],
        deadline: Deadline,
        exchange: Exchange | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        """Make one streaming attempt: yield text deltas (``str``), reasoning
        pieces ([`ReasoningDelta`][pride.ReasoningDelta]) and the pieces of tool
        calls' arguments (`Generated`) as they are read, then the complete reply last;
        ``exchange`` is told when the request reached the provider, as `send`'s is.

        The caller must close the generator (``aclose``), which closes the HTTP
        response; it yields nothing inside a cancel scope.

        Raises:
            ProviderError: as `send`; a stream cut before its end is a
                ``ProviderConnectionError``, an unreadable event a
                ``MalformedResponse``.
        """


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


# NaN and Infinity are not JSON; Python's decoder accepts them unless told not to.
_STRICT = json.JSONDecoder(parse_constant=_no_constant)


def loads_strict(text: str | bytes | bytearray) -> Any:
    """Decode JSON text, refusing ``NaN``/``Infinity`` (and invalid UTF-8).

    Raises:
        ValueError: not strict JSON (``RecursionError`` for absurd nesting).
    """
    if not isinstance(text, str):
        text = text.decode("utf-8")
    return _STRICT.decode(text)


def decode_arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Decode tool-call arguments (a JSON string or an object) into a dict.

    Returns ``(arguments, error)``: on failure ``({}, reason)``; empty input is
    ``{}``. Arguments are model output, so a bad value is reported back to the
    model by the caller, never raised.
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    if isinstance(raw, str):
        try:
            value = loads_strict(raw)
        except (ValueError, RecursionError) as exc:
            return {}, f"tool arguments are not valid JSON: {exc}"
    else:
        value = raw  # decoded with the reply (Anthropic's input)
    if not isinstance(value, dict):
        return {}, f"tool arguments must be a JSON object, got {type(value).__name__}"
    if _deeper_than(value, MAX_DEPTH):
        # The standard library reads ~990 levels; what walks the arguments later
        # (the messages' checks, the converter, the store) recurses per level and
        # raised RecursionError out of the turn at ~500. Refused here, as pride's
        # own JSON reader refuses it, it is a failed call the model can read.
        return {}, f"tool arguments are nested deeper than {MAX_DEPTH} levels"
    return value, None


def _deeper_than(value: Any, limit: int) -> bool:
    """True when JSON-like ``value`` nests more than ``limit`` containers deep
    (walked with a stack of its own: the value may be as deep as it likes)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def json_instruction(response_format: dict[str, Any]) -> str:
    """The system-text instruction used where a provider has no JSON-schema mode."""
    name = response_format.get("name", "response")
    schema = json.dumps(response_format.get("schema", {}), separators=(",", ":"))
    return (
        f"Answer with one JSON object named {name!r} that matches this JSON schema, "
        "in a ```json fenced block, and nothing else.\n"
        f"JSON schema: {schema}"
    )


class _ToolParts:
    __slots__ = ("arguments", "call_id", "name", "pieces")

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.name: list[str] = []
        self.pieces: list[str] = []
        self.arguments: Any = None  # a whole value (plain replies, Anthropic's input)


class _ReasoningParts:
    __slots__ = ("data", "encrypted", "pieces", "signature")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.signature: list[str] = []
        self.encrypted: str | None = None
        self.data: dict[str, Any] = {}  # what else the provider needs back (an item's id)


class ReplyParts:
    """One reply as it is read: text, tool calls, reasoning, usage figures, model, finish reason.

    Attributes:
        text: the text pieces, in order.
        model: the model that answered (the request's until the reply says).
        usage: the usage figures read so far, already checked (format-specific keys).
        finish_reason: in the OpenAI vocabulary, once known.
        done: the stream's end marker was read.
        generated: the streamed pieces of tool calls' arguments not yet handed
            on (`add_arguments`).
    """

    __slots__ = (
        "_reasoning",
        "_tools",
        "done",
        "finish_reason",
        "generated",
        "model",
        "text",
        "usage",
    )

    def __init__(self, model: str) -> None:
        self.model = model
        self.text: list[str] = []
        self._tools: dict[int, _ToolParts] = {}
        self._reasoning: dict[int, _ReasoningParts] = {}
        self.usage: dict[str, Any] = {}
        self.finish_reason: str | None = None
        self.done = False
        # Argument pieces read since the stream last took them (`add_arguments`).
        self.generated: list[str] = []

    def tool(self, index: int | None = None) -> _ToolParts:
        """The tool call at ``index`` (a new one after the last when ``None``)."""
        if index is None:
            index = len(self._tools)
        parts = self._tools.get(index)
        if parts is None:
            parts = self._tools[index] = _ToolParts()
        return parts

    def add_arguments(self, parts: _ToolParts, piece: str) -> None:
        """Append a streamed piece of a tool call's arguments to ``parts``, and
        to `generated`, which the HTTP stream hands on as `Generated` items:
        the one place every wire format's argument pieces are counted from."""
        parts.pieces.append(piece)
        self.generated.append(piece)

    def add_generated(self, text: str) -> None:
        """Count ``text`` as generated output that no piece carries (Anthropic's
        whole tool input opening its block), as `add_arguments` counts a piece."""
        self.generated.append(text)

    def has_tool(self, index: int) -> bool:
        return index in self._tools

    def tool_count(self) -> int:
        """How many tool calls were read so far."""
        return len(self._tools)

    def reasoning(self, index: int | None = None) -> _ReasoningParts:
        """The reasoning block at ``index`` (a new one after the last when ``None``)."""
        if index is None:
            index = len(self._reasoning)
        parts = self._reasoning.get(index)
        if parts is None:
            parts = self._reasoning[index] = _ReasoningParts()
        return parts

    def unsigned_reasoning(self) -> list[int]:
        """The indices of the reasoning blocks read without a signature and not encrypted
        (an Anthropic thinking block the provider failed to sign), in order."""
        return [
            index
            for index, parts in sorted(self._reasoning.items())
            if parts.encrypted is None and not "".join(parts.signature)
        ]

    def reasoning_blocks(self, provider: str, origin: str | None) -> tuple[Reasoning, ...]:
        """The reasoning blocks in index order, each a [`Reasoning`][pride.Reasoning]
        made by the endpoint ``origin`` (`Endpoint.origin`)."""
        return tuple(
            Reasoning(
                provider=provider,
                origin=origin,
                reasoning="".join(parts.pieces),
                signature="".join(parts.signature) or None,
                encrypted=parts.encrypted,
                data=parts.data,
            )
            for _, parts in sorted(self._reasoning.items())
        )

    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls, in index order, with their arguments decoded."""
        calls = []
        for index in sorted(self._tools):
            parts = self._tools[index]
            raw = "".join(parts.pieces) if parts.pieces else parts.arguments
            arguments, error = decode_arguments(raw)
            calls.append(
                ToolCall(
                    "".join(parts.name),
                    arguments,
                    id=parts.call_id or new_call_id(),
                    arguments_error=error,
                )
            )
        return tuple(calls)
