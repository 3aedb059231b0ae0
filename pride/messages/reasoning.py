"""Reasoning content: what a model reasoned before it answered, kept to be sent back.

Problem: reasoning models return, beside their answer, a record of their
reasoning that the provider needs back. Anthropic's extended thinking returns
``thinking`` blocks (readable text and a ``signature``) and
``redacted_thinking`` blocks (encrypted ``data``); in a tool loop the
assistant's blocks must come back unchanged, first in its message, or the API
refuses the request. OpenAI's Responses API returns reasoning items (an id, a
readable summary, and ``encrypted_content`` when nothing is stored server
side) that carry the reasoning across tool calls only if they are sent back.
Neither is the answer: shown as the answer's text it would leak the model's
scratchpad, and edited it no longer verifies.

Options: a field on [`AssistantResponse`][pride.AssistantResponse] (a reply of
tool calls alone records no AssistantResponse, only ActionRequests, so the
reasoning would have nowhere to go); a field on every assistant-side message
(one reply's reasoning spread over several messages); or a message of its
own. Choice: a message of its own, [`Reasoning`][pride.Reasoning], one per
block or item, in the order the provider gave them.

Where it sits: the operations record a reply's `Reasoning` messages right
before the rest of that reply (its AssistantResponse and ActionRequests).
Context compilation (`pride.messages.history`) merges consecutive entries of
one role, so the reasoning lands first in the very assistant entry that holds
the reply's tool calls, which is where Anthropic wants it; it is never split
from the call it belongs to, because nothing is recorded between them.

Who can read it: ``provider`` names the wire format that made it and alone can
read it back (``"anthropic"`` for Anthropic Messages, ``"openai_responses"``
for OpenAI's Responses API). A `Reasoning` renders into that format only;
rendered for any other (OpenAI chat completions, or another provider's
format) it is left out: a conversation moved to another provider drops the
reasoning that provider cannot read, and keeps everything else (the answers
and tool calls stay). The messages stay recorded, so moving back sends them
again. ``provider="scripted"`` (a [`ScriptedModel`][pride.ScriptedModel]'s)
renders nowhere, and so does ``provider="openai_chat"`` (the ``reasoning_content``
or ``reasoning`` of an OpenAI-compatible chat-completions server, which takes
none back).

Who is sent it: ``origin`` names the endpoint that produced it (its provider
and the URL called, credentials and query left out: e.g. ``"anthropic
https://api.anthropic.com/v1/messages"``). A request is sent only the
reasoning its own endpoint produced (the history compiled for a model's
``reasoning_origin``): Claude's signed thinking never goes to a third-party
Anthropic-compatible ``base_url``, nor OpenAI's encrypted reasoning items to
another Responses server (another provider's data to it, and a refusal that
would break the conversation). A `Reasoning` stored before origins were kept
loads with ``origin=None`` and is sent to no endpoint: its producer cannot be
known, and leaving reasoning out costs the model its earlier thinking while
sending it to the wrong server could leak it.

The Responses API reads the same chat-shaped conversation as chat
completions (pride compiles one OpenAI shape for both), so its reasoning
renders in the OpenAI shape as an assistant entry carrying the reasoning item
under ``"reasoning_items"`` (`REASONING_ITEMS`): compilation merges it into the
entry of the reply it belongs to, the Responses endpoint sends the items
first in that reply's place, and the chat-completions endpoint leaves them out.

Fields, all opaque to pride except as said here:

* ``reasoning``: the readable text (Anthropic's thinking text, which may be a
  summary; an OpenAI reasoning summary). It is what ``.text`` shows a person
  reading the conversation; it is never part of the answer's text, and the
  role ``"reasoning"`` keeps it out of everything that looks for
  ``"assistant"`` messages;
* ``signature``: the provider's proof that ``reasoning`` is unchanged
  (Anthropic's ``signature``);
* ``encrypted``: reasoning the provider sent encrypted (Anthropic's
  ``redacted_thinking`` ``data``; OpenAI's ``encrypted_content``);
* ``data``: anything else the provider needs back, as it sent it (an OpenAI
  reasoning item's ``id``, and its ``summary`` as a list of texts). Anthropic
  blocks need none.

Anthropic rendering: a `Reasoning` with ``encrypted`` set is
``{"type": "redacted_thinking", "data": encrypted}``, otherwise
``{"type": "thinking", "thinking": reasoning, "signature": signature}``: the
block exactly as received, built from the fields and nothing else, so a stored
conversation (a file, so not trusted) cannot smuggle other blocks in.
Responses rendering, by the same rule: ``{"type": "reasoning", "id",
"summary": [{"type": "summary_text", "text"}, ...], "encrypted_content":
encrypted}`` from ``data``'s ``id`` and summary texts (what is not a string
there is left out) and ``encrypted``.

[`ReasoningDelta`][pride.ReasoningDelta] is a piece of reasoning text as a
model streams it: a stream item of its own kind, never mixed into the text
chunks (``str``) of the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from .conversation import (
    MessageRole,
    RoledMessage,
    _hash_by_id,
    _mapping,
    _optional_text,
    _text,
)

__all__ = [
    "ANTHROPIC",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "REASONING_ITEMS",
    "SCRIPTED",
    "Reasoning",
    "ReasoningDelta",
]

#: The ``provider`` of reasoning made by Anthropic's Messages API.
ANTHROPIC = "anthropic"

#: The ``provider`` of reasoning made by OpenAI's Responses API (its reasoning items).
OPENAI_RESPONSES = "openai_responses"

#: The key of an OpenAI-shaped assistant entry holding Responses reasoning items:
#: the Responses endpoint sends them, the chat-completions endpoint leaves them out.
REASONING_ITEMS = "reasoning_items"

#: The ``provider`` of reasoning an OpenAI-compatible chat-completions server sent
#: (``reasoning_content``: DeepSeek, vLLM; ``reasoning``: OpenRouter, Ollama): read
#: by none, as those servers take no reasoning back (DeepSeek refuses it).
OPENAI_CHAT = "openai_chat"

#: The ``provider`` of reasoning a [`ScriptedModel`][pride.ScriptedModel] made up (read by none).
SCRIPTED = "scripted"


@attrs.frozen(kw_only=True, hash=False)
class Reasoning(RoledMessage):
    """One block or item of a model's reasoning, kept so it can be sent back.

    See the module docstring (`pride.messages.reasoning`) for where it is
    recorded, which provider reads it and what is dropped where.

    Attributes:
        provider: the wire format that made it and alone reads it back
            (``"anthropic"``, ...).
        reasoning: the readable reasoning (``""`` when the provider withheld it).
        signature: the provider's proof the text is unchanged (Anthropic).
        encrypted: reasoning sent encrypted (Anthropic's redacted thinking,
            OpenAI's encrypted content).
        data: other fields the provider needs back, as it sent them.
        origin: the endpoint that produced it and alone is sent it back (the
            provider and the URL called, never a secret; ``None``: unknown).
    """

    role: ClassVar[MessageRole] = "reasoning"
    __hash__ = _hash_by_id

    provider: str = attrs.field(converter=_text)
    reasoning: str = attrs.field(default="", converter=_text)
    signature: str | None = attrs.field(default=None, converter=_optional_text)
    encrypted: str | None = attrs.field(default=None, converter=_optional_text)
    data: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    origin: str | None = attrs.field(default=None, converter=_optional_text)

    def readable_by(self, origin: str) -> bool:
        """Whether the endpoint ``origin`` (an iModel's ``reasoning_origin``) may be
        sent this reasoning: only the endpoint that produced it. A `Reasoning`
        with no origin (stored before origins were kept) goes to none, as its
        producer is unknown."""
        return self.origin is not None and self.origin == origin

    @property
    def redacted(self) -> bool:
        """True when the provider sent the reasoning encrypted and no readable text."""
        return self.encrypted is not None and not self.reasoning

    @property
    def text(self) -> str:
        """The readable reasoning (for people reading the conversation; never the answer)."""
        return self.reasoning

    def _render_openai(self) -> dict[str, Any] | None:
        if self.provider != OPENAI_RESPONSES:
            return None  # chat completions have no place for reasoning
        return {"role": "assistant", "content": None, REASONING_ITEMS: [self._responses_item()]}

    def _responses_item(self) -> dict[str, Any]:
        """The Responses API's reasoning item, built from the fields alone."""
        item: dict[str, Any] = {"type": "reasoning"}
        item_id = self.data.get("id")
        if isinstance(item_id, str):
            item["id"] = item_id
        summary = self.data.get("summary")
        texts = summary if isinstance(summary, list | tuple) else ()
        item["summary"] = [
            {"type": "summary_text", "text": text} for text in texts if isinstance(text, str)
        ]
        item["encrypted_content"] = self.encrypted
        return item

    def _render_anthropic(self) -> dict[str, Any] | None:
        if self.provider != ANTHROPIC:
            return None
        block: dict[str, Any]
        if self.encrypted is not None:
            block = {"type": "redacted_thinking", "data": self.encrypted}
        else:
            block = {"type": "thinking", "thinking": self.reasoning, "signature": self.signature}
        return {"role": "assistant", "content": [block]}


@attrs.frozen
class ReasoningDelta:
    """A piece of reasoning text as the model streams it (a stream item of its own).

    Text chunks of the answer stream as ``str``; reasoning streams as these,
    so a consumer that joins the ``str`` items gets the answer and nothing
    else. The whole reasoning is recorded afterwards as
    [`Reasoning`][pride.Reasoning] messages.

    Attributes:
        text: the piece of reasoning text.
        provider: the wire format it came from (as `Reasoning.provider`).
    """

    text: str = attrs.field(converter=_text)
    provider: str = attrs.field(default="", converter=_text)
