"""Tests for ``pride.messages.budget``: Budget and Usage values, and budgets on the wire."""

from __future__ import annotations

import math

import attrs
import pytest

import pride
import pride.llm
from pride import Budget, Usage
from pride.messages import (
    Call,
    Chat,
    Command,
    InvalidMessage,
    from_json,
    structure,
    to_json,
    unstructure,
)


def test_budget_is_frozen_with_the_pinned_fields() -> None:
    """Budget's limits are the pinned six, all None by default, and it is immutable."""
    budget = Budget()
    assert [
        budget.max_input_tokens,
        budget.max_output_tokens,
        budget.max_cost_usd,
        budget.max_model_calls,
        budget.max_tool_calls,
        budget.max_duration,
    ] == [None] * 6
    assert not budget.limited and Budget(max_tool_calls=0).limited
    with pytest.raises(AttributeError):
        budget.max_model_calls = 3  # type: ignore[misc]
    assert repr(Budget(max_model_calls=3)) == "Budget(max_model_calls=3)"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_model_calls": -1}, ValueError),
        ({"max_output_tokens": 1.5}, TypeError),
        ({"max_tool_calls": True}, TypeError),
        ({"max_cost_usd": math.inf}, ValueError),
        ({"max_duration": math.nan}, ValueError),
        ({"max_duration": -0.5}, ValueError),
        ({"max_cost_usd": "1"}, TypeError),
    ],
)
def test_budget_refuses_bad_limits(kwargs: dict[str, object], error: type[Exception]) -> None:
    """A negative, non-finite or mistyped limit is refused, naming the field."""
    with pytest.raises(error, match=rf"Budget\.{next(iter(kwargs))}"):
        Budget(**kwargs)  # type: ignore[arg-type]


def test_usage_adds_field_by_field() -> None:
    """Usage sums; an unknown cost plus a known one is the known one."""
    total = Usage(1, 2, None, 1, 0) + Usage(3, 4, 0.5, 1, 2)
    assert total == Usage(4, 6, 0.5, 2, 2)
    assert (Usage() + Usage()).cost_usd is None


def test_there_is_one_usage_class() -> None:
    """``pride.Usage`` is ``pride.llm.Usage``: one frozen, slotted class with every
    field of both, the pinned five first (by position), the token details by name."""
    assert pride.Usage is pride.llm.Usage is pride.messages.Usage
    assert [field.name for field in attrs.fields(Usage)] == [
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "model_calls",
        "tool_calls",
        "cached_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ]
    usage = Usage()
    assert attrs.astuple(usage) == (0, 0, None, 0, 0, 0, 0, 0)
    assert not hasattr(usage, "__dict__")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        usage.input_tokens = 1  # type: ignore[misc]
    # A positional cached-token count (the old pride.llm.Usage order) cannot be
    # mistaken for anything: past the pinned five, fields are named.
    with pytest.raises(TypeError):
        Usage(1, 2, None, 0, 0, 3)  # type: ignore[misc]
    assert Usage(7, 3, cached_tokens=2).total_tokens == 10


def test_usage_adds_every_kind_of_token() -> None:
    """The token details sum like the rest (a reply's and a turn's usage add alike)."""
    one = Usage(10, 5, 0.25, 1, 0, cached_tokens=4, cache_write_tokens=2, reasoning_tokens=1)
    other = Usage(1, 1, None, 0, 3, cached_tokens=1, reasoning_tokens=2)
    assert one + other == Usage(
        11, 6, 0.25, 1, 3, cached_tokens=5, cache_write_tokens=2, reasoning_tokens=3
    )
    assert one.__add__(object()) is NotImplemented  # type: ignore[operator]


def test_an_unknown_cost_stays_none_and_a_free_one_is_zero() -> None:
    """``cost_usd`` is None when nothing reported or priced a cost (never made up as 0);
    0.0 is a priced, free call; a known cost survives an unknown one on either side."""
    assert Usage(1, 1).cost_usd is None
    assert (Usage(1, 1) + Usage(1, 1)).cost_usd is None
    assert (Usage(1, 1, 0.0) + Usage(1, 1)).cost_usd == 0.0
    assert (Usage(1, 1) + Usage(1, 1, 0.5)).cost_usd == 0.5
    assert (Usage(1, 1, 0.25) + Usage(1, 1, 0.5)).cost_usd == 0.75


def test_usage_survives_the_wire_and_an_old_shape_still_reads() -> None:
    """A Usage round-trips through the codec; data of the pride.Usage of before (five
    fields) and of pride.llm.Usage of before (no call counts) reads, the rest as 0;
    an unknown key or a mistyped figure is refused."""
    usage = Usage(10, 5, 0.5, 2, 1, cached_tokens=3, cache_write_tokens=1, reasoning_tokens=2)
    assert structure(unstructure(usage), Usage) == usage
    old_budget_shape = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_usd": None,
        "model_calls": 2,
        "tool_calls": 1,
    }
    assert structure(old_budget_shape, Usage) == Usage(10, 5, None, 2, 1)
    old_call_shape = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cached_tokens": 3,
        "cost_usd": 0.5,
        "cache_write_tokens": 1,
        "reasoning_tokens": 2,
    }
    assert structure(old_call_shape, Usage) == attrs.evolve(usage, model_calls=0, tool_calls=0)
    with pytest.raises(InvalidMessage):
        structure(old_budget_shape | {"num_turns": 1}, Usage)
    with pytest.raises(InvalidMessage):
        structure(old_budget_shape | {"cached_tokens": "3"}, Usage)


def test_every_work_command_has_a_budget_field() -> None:
    """``budget=`` is accepted by every work command, Call included (never as an argument)."""
    budget = Budget(max_model_calls=1)
    for command in (
        Chat("q", budget=budget),
        pride.ReAct("q", budget=budget),
        pride.Parse("t", budget=budget),
        pride.Act((), budget=budget),
        Call("op", budget=budget, x=1),
    ):
        assert command.budget is budget
    assert Call("op", budget=budget, x=1).kwargs == {"x": 1}
    with pytest.raises(TypeError, match=r"budget must be a pride\.Budget"):
        Chat("q", budget={"max_model_calls": 1})  # type: ignore[arg-type]


def test_a_budget_survives_the_wire() -> None:
    """A command's budget round-trips through JSON unchanged."""
    for command in (
        Chat("q", budget=Budget(max_cost_usd=0.25, max_duration=3)),
        Call("op", budget=Budget(max_tool_calls=2), n=1),
    ):
        assert from_json(to_json(command), Command) == command


@pytest.mark.parametrize(
    ("budget", "path", "reason"),
    [
        ('{"max_tool_calls": -1}', "Chat.budget.max_tool_calls", "must be >= 0"),
        ('{"max_model_calls": 2.5}', "Chat.budget.max_model_calls", "whole number"),
        ('{"max_model_calls": true}', "Chat.budget.max_model_calls", "whole number"),
        ('{"max_cost_usd": "0.1"}', "Chat.budget.max_cost_usd", "expected a number"),
        ('{"max_duration": -1e-9}', "Chat.budget.max_duration", "must be >= 0"),
        ('{"max_calls": 1}', "Chat.budget", "unknown field(s) max_calls"),
        ("[1]", "Chat.budget", "expected a budget object"),
    ],
)
def test_a_decoded_budget_is_validated(budget: str, path: str, reason: str) -> None:
    """Bad budget data from outside is an InvalidMessage naming the path."""
    with pytest.raises(InvalidMessage) as info:
        from_json(f'{{"type": "Chat", "budget": {budget}}}', Command)
    assert info.value.path == path and reason in info.value.reason


def test_a_decoded_budget_cannot_be_infinite() -> None:
    """Strict JSON has no Infinity, and a huge integer is refused too."""
    with pytest.raises(InvalidMessage, match="finite"):
        from_json('{"type": "Chat", "budget": {"max_duration": Infinity}}', Command)
    with pytest.raises(InvalidMessage, match="signed 64-bit range"):
        from_json('{"type": "Chat", "budget": {"max_model_calls": 99999999999999999999}}', Command)


def test_a_decoded_call_cannot_smuggle_its_budget_into_its_arguments() -> None:
    """'budget' among a Call's arguments is refused: it is the Call's own field."""
    with pytest.raises(InvalidMessage) as info:
        from_json('{"type": "Call", "operation": "op", "kwargs": {"budget": 3}}', Command)
    assert info.value.path == "Call.kwargs.budget"
