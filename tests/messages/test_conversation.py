"""Tests for ``pride.messages.conversation``: rendering to both provider shapes."""

from __future__ import annotations

import json
from uuid import uuid4

import attrs
import pytest

from pride.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    System,
)


def test_system_renders_with_datetime() -> None:
    """A system message renders its timestamp line above the prompt."""
    msg = System(system_message="Be terse.", system_datetime="2026-01-01 00:00")
    expected = "System Time: 2026-01-01 00:00\n\nBe terse."
    assert msg.to_openai() == {"role": "system", "content": expected}
    assert msg.to_anthropic() == {"role": "system", "content": expected}
    assert msg.role == "system"


def test_plain_instruction_renders_its_text() -> None:
    """An instruction with no extras renders exactly its text."""
    msg = Instruction(instruction="hi")
    assert msg.to_openai() == {"role": "user", "content": "hi"}
    assert msg.to_anthropic() == {"role": "user", "content": "hi"}


def test_instruction_sections() -> None:
    """Guidance and context render as labelled sections after the instruction."""
    msg = Instruction(instruction="Sum them.", guidance="Be exact.", context={"n": [1, 2]})
    assert msg.text == 'Sum them.\n\nGuidance: Be exact.\n\nContext:\n{"n": [1, 2]}'


def test_plain_content_replaces_everything() -> None:
    """plain_content wins over instruction, guidance and context."""
    msg = Instruction(instruction="x", guidance="y", plain_content="only this")
    assert msg.to_openai()["content"] == "only this"


def test_instruction_images() -> None:
    """Images render as OpenAI image_url parts and Anthropic image blocks."""
    msg = Instruction(
        instruction="look",
        images=("https://example.test/a.png", "data:image/png;base64,AAAA"),
        image_detail="low",
    )
    openai = msg.to_openai()["content"]
    assert openai[0] == {"type": "text", "text": "look"}
    assert openai[1] == {
        "type": "image_url",
        "image_url": {"url": "https://example.test/a.png", "detail": "low"},
    }
    anthropic = msg.to_anthropic()["content"]
    assert anthropic[1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.test/a.png"},
    }
    assert anthropic[2]["source"] == {"type": "base64", "media_type": "image/png", "data": "AAAA"}


def test_assistant_response() -> None:
    """An assistant reply renders as text content in both shapes."""
    msg = AssistantResponse(assistant_response="hello")
    assert msg.to_openai() == {"role": "assistant", "content": "hello"}
    assert msg.to_anthropic() == {
        "role": "assistant",
        "content": [{"type": "text", "text": "hello"}],
    }


def test_native_action_request_and_response() -> None:
    """Requests with a provider call id render as native tool calls and results."""
    request = ActionRequest(function="add", arguments={"a": 1}, call_id="call_1")
    openai = request.to_openai()
    assert openai["role"] == "assistant"
    assert openai["tool_calls"][0]["id"] == "call_1"
    assert json.loads(openai["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    assert request.to_anthropic()["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 1}}
    ]
    response = ActionResponse(
        function="add", arguments={"a": 1}, output=2, call_id="call_1", action_request_id=uuid4()
    )
    assert response.to_openai() == {"role": "tool", "tool_call_id": "call_1", "content": "2"}
    assert response.to_anthropic()["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "2"}
    ]


def test_failed_action_response_shows_error() -> None:
    """A failed tool call renders its error so the model can see it."""
    response = ActionResponse(function="div", error="ZeroDivisionError: x", call_id="c")
    assert not response.succeeded
    assert json.loads(response.to_openai()["content"]) == {"error": "ZeroDivisionError: x"}
    assert response.to_anthropic()["content"][0]["is_error"] is True


def test_textual_actions_without_call_id() -> None:
    """Actions without a provider call id render as text in the conversation."""
    request = ActionRequest(function="add", arguments={"a": 1})
    assert request.to_openai() == {
        "role": "assistant",
        "content": 'Function: add\nArguments: {"a": 1}',
    }
    response = ActionResponse(function="add", arguments={"a": 1}, output={"sum": 1})
    assert response.to_openai()["role"] == "user"
    assert 'Output: {"sum": 1}' in response.to_openai()["content"]


def test_rendering_is_cached() -> None:
    """A message renders once per provider shape; later calls return the same object."""
    msg = Instruction(instruction="hi")
    assert msg.to_openai() is msg.to_openai()
    assert msg.to_anthropic() is msg.to_anthropic()


def test_messages_are_frozen_and_hash_by_id() -> None:
    """Messages are immutable; equality is by value and the cache is not part of it."""
    msg = Instruction(instruction="hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        msg.instruction = "changed"  # type: ignore[misc]
    twin = attrs.evolve(msg)
    msg.to_openai()
    assert twin == msg
    assert hash(twin) == hash(msg)
    assert {msg: 1}[twin] == 1


def test_roles() -> None:
    """Each class has its fixed role."""
    assert Instruction().role == "user"
    assert AssistantResponse().role == "assistant"
    assert ActionRequest(function="f").role == "action"
    assert ActionResponse(function="f").role == "action"
