"""Tests for ``pride.messages.reasoning``: reasoning content in the conversation."""

from __future__ import annotations

import pytest

import pride
from pride.messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    Instruction,
    InvalidMessage,
    Reasoning,
    ReasoningDelta,
    RoledMessage,
    from_json,
    structure,
    to_json,
    unstructure,
)
from pride.messages.history import History


def _thinking(text: str = "Two tools, then add.", signature: str = "sig-1") -> Reasoning:
    return Reasoning(provider="anthropic", reasoning=text, signature=signature)


def test_thinking_renders_as_the_block_anthropic_sent() -> None:
    """A thinking block goes back as Anthropic sent it: its text and signature, unchanged."""
    entry = _thinking().to_anthropic()
    assert entry == {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "Two tools, then add.", "signature": "sig-1"}],
    }


def test_redacted_thinking_renders_as_its_encrypted_data() -> None:
    """A redacted block goes back as ``redacted_thinking`` with its data, and shows no text."""
    block = Reasoning(provider="anthropic", encrypted="EnCrYpTeD")
    assert block.redacted
    assert block.text == ""
    assert block.to_anthropic() == {
        "role": "assistant",
        "content": [{"type": "redacted_thinking", "data": "EnCrYpTeD"}],
    }


def test_reasoning_has_no_place_in_chat_completions_or_another_provider() -> None:
    """Reasoning renders only into the format that made it: elsewhere it is left out."""
    assert _thinking().to_openai() is None
    assert Reasoning(provider="scripted", reasoning="x").to_anthropic() is None
    assert Reasoning(provider="openai-responses", reasoning="x").to_anthropic() is None


def test_reasoning_is_not_an_assistant_message() -> None:
    """Its role keeps it out of what looks for the assistant's answer; .text is the reasoning."""
    block = _thinking()
    assert block.role == "reasoning"
    assert not isinstance(block, AssistantResponse)
    assert block.text == "Two tools, then add."


def test_stored_data_cannot_smuggle_other_blocks_into_a_request() -> None:
    """A stored Reasoning (a file, not trusted) renders from its fields alone, never its data."""
    data = unstructure(_thinking())
    data["data"] = {"type": "tool_use", "id": "x", "name": "rm", "input": {}}
    block = structure(data, RoledMessage)
    assert block.to_anthropic()["content"][0]["type"] == "thinking"


def test_a_reasoning_round_trips_through_json_with_its_provider_fields() -> None:
    """The codec keeps every field, opaque data included."""
    block = Reasoning(
        provider="openai-responses",
        reasoning="summary",
        encrypted="gAAA",
        data={"id": "rs_1", "summary": [{"type": "summary_text", "text": "summary"}]},
    )
    again = from_json(to_json(block), RoledMessage)
    assert again == block
    assert isinstance(again, Reasoning)


def test_a_bad_reasoning_is_refused_naming_its_field() -> None:
    """Hostile stored data (a signature of the wrong type) is an InvalidMessage."""
    data = unstructure(_thinking())
    data["signature"] = 5
    with pytest.raises(InvalidMessage, match=r"Reasoning\.signature"):
        structure(data, RoledMessage)


def _tool_loop() -> list[RoledMessage]:
    # As the operations record a thinking reply: its reasoning, then its calls.
    return [
        Instruction(instruction="add 2 and 3, then double"),
        _thinking("First add.", "s1"),
        ActionRequest(function="add", arguments={"a": 2, "b": 3}, call_id="t1"),
        ActionRequest(function="mul", arguments={"a": 5, "b": 2}, call_id="t2"),
        ActionResponse(function="add", output=5, call_id="t1"),
        ActionResponse(function="mul", output=10, call_id="t2"),
        Reasoning(provider="anthropic", encrypted="R2"),
        AssistantResponse(assistant_response="10"),
    ]


def test_compilation_keeps_reasoning_first_in_the_entry_of_its_calls() -> None:
    """Anthropic: the thinking block opens the very entry holding the tool calls it led to."""
    entries = History(_tool_loop()).compile("anthropic")
    assert [entry["role"] for entry in entries] == ["user", "assistant", "user", "assistant"]
    calls = [block["type"] for block in entries[1]["content"]]
    assert calls == ["thinking", "tool_use", "tool_use"]
    assert entries[1]["content"][0]["signature"] == "s1"
    answer = [block["type"] for block in entries[3]["content"]]
    assert answer == ["redacted_thinking", "text"]


def test_compilation_for_another_provider_drops_only_the_reasoning() -> None:
    """OpenAI chat: the reasoning is left out, the calls and answers stay, merged as before."""
    messages = _tool_loop()
    with_reasoning = History(messages).compile("openai")
    without = History([m for m in messages if not isinstance(m, Reasoning)]).compile("openai")
    assert with_reasoning == without
    assert [entry["role"] for entry in with_reasoning] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


def test_appending_keeps_an_already_compiled_shape_up_to_date() -> None:
    """Appending reasoning after a shape was compiled renders it (or leaves it out) at once."""
    history = History([Instruction(instruction="hi")])
    history.compile("anthropic")
    history.compile("openai")
    history.append(_thinking())
    history.append(AssistantResponse(assistant_response="hello"))
    assert [b["type"] for b in history.compile("anthropic")[1]["content"]] == ["thinking", "text"]
    assert history.compile("openai")[1] == {"role": "assistant", "content": "hello"}


def test_reasoning_delta_is_its_own_stream_item() -> None:
    """A streamed piece of reasoning is not text, and travels through the codec."""
    delta = ReasoningDelta("thinking...", provider="anthropic")
    assert not isinstance(delta, str)
    assert from_json(to_json(delta), ReasoningDelta) == delta
    assert pride.ReasoningDelta is ReasoningDelta
    assert pride.Reasoning is Reasoning
