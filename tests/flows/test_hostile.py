"""Issue 21, attacker pass: hostile flows get a clear, typed error (or an outcome
that says what was wrong), and the session goes on serving.

Huge graphs build, check and run in linear time (a quadratic step would
show here as a suite that takes minutes); counts of the wrong kind are
refused before anything runs; a command function or a condition that
raises, hangs or returns the wrong thing fails its own node only; a running
flow cannot be grown into a cycle, nor past ``max_spawn`` however many
nodes grow it at once.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import pride
from pride import Branch, Call, Chat, Flow, InvalidFlow, Stop
from tests.flows.support import team


async def _serving(session: pride.Session, name: str = "a") -> None:
    """The session still answers an ordinary turn."""
    assert await session.ask(name, Chat("still there?")) == "re: still there?"


def test_a_huge_graph_builds_and_checks() -> None:
    """10,000 nodes with default names on one target, a wide fan-in and a deep
    chain: built and checked (linear time), and a cycle among them is still found."""
    flow = Flow("huge")
    root = flow.add("a", Chat("root"))
    wide = [flow.add("a", Chat("part"), depends_on=root) for _ in range(5_000)]
    previous = flow.add("a", Chat("join"), depends_on=wide)
    for _ in range(5_000):
        previous = flow.add("a", Chat("step"), depends_on=previous)
    assert len(flow) == 10_002 and flow.nodes[-1].name == "a-10002"
    flow.check()
    flow.add("b", Chat("loop"), depends_on=["a-10002", "loop-back"], name="loop")
    flow.add("b", Chat("back"), depends_on="loop", name="loop-back")
    with pytest.raises(InvalidFlow, match="loop -> loop-back -> loop"):
        flow.check()


async def test_a_long_chain_of_late_bound_nodes_runs() -> None:
    """A 300-node chain, each node's command built from all its upstream results."""
    async with team("a") as (session, _):

        async def count(branch: Branch, seen: int = 0) -> int:
            return seen

        session.register_operation("count", count)
        flow = Flow("chain")
        previous = flow.add("a", Call("count"), name="n0")
        for i in range(1, 300):
            previous = flow.add(
                "a", lambda up: Call("count", seen=len(up)), depends_on=previous, name=f"n{i}"
            )
        result = await session.flow(flow, max_concurrent=10**18)  # huge: no bound at all
        assert result.ok and result["n299"] == 299
        await _serving(session)


@pytest.mark.parametrize("value", [0, -1, True, False, 1.5, "3", None, 2**70 * -1])
async def test_max_concurrent_of_the_wrong_kind_is_refused(value: Any) -> None:
    async with team("a") as (session, overlap):
        flow = Flow()
        flow.add("a", Call("work", label="x"))
        with pytest.raises(ValueError, match="max_concurrent must be an int >= 1"):
            await session.flow(flow, max_concurrent=value)
        with pytest.raises(ValueError, match="max_concurrent"):
            async with session.flow_stream(flow, max_concurrent=value):
                pass
        assert overlap.started == []  # nothing ran
        await _serving(session)


@pytest.mark.parametrize("value", [-1, True, 2.0, "50"])
async def test_max_spawn_of_the_wrong_kind_is_refused(value: Any) -> None:
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Chat("x"))
        with pytest.raises(ValueError, match="max_spawn must be an int >= 0"):
            await session.flow(flow, max_spawn=value)
        await _serving(session)


async def test_command_functions_that_misbehave_fail_their_own_node() -> None:
    """Raising (sync or async), returning a class, a priority message or nothing:
    each fails its node with a typed error naming it; the others complete."""
    async with team("a") as (session, _):

        async def raises_later(up: Any) -> Any:
            await trio.sleep(0)
            raise LookupError("no such thing")

        flow = Flow("hostile")
        flow.add("a", raises_later, name="async-raises")
        flow.add("a", lambda up: Chat, name="a-class")
        flow.add("a", lambda up: Stop(), name="priority")
        flow.add("a", lambda up: None, name="nothing")
        flow.add("a", Chat("fine"), name="fine")
        result = await session.flow(flow)
        assert result.outcomes == {
            "async-raises": "failed",
            "a-class": "failed",
            "priority": "failed",
            "nothing": "failed",
            "fine": "completed",
        }
        assert isinstance(result.errors["async-raises"], LookupError)
        for name in ("a-class", "priority", "nothing"):
            error = result.errors[name]
            assert isinstance(error, TypeError) and f"node {name!r}" in str(error)
        await _serving(session)


async def test_conditions_that_misbehave_fail_their_own_node() -> None:
    """A ``when`` that raises or returns anything but a bool fails its node
    (a predicate that forgot its ``return`` does not silently skip work)."""
    async with team("a") as (session, _):

        async def raises(up: Any) -> bool:
            raise RuntimeError("condition broke")

        flow = Flow()
        flow.add("a", Chat("x"), when=raises, name="raises")
        flow.add("a", Chat("x"), when=lambda up: None, name="none")
        flow.add("a", Chat("x"), when=lambda up: "yes", name="text")
        flow.add("a", Chat("x"), when=lambda up: True, name="true")
        flow.add("a", Chat("x"), when=lambda up: False, name="false")
        result = await session.flow(flow)
        assert result.outcomes == {
            "raises": "failed",
            "none": "failed",
            "text": "failed",
            "true": "completed",
            "false": "skipped",
        }
        assert isinstance(result.errors["raises"], RuntimeError)
        assert isinstance(result.errors["none"], TypeError)
        assert "node 'text'" in str(result.errors["text"]) and "bool" in str(result.errors["text"])
        await _serving(session)


async def test_a_hanging_command_function_is_cancelled_with_the_flow() -> None:
    async with team("a") as (session, _):

        async def hangs(up: Any) -> Any:
            await trio.sleep_forever()

        flow = Flow()
        flow.add("a", hangs, name="hangs")
        with trio.move_on_after(0.2) as scope:
            await session.flow(flow)
        assert scope.cancelled_caught
        await _serving(session)


async def test_a_running_flow_cannot_be_grown_into_a_cycle() -> None:
    """A spawned node may depend only on nodes the run has: on itself, on a name
    not added yet, or on a node of another flow, it is refused."""
    async with team("planner", "w") as (session, _):
        refusals: list[str] = []

        async def tangle(branch: Branch) -> str:
            run = pride.current_flow()
            assert run is not None
            other = Flow().add("w", Chat("elsewhere"))
            attempts: list[dict[str, Any]] = [
                {"name": "x", "depends_on": "x"},
                {"name": "x", "depends_on": "y"},
                {"name": "x", "depends_on": other},
                {"name": "tangle"},  # the name of a node the run has
            ]
            for kwargs in attempts:
                try:
                    run.add("w", Chat("loop"), **kwargs)
                except InvalidFlow as exc:
                    refusals.append(exc.problem)
            run.add("w", Chat("after me"), depends_on="tangle", name="after")
            return "tangled"

        session.register_operation("tangle", tangle)
        flow = Flow()
        flow.add("planner", Call("tangle"), name="tangle")
        result = await session.flow(flow)
        assert result.ok and list(result) == ["tangle", "after"]
        assert len(refusals) == 4
        assert "depends on itself" in refusals[0]
        assert "not a node of the running flow" in refusals[1]
        assert "another flow" in refusals[2]
        assert "another node of the flow has this name" in refusals[3]
        await _serving(session, "w")


async def test_many_nodes_growing_the_flow_at_once_stop_at_max_spawn() -> None:
    """Twelve nodes on four branches each try to add ten: exactly max_spawn are
    added, every other attempt is refused with InvalidFlow, and all of it runs."""
    names = ("p0", "p1", "p2", "p3")
    async with team(*names, "w") as (session, _):
        refused: list[InvalidFlow] = []

        async def greedy(branch: Branch, index: int = 0) -> int:
            run = pride.current_flow()
            assert run is not None
            added = 0
            for i in range(10):
                await trio.sleep(0)  # interleave with the other greedy nodes
                try:
                    run.add("w", Chat(f"{index}.{i}"), name=f"job-{index}-{i}")
                except InvalidFlow as exc:
                    refused.append(exc)
                else:
                    added += 1
            return added

        session.register_operation("greedy", greedy)
        flow = Flow()
        for index in range(12):
            flow.add(names[index % 4], Call("greedy", index=index), name=f"greedy-{index}")
        result = await session.flow(flow, max_concurrent=12, max_spawn=30)
        spawned = [name for name in result if name.startswith("job-")]
        assert len(spawned) == 30 and result.ok
        assert sum(result[f"greedy-{index}"] for index in range(12)) == 30
        assert len(refused) == 90 and all("max_spawn=30" in str(exc) for exc in refused)
        await _serving(session, "w")
