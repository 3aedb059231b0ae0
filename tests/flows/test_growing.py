"""Growing graphs: work of a running node adds nodes to its flow (``pride.current_flow``),
bounded by ``max_spawn``; the spawned nodes are in the signals and the result."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Call, Chat, Flow, InvalidFlow, NodeSignal, Signal
from tests.flows.support import team, work


async def test_a_planner_fans_out_work_it_decided_on() -> None:
    """A node's operation adds workers and a summary after them; all run, in the result and
    the signals, with spawned_by naming the planner."""
    async with team("planner", "w0", "w1", "w2") as (session, _):
        recorded: list[Signal] = []
        session.observe(NodeSignal, handler=recorded.append)

        async def plan(branch: Branch, topics: list[str]) -> str:
            run = pride.current_flow()
            assert run is not None
            parts = [
                run.add(f"w{i}", Chat(f"write about {topic}"), name=f"part-{topic}")
                for i, topic in enumerate(topics)
            ]
            run.add(
                "planner",
                lambda up: Chat(" + ".join(up[p.name] for p in parts)),
                depends_on=parts,
                name="summary",
            )
            return f"planned {len(topics)}"

        session.register_operation("plan", plan)
        flow = Flow("grow")
        flow.add("planner", Call("plan", topics=["a", "b", "c"]), name="plan")
        result = await session.flow(flow)
    assert result.ok
    assert list(result) == ["plan", "part-a", "part-b", "part-c", "summary"]
    assert result["summary"] == "re: re: write about a + re: write about b + re: write about c"
    assert {result.nodes[n].node.spawned_by for n in result if n != "plan"} == {"plan"}
    assert result.nodes["plan"].node.spawned_by is None
    spawned = {s.node for s in recorded if s.spawned_by == "plan"}
    assert spawned == {"part-a", "part-b", "part-c", "summary"}
    assert "spawned" in result.to_mermaid()
    assert len(flow) == 1  # the plan is unchanged: the nodes belong to the run


async def test_max_spawn_bounds_how_far_a_flow_grows() -> None:
    """Past max_spawn, add() raises InvalidFlow naming the node; what was added still runs."""
    async with team("planner", "w") as (session, _):
        refused: list[InvalidFlow] = []

        async def greedy(branch: Branch) -> int:
            run = pride.current_flow()
            assert run is not None
            added = 0
            for i in range(5):
                try:
                    run.add("w", Chat(f"job {i}"), name=f"job-{i}")
                except InvalidFlow as exc:
                    refused.append(exc)
                    break
                added += 1
            return added

        session.register_operation("greedy", greedy)
        flow = Flow()
        flow.add("planner", Call("greedy"), name="greedy")
        result = await session.flow(flow, max_spawn=2)
        none_allowed = await session.flow(flow, max_spawn=0)
    assert result["greedy"] == 2
    assert list(result) == ["greedy", "job-0", "job-1"] and result.ok
    assert refused[0].node == "job-2" and "max_spawn=2" in str(refused[0])
    assert none_allowed["greedy"] == 0 and list(none_allowed) == ["greedy"]


async def test_the_default_max_spawn_is_fifty() -> None:
    """max_spawn defaults to 50 (the reference's default)."""
    async with team("planner", "w") as (session, _):

        async def many(branch: Branch) -> int:
            run = pride.current_flow()
            assert run is not None
            count = 0
            try:
                while True:
                    run.add("w", pride.Act(()), name=f"job-{count}")
                    count += 1
            except InvalidFlow:
                return count

        session.register_operation("many", many)
        flow = Flow()
        flow.add("planner", Call("many"), name="many")
        result = await session.flow(flow)
    assert result["many"] == 50 and len(result) == 51


async def test_spawned_nodes_depend_only_on_nodes_the_run_has() -> None:
    """A spawned node may wait for existing nodes (the spawner too); an unknown name or a
    bad target is refused at once; one waiting on a failed node is skipped."""
    async with team("planner", "w") as (session, _):
        problems: list[str] = []

        async def grow(branch: Branch) -> str:
            run = pride.current_flow()
            assert run is not None
            run.add("w", lambda up: Chat(f"after {up['grow']}"), depends_on="grow", name="after")
            run.add("w", Chat("never"), depends_on="broken", name="blocked")
            for bad in ({"depends_on": "later"}, {"target": "ghost"}):
                try:
                    run.add(bad.get("target", "w"), Chat("x"), depends_on=bad.get("depends_on", ()))
                except InvalidFlow as exc:
                    problems.append(exc.problem)
            return "grown"

        session.register_operation("grow", grow)
        flow = Flow()
        flow.add("w", pride.Call("boom"), name="broken")
        flow.add("planner", Call("grow"), depends_on="broken", name="skipped-planner")
        flow.add("planner", Call("grow"), name="grow")
        result = await session.flow(flow, max_concurrent=1)
    assert result.outcomes == {
        "broken": "failed",
        "skipped-planner": "skipped",
        "grow": "completed",
        "after": "completed",
        "blocked": "skipped",
    }
    assert result["after"] == "re: after grown"
    assert result.nodes["blocked"].reason == "its dependency 'broken' failed"
    assert "not a node of the running flow" in problems[0]
    assert "does not resolve" in problems[1]


async def test_work_a_node_asks_of_another_branch_can_grow_the_flow() -> None:
    """current_flow() reaches the run from a turn the node asked of another branch."""
    async with team("lead", "helper", "w") as (session, _):

        async def delegate(branch: Branch) -> Any:
            return await pride.ask("helper", Call("decide"))

        async def decide(branch: Branch) -> str:
            run = pride.current_flow()
            assert run is not None
            run.add("w", Chat("decided work"), name="decided")
            return "decided"

        session.register_operation("delegate", delegate)
        session.register_operation("decide", decide)
        flow = Flow()
        flow.add("lead", Call("delegate"), name="delegate")
        result = await session.flow(flow)
    assert result["decided"] == "re: decided work"
    assert result.nodes["decided"].node.spawned_by == "delegate"


async def test_current_flow_outside_a_node_is_none_and_a_finished_run_refuses_to_grow() -> None:
    """No flow outside a node's work; a finished run's add() raises RuntimeError."""
    assert pride.current_flow() is None
    kept: list[Any] = []
    async with team("a") as (session, _):

        async def keep(branch: Branch) -> None:
            kept.append(pride.current_flow())

        session.register_operation("keep", keep)
        flow = Flow()
        flow.add("a", Call("keep"))
        await session.flow(flow)
        assert await session.ask("a", Call("keep")) is None  # an ordinary turn: no flow
    run = kept[0]
    assert run is not None and not run.running
    with pytest.raises(RuntimeError, match="finished"):
        run.add("a", Chat("late"))


async def test_nodes_added_after_fail_fast_are_skipped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once fail_fast has stopped the flow, nodes added by still-finishing work are skipped."""
    async with team("a", "b", "w") as (session, _):

        async def late_grower(branch: Branch) -> str:
            with trio.CancelScope(shield=True):
                await trio.sleep(2)  # outlives the failure, then grows the stopped flow
            run = pride.current_flow()
            assert run is not None
            run.add("w", Chat("too late"), name="late")
            return "done"

        session.register_operation("late_grower", late_grower)
        flow = Flow()
        flow.add("a", pride.Call("boom", label="x", seconds=1), name="bad")
        flow.add("b", Call("late_grower"), name="grower")
        result = await session.flow(flow, fail_fast=True)
    assert result.outcomes["bad"] == "failed"
    assert result.outcomes["late"] == "skipped"
    assert result.nodes["late"].reason == "fail_fast: node 'bad' failed"
    assert result.outcomes["grower"] in {"cancelled", "completed"}


async def test_spawned_nodes_respect_max_concurrent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Nodes added while the flow runs share its max_concurrent slots."""
    names = [f"w{i}" for i in range(6)]
    async with team("planner", *names) as (session, overlap):

        async def fan(branch: Branch) -> None:
            run = pride.current_flow()
            assert run is not None
            for name in names:
                run.add(name, work(name), name=name)

        session.register_operation("fan", fan)
        flow = Flow()
        flow.add("planner", Call("fan"), name="fan")
        start = trio.current_time()
        result = await session.flow(flow, max_concurrent=2)
        elapsed = trio.current_time() - start
    assert result.ok
    assert overlap.peak == 2
    assert elapsed == pytest.approx(3.0)
