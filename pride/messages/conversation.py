"""Conversation messages: what a branch records, and how each renders for a provider.

Messages are immutable (``attrs`` frozen, slotted). Because a message never
changes, its provider rendering is computed once and cached on the message;
a turn over a long history re-renders nothing (see ``benchmarks/``).

Two provider shapes are rendered:

* ``to_openai()``: an OpenAI chat-completions entry (``role``/``content``,
  ``tool_calls`` on assistant entries, ``role="tool"`` for tool results);
* ``to_anthropic()``: an Anthropic Messages entry (content blocks; ``tool_use``
  on assistant entries, ``tool_result`` blocks in user entries; the system
  prompt travels separately, so [`System`][pride.System] renders to plain text).

The returned dicts are shared by every later request: treat them as read-only.
A message that has no place in a shape renders to ``None`` there and is left
out of the request (another provider's [`Reasoning`][pride.Reasoning], see
`pride.messages.reasoning`).
Merging adjacent entries of the same role is the request compiler's job.

Text is always encodable. A message never holds a lone UTF-16 surrogate
(``"\\ud800"``, which a provider's JSON, a tool reading file names, or any
``surrogateescape`` decoding can produce): no UTF-8 encoding exists for it,
so once recorded it would fail every later request of its branch (the HTTP
body cannot be encoded), the store's commit and ``pride run``'s answer line.
So every text field, and every string inside the JSON-like fields
(``context``, ``arguments``, ``output``, ``metadata``), has each lone
surrogate replaced by U+FFFD when the message is built: the documented
replacement, the one UTF-8 decoders use for bytes they cannot read.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, ClassVar, Literal
from uuid import UUID

import attrs

from ._ids import new_id
from ._json import scrub, scrub_text

__all__ = [
    "DEFAULT_SYSTEM_MESSAGE",
    "ActionRequest",
    "ActionResponse",
    "AssistantResponse",
    "Instruction",
    "MessageRole",
    "RoledMessage",
    "System",
]

MessageRole = Literal["system", "user", "assistant", "action", "reasoning"]

DEFAULT_SYSTEM_MESSAGE = "You are a helpful AI assistant. Let's think step by step."

_OPENAI = 0
_ANTHROPIC = 1
# A rendering not made yet (None is a rendering: "no entry in this format").
_UNRENDERED: Any = object()


# Converters run for every text field of every message made: plain ASCII text
# and None (the common values) are answered without a further call.
def _text(value: str) -> str:
    if type(value) is str and value.isascii():
        return value
    return scrub_text(value) if isinstance(value, str) else value


def _optional_text(value: str | None) -> str | None:
    if value is None or (type(value) is str and value.isascii()):
        return value
    return scrub_text(value) if isinstance(value, str) else value


def _data(value: Any) -> Any:
    return value if value is None else scrub(value)


def _mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    if type(value) is dict and not value:  # every message's default metadata
        return value
    return scrub(value)  # type: ignore[no-any-return]


def _json_text(value: Any) -> str:
    """Render a JSON-like value as text for a prompt: strings stay as they are."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=False)


def _hash_by_id(self: RoledMessage) -> int:
    # Messages hash by identity: their metadata dicts are not hashable, and two
    # messages with equal content but different ids are different messages.
    return hash(self.id)


@attrs.frozen(kw_only=True, hash=False)
class RoledMessage:
    """Base of every conversation message.

    Attributes:
        id: unique identity of this message (a fresh uuid4 unless given).
        created_at: POSIX timestamp of creation.
        sender: who produced it (a branch id, ``"user"``, ``"system"``...).
        recipient: who it is addressed to.
        metadata: free-form data (usage, model name...); treat as read-only.
        role: the message's role, fixed by its class.
    """

    role: ClassVar[MessageRole]
    __hash__ = _hash_by_id

    id: UUID = attrs.field(factory=new_id)
    created_at: float = attrs.field(factory=time.time)
    sender: str | None = attrs.field(default=None, converter=_optional_text)
    recipient: str | None = attrs.field(default=None, converter=_optional_text)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    # Rendering cache, one slot per provider shape. Not a field of the message's
    # value: excluded from init, eq, repr and the codec.
    _rendered: list[Any] | None = attrs.field(default=None, init=False, eq=False, repr=False)

    @property
    def text(self) -> str:
        """The message's content as plain text (what a human reader sees)."""
        raise NotImplementedError

    def to_openai(self) -> dict[str, Any] | None:
        """This message as an OpenAI chat-completions entry (cached; read-only), or
        None when that format has no place for it (another provider's
        [`Reasoning`][pride.Reasoning])."""
        return self._cached(_OPENAI)  # type: ignore[no-any-return]

    def to_anthropic(self) -> dict[str, Any] | None:
        """This message as an Anthropic Messages entry (cached; read-only), or None
        when that format has no place for it (another provider's
        [`Reasoning`][pride.Reasoning])."""
        return self._cached(_ANTHROPIC)  # type: ignore[no-any-return]

    def _cached(self, shape: int) -> Any:
        rendered = self._rendered
        if rendered is None:
            rendered = [_UNRENDERED, _UNRENDERED]
            object.__setattr__(self, "_rendered", rendered)
        entry = rendered[shape]
        if entry is _UNRENDERED:
            entry = self._render_openai() if shape == _OPENAI else self._render_anthropic()
            rendered[shape] = entry
        return entry

    def _render_openai(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _render_anthropic(self) -> dict[str, Any] | None:
        raise NotImplementedError


@attrs.frozen(kw_only=True, hash=False)
class System(RoledMessage):
    """The conversation's system prompt.

    ``system_datetime`` (a timestamp string) is rendered above the message as
    ``System Time: ...`` when set.
    """

    role: ClassVar[MessageRole] = "system"
    __hash__ = _hash_by_id

    system_message: str = attrs.field(default=DEFAULT_SYSTEM_MESSAGE, converter=_text)
    system_datetime: str | None = attrs.field(default=None, converter=_optional_text)
    sender: str | None = attrs.field(default="system", converter=_optional_text)

    @property
    def text(self) -> str:
        if self.system_datetime:
            return f"System Time: {self.system_datetime}\n\n{self.system_message}"
        return self.system_message

    def _render_openai(self) -> dict[str, Any]:
        return {"role": "system", "content": self.text}

    def _render_anthropic(self) -> dict[str, Any]:
        # Anthropic takes the system prompt as a request parameter, not a message.
        return {"role": "system", "content": self.text}


@attrs.frozen(kw_only=True, hash=False)
class Instruction(RoledMessage):
    """A user turn: the instruction plus optional guidance, context and images.

    Rendering: ``plain_content`` when given replaces everything; otherwise the
    instruction text, then ``Guidance:`` and ``Context:`` sections when present.
    ``tool_schemas`` and ``response_format`` record what the turn offered the
    model; they travel natively in the request, so they are not rendered.
    """

    role: ClassVar[MessageRole] = "user"
    __hash__ = _hash_by_id

    instruction: str = attrs.field(default="", converter=_text)
    guidance: str | None = attrs.field(default=None, converter=_optional_text)
    context: Any = attrs.field(default=None, converter=_data)
    plain_content: str | None = attrs.field(default=None, converter=_optional_text)
    tool_schemas: tuple[Mapping[str, Any], ...] = ()
    response_format: Mapping[str, Any] | None = None
    images: tuple[str, ...] = ()
    image_detail: Literal["auto", "low", "high"] = "auto"
    sender: str | None = attrs.field(default="user", converter=_optional_text)

    @property
    def text(self) -> str:
        if self.plain_content is not None:
            return self.plain_content
        parts = [self.instruction] if self.instruction else []
        if self.guidance:
            parts.append(f"Guidance: {self.guidance}")
        if self.context not in (None, [], {}):
            parts.append(f"Context:\n{_json_text(self.context)}")
        return "\n\n".join(parts)

    def _render_openai(self) -> dict[str, Any]:
        if not self.images:
            return {"role": "user", "content": self.text}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        blocks.extend(
            {"type": "image_url", "image_url": {"url": url, "detail": self.image_detail}}
            for url in self.images
        )
        return {"role": "user", "content": blocks}

    def _render_anthropic(self) -> dict[str, Any]:
        if not self.images:
            return {"role": "user", "content": self.text}
        blocks: list[dict[str, Any]] = [{"type": "text", "text": self.text}]
        blocks.extend(_anthropic_image(url) for url in self.images)
        return {"role": "user", "content": blocks}


def _anthropic_image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        header, data = url.split(",", 1)
        media_type = header.removeprefix("data:").removesuffix(";base64")
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


@attrs.frozen(kw_only=True, hash=False)
class AssistantResponse(RoledMessage):
    """The model's text reply. Usage and model name travel in ``metadata``.

    An empty reply renders nowhere in the Anthropic shape (`to_anthropic` is
    None): the API refuses an empty text block, so only the reply's reasoning,
    if any, goes back.
    """

    role: ClassVar[MessageRole] = "assistant"
    __hash__ = _hash_by_id

    assistant_response: str = attrs.field(default="", converter=_text)

    @property
    def text(self) -> str:
        return self.assistant_response

    def _render_openai(self) -> dict[str, Any]:
        return {"role": "assistant", "content": self.assistant_response}

    def _render_anthropic(self) -> dict[str, Any] | None:
        if not self.assistant_response:
            # A reply of reasoning alone, or of nothing (Claude may end a turn
            # empty): the API refuses an empty text block, and an entry with
            # no content, so the reply's reasoning (if any) stands alone.
            return None
        return {"role": "assistant", "content": [{"type": "text", "text": self.assistant_response}]}


@attrs.frozen(kw_only=True, hash=False)
class ActionRequest(RoledMessage):
    """A request to run one tool: ``function(**arguments)``.

    ``call_id`` is the provider's tool-call id when the model asked natively;
    such requests render as native tool calls, others as assistant text.
    """

    role: ClassVar[MessageRole] = "action"
    __hash__ = _hash_by_id

    function: str = attrs.field(converter=_text)
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    call_id: str | None = attrs.field(default=None, converter=_optional_text)

    @property
    def text(self) -> str:
        return f"Function: {self.function}\nArguments: {_json_text(dict(self.arguments))}"

    def _render_openai(self) -> dict[str, Any]:
        if self.call_id is None:
            return {"role": "assistant", "content": self.text}
        call = {
            "id": self.call_id,
            "type": "function",
            "function": {
                "name": self.function,
                "arguments": json.dumps(dict(self.arguments), ensure_ascii=False, default=str),
            },
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _render_anthropic(self) -> dict[str, Any]:
        if self.call_id is None:
            return {"role": "assistant", "content": [{"type": "text", "text": self.text}]}
        block = {
            "type": "tool_use",
            "id": self.call_id,
            "name": self.function,
            "input": dict(self.arguments),
        }
        return {"role": "assistant", "content": [block]}


@attrs.frozen(kw_only=True, hash=False)
class ActionResponse(RoledMessage):
    """The outcome of one tool call: its ``output``, or the ``error`` it raised.

    A failed call is still a response, so the model sees what went wrong.
    """

    role: ClassVar[MessageRole] = "action"
    __hash__ = _hash_by_id

    function: str = attrs.field(converter=_text)
    arguments: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    output: Any = attrs.field(default=None, converter=_data)
    error: str | None = attrs.field(default=None, converter=_optional_text)
    action_request_id: UUID | None = None
    call_id: str | None = attrs.field(default=None, converter=_optional_text)

    @property
    def succeeded(self) -> bool:
        """True when the tool returned; False when it raised or was denied."""
        return self.error is None

    @property
    def result_text(self) -> str:
        """What the model is shown: the output, or ``{"error": ...}``."""
        if self.error is not None:
            return _json_text({"error": self.error})
        return _json_text(self.output)

    @property
    def text(self) -> str:
        return (
            f"Function: {self.function}\nArguments: {_json_text(dict(self.arguments))}\n"
            f"Output: {self.result_text}"
        )

    def _render_openai(self) -> dict[str, Any]:
        if self.call_id is None:
            return {"role": "user", "content": self.text}
        return {"role": "tool", "tool_call_id": self.call_id, "content": self.result_text}

    def _render_anthropic(self) -> dict[str, Any]:
        if self.call_id is None:
            return {"role": "user", "content": [{"type": "text", "text": self.text}]}
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.call_id,
            "content": self.result_text,
        }
        if self.error is not None:
            block["is_error"] = True
        return {"role": "user", "content": [block]}
