"""Tests for the value types of pride.llm."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, strategies as st

from pride.llm import ModelRequest, ModelResponse, ToolCall, Usage

costs = st.none() | st.floats(min_value=0, max_value=1e3, allow_nan=False)
usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**9),
    output_tokens=st.integers(0, 10**9),
    cached_tokens=st.integers(0, 10**9),
    cost_usd=costs,
)


@given(usages, usages)
def test_usage_addition_sums_fields_and_keeps_a_known_cost(a, b):
    """Adding usages sums tokens; an unknown cost plus a known one is the known one."""
    total = a + b
    assert total.input_tokens == a.input_tokens + b.input_tokens
    assert total.output_tokens == a.output_tokens + b.output_tokens
    assert total.cached_tokens == a.cached_tokens + b.cached_tokens
    if a.cost_usd is None or b.cost_usd is None:
        assert total.cost_usd == (a.cost_usd if b.cost_usd is None else b.cost_usd)
    else:
        assert total.cost_usd == pytest.approx(a.cost_usd + b.cost_usd)
    assert (a + Usage()) == a


@given(usages)
def test_usage_total_tokens(usage):
    """total_tokens is input plus output."""
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


def test_tool_calls_get_unique_ids():
    """A ToolCall without an id gets a fresh call_<hex> id."""
    first, second = ToolCall("f"), ToolCall("f")
    assert first.id.startswith("call_") and first.id != second.id
    assert first.arguments == {} and first.arguments_error is None


def test_values_are_frozen():
    """Requests and responses cannot be changed after construction."""
    request = ModelRequest(messages=[], tools=[{"name": "t"}])
    assert request.tools == ({"name": "t"},)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.system = "x"  # type: ignore[misc]
    response = ModelResponse("hi", tool_calls=[ToolCall("f", id="1")])
    assert response.tool_calls == (ToolCall("f", id="1"),) and response.usage == Usage()
