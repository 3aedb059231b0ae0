"""Tests for ``pride.messages.budget``: Budget and Usage values, and budgets on the wire."""

from __future__ import annotations

import math

import pytest

import pride
from pride import Budget, Usage
from pride.messages import Call, Chat, Command, InvalidMessage, from_json, to_json


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
