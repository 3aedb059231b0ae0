"""Tests for ``pride.actors.journal_records``: a journaled model step keeps the whole reply."""

from __future__ import annotations

from pride.actors.journal_records import StepRecord
from pride.llm import ModelResponse, ToolCall, Usage
from pride.messages import Reasoning


def test_a_model_step_keeps_the_replys_reasoning() -> None:
    """A resumed tool loop sends the reply's thinking back, so the journal keeps it, ids too."""
    thinking = Reasoning(provider="anthropic", reasoning="add first", signature="sig")
    redacted = Reasoning(provider="anthropic", encrypted="opaque")
    reply = ModelResponse(
        "",
        (ToolCall("add", {"a": 1}, "t1"),),
        Usage(10, 5),
        "claude-test",
        "anthropic",
        "tool_calls",
        reasoning=(thinking, redacted),
    )
    again = StepRecord.from_text(StepRecord("model", reply).to_text()).response
    assert again is not None
    assert again.reasoning == (thinking, redacted)
    assert [block.id for block in again.reasoning] == [thinking.id, redacted.id]
