"""A scripted reply rendered in the format of the route that was asked.

One place maps a route's wire format (``"openai"`` chat completions,
``"responses"``, ``"anthropic"`` Messages) to the renderers of
``pride.testing._wire`` and ``pride.testing._responses``.
"""

from __future__ import annotations

from typing import Any

from pride.llm import ScriptedReply

from ._responses import IssuedReasoning, responses_events, responses_object
from ._thinking import ThinkingSigner
from ._wire import (
    anthropic_events,
    anthropic_message,
    openai_completion,
    openai_events,
)

__all__ = ["document", "render_events"]


def document(
    reply: ScriptedReply,
    body: Any,
    wire: str,
    reasoning: IssuedReasoning,
    *,
    signer: ThinkingSigner,
) -> Any:
    """The plain reply body of ``reply`` in ``wire``'s format (Anthropic's thinking
    signed by ``signer``)."""
    if wire == "openai":
        return openai_completion(reply, body)
    if wire == "responses":
        return responses_object(reply, body, reasoning.item_for(body, reply.thinking))
    return anthropic_message(reply, body, signer)


def render_events(
    reply: ScriptedReply,
    body: Any,
    wire: str,
    chunk_size: int,
    reasoning: IssuedReasoning,
    *,
    signer: ThinkingSigner,
) -> list[bytes]:
    """The SSE events of ``reply`` streamed in ``wire``'s format."""
    if wire == "openai":
        return openai_events(reply, body, chunk_size)
    if wire == "responses":
        return responses_events(reply, body, chunk_size, reasoning.item_for(body, reply.thinking))
    return anthropic_events(reply, body, chunk_size, signer)
