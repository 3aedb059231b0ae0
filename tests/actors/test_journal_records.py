"""Tests for ``pride.durable.records``: a journaled model step keeps the whole reply."""

from __future__ import annotations

from pride.durable.records import StepRecord
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


def test_a_model_step_keeps_every_kind_of_token() -> None:
    """Cache reads and writes and reasoning tokens come back from the journal as they went in."""
    usage = Usage(
        100, 20, cached_tokens=30, cost_usd=0.25, cache_write_tokens=40, reasoning_tokens=7
    )
    reply = ModelResponse("hi", (), usage, "claude-test", "anthropic", "stop")
    again = StepRecord.from_text(StepRecord("model", reply).to_text()).response
    assert again is not None
    assert again.usage == usage


def test_a_step_journaled_before_the_cache_and_reasoning_kinds_reads_them_as_zero() -> None:
    """A record an older pride wrote (no cache-write or reasoning fields) stays readable."""
    import json

    record = json.loads(
        StepRecord("model", ModelResponse("hi", usage=Usage(9, 3, cached_tokens=2))).to_text()
    )
    usage = record["response"]["usage"]
    usage.pop("cache_write_tokens", None)
    usage.pop("reasoning_tokens", None)
    assert set(usage) == {"input_tokens", "output_tokens", "cached_tokens", "cost_usd"}
    again = StepRecord.from_text(json.dumps(record)).response
    assert again is not None
    assert again.usage == Usage(9, 3, cached_tokens=2)
