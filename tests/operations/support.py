"""Shared pieces of the operations tests: formats, tools, and reading requests back."""

from __future__ import annotations

from typing import Any

import attrs

from pride import ActionRequest, ActionResponse
from pride.llm import ModelRequest


@attrs.frozen
class Answer:
    """A small response format used across the tests."""

    value: int
    note: str = ""


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def explode(reason: str) -> str:
    """Always fail.

    Args:
        reason: What to fail with.
    """
    raise RuntimeError(reason)


def kinds(messages: Any) -> list[str]:
    """The class names of a branch's messages, in order."""
    return [type(message).__name__ for message in messages]


def pairs(messages: Any) -> list[tuple[ActionRequest, ActionResponse]]:
    """Each recorded ActionRequest with the ActionResponse that answers it."""
    requests = {m.id: m for m in messages if isinstance(m, ActionRequest)}
    return [
        (requests[m.action_request_id], m)
        for m in messages
        if isinstance(m, ActionResponse) and m.action_request_id in requests
    ]


def user_texts(request: ModelRequest) -> list[str]:
    """The text of every user entry of an OpenAI-shaped request."""
    texts = []
    for entry in request.messages:
        if entry["role"] == "user":
            content = entry["content"]
            texts.append(content if isinstance(content, str) else str(content))
    return texts


def system_of(request: ModelRequest) -> str | None:
    """The system text of an OpenAI-shaped request."""
    first = request.messages[0] if request.messages else {}
    return first.get("content") if first.get("role") == "system" else None
