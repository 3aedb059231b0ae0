"""A flow's budget is one allowance for the whole graph: every node's turn, on any branch,
and the work those turns ask of others; a session's budget bounds it too."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Budget, BudgetExceeded, Call, Chat, Flow, RunFailed, Signal
from tests.flows.support import balanced_turns, team, work


async def test_the_flow_budget_is_shared_by_nodes_on_different_branches() -> None:
    """max_model_calls=3 over five one-call nodes on five branches: exactly three calls
    are made; the others fail with the flow's BudgetExceeded."""
    names = [f"b{i}" for i in range(5)]
    async with team(*names) as (session, _):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("capped")
        for name in names:
            flow.add(name, Chat(f"hello {name}"))
        result = await session.flow(flow, budget=Budget(max_model_calls=3))
        calls = sum(session.get_branch(name).usage.model_calls for name in names)
        assert balanced_turns(recorded)
    assert calls == 3
    assert result.usage.model_calls == 3
    outcomes = list(result.outcomes.values())
    assert outcomes.count("completed") == 3 and outcomes.count("failed") == 2
    errors = list(result.errors.values())
    assert all(isinstance(e, BudgetExceeded) for e in errors)
    assert {e.scope for e in errors} == {"flow capped"}  # type: ignore[attr-defined]
    assert {e.limit for e in errors} == {"max_model_calls"}  # type: ignore[attr-defined]
    failed_turns = [s for s in recorded if isinstance(s, RunFailed)]
    assert [s.error_type for s in failed_turns] == ["BudgetExceeded"] * 2


async def test_once_the_flow_budget_is_spent_no_node_starts() -> None:
    """With one node at a time, the budget spent by the first nodes skips the later ones."""
    async with team("a", "b", "c", "d") as (session, _):
        flow = Flow("capped")
        for name in "abcd":
            flow.add(name, Chat(name))
        result = await session.flow(flow, max_concurrent=1, budget=Budget(max_model_calls=2))
    assert result.outcomes == {"a": "completed", "b": "completed", "c": "skipped", "d": "skipped"}
    reason = result.nodes["c"].reason
    assert reason is not None and "flow capped budget is spent" in reason


async def test_the_flow_budget_counts_what_nodes_ask_of_other_branches() -> None:
    """A node's turn asking another branch draws that branch's calls from the flow's budget."""
    async with team("lead", "helper") as (session, _):

        async def consult(branch: Branch, times: int) -> list[Any]:
            return [await pride.ask("helper", Chat(f"q{i}")) for i in range(times)]

        session.register_operation("consult", consult)
        flow = Flow("nested")
        flow.add("lead", Call("consult", times=3), name="consult")
        result = await session.flow(flow, budget=Budget(max_model_calls=2))
        helper_calls = session.get_branch("helper").usage.model_calls
    assert helper_calls == 2
    assert result.outcomes == {"consult": "failed"}
    error = result.errors["consult"]
    assert isinstance(error, BudgetExceeded) and error.scope == "flow nested"
    assert result.nodes["consult"].usage.model_calls == 2  # counted on the node too


async def test_a_token_limit_passed_stops_every_running_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """When one node's call passes the flow's token limit, every node drawing on it stops."""
    async with team("talker", "sleeper") as (session, _):

        async def sleepy(branch: Branch) -> str:
            await trio.sleep(5)
            await branch.chat("after the nap")
            return "woke"

        async def talk(branch: Branch) -> str:
            await trio.sleep(1)  # the sleeper's turn is under way by now
            return await branch.chat("a long question " * 20)

        session.register_operation("sleepy", sleepy)
        session.register_operation("talk", talk)
        flow = Flow("tokens")
        flow.add("talker", Call("talk"), name="talk")
        flow.add("sleeper", Call("sleepy"), name="nap")
        start = trio.current_time()
        result = await session.flow(flow, budget=Budget(max_input_tokens=10))
        elapsed = trio.current_time() - start
    assert result.outcomes == {"talk": "failed", "nap": "failed"}
    assert all(isinstance(e, BudgetExceeded) for e in result.errors.values())
    assert elapsed == pytest.approx(1.0)  # the sleeping node was stopped at once


async def test_the_flow_budget_max_duration_bounds_the_graph(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """max_duration counts from the flow's start: the node running at the deadline is stopped,
    the rest are skipped."""
    async with team("a", "b", "c") as (session, _):
        flow = Flow("timed")
        flow.add("a", work("one"), name="one")
        flow.add("b", work("two"), depends_on="one", name="two")
        flow.add("c", work("three"), depends_on="two", name="three")
        flow.add("c", work("free", 0.5), name="free")
        start = trio.current_time()
        result = await session.flow(flow, budget=Budget(max_duration=1.5))
        elapsed = trio.current_time() - start
    assert elapsed == pytest.approx(1.5)
    assert result.outcomes == {
        "one": "completed",
        "two": "failed",
        "three": "skipped",
        "free": "completed",
    }
    error = result.errors["two"]
    assert isinstance(error, BudgetExceeded) and error.limit == "max_duration"


async def test_a_flow_budget_applies_beside_the_node_commands_own() -> None:
    """A node command's own budget still bounds its turn, inside the flow's allowance."""
    async with team("a") as (session, _):

        async def chatty(branch: Branch) -> None:
            for _ in range(5):
                await branch.chat("again")

        session.register_operation("chatty", chatty)
        flow = Flow("both")
        flow.add("a", Call("chatty", budget=Budget(max_model_calls=2)), name="own")
        result = await session.flow(flow, budget=Budget(max_model_calls=10))
    error = result.errors["own"]
    assert isinstance(error, BudgetExceeded) and error.scope == "turn"
    assert result.usage.model_calls == 2


async def test_a_flow_inside_a_flow_node_draws_on_both_budgets() -> None:
    """A flow started by a node's work draws on the outer flow's allowance too."""
    async with team("outer", "x", "y") as (session, _):

        async def inner(branch: Branch) -> Any:
            flow = Flow("inner")
            flow.add("x", Chat("one"))
            flow.add("y", Chat("two"), depends_on="x")
            result = await session.flow(flow)
            return result.outcomes

        session.register_operation("inner", inner)
        flow = Flow("outer")
        flow.add("outer", Call("inner"), name="inner")
        result = await session.flow(flow, budget=Budget(max_model_calls=1))
    assert result["inner"] == {"x": "completed", "y": "failed"}
    assert result.usage.model_calls == 1
