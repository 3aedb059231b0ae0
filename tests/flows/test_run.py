"""Tests for ``pride.flows.run`` through ``Session.flow``: order, concurrency, late binding,
conditions, failure, cancellation, serialisation, refusal and signals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    Budget,
    Chat,
    Flow,
    FlowNodeError,
    InvalidFlow,
    NodeCompleted,
    NodeFailed,
    NodeSignal,
    NodeSkipped,
    NodeStarted,
    RunEnd,
    RunFailed,
    RunStart,
    Session,
    Signal,
)
from tests.flows.support import balanced_turns, boom, node_events, team, work
from tests.helpers import echo_model

# ---------------------------------------------------------------- order and concurrency


async def test_dependencies_first_and_independent_nodes_overlap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Three independent 1 s nodes overlap (1 s in all); their dependent starts after all three."""
    async with team("a", "b", "c", "d") as (session, overlap):
        flow = Flow()
        roots = [flow.add(name, work(name)) for name in "abc"]
        flow.add("d", work("d"), depends_on=roots)
        start = trio.current_time()
        result = await session.flow(flow)
        elapsed = trio.current_time() - start
    assert result.ok
    assert overlap.peak == 3
    assert elapsed == pytest.approx(2.0)
    assert overlap.started[-1] == "d" and set(overlap.finished[:3]) == {"a", "b", "c"}
    assert result.nodes["d"].started == pytest.approx(1.0)


async def test_max_concurrent_bounds_how_many_nodes_overlap(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten independent 1 s nodes with max_concurrent=3: never more than 3 at once, 4 s in all."""
    names = [f"b{i}" for i in range(10)]
    async with team(*names) as (session, overlap):
        recorded: list[Signal] = []
        session.observe(NodeStarted, handler=recorded.append)
        flow = Flow()
        for name in names:
            flow.add(name, work(name))
        start = trio.current_time()
        result = await session.flow(flow, max_concurrent=3)
        elapsed = trio.current_time() - start
    assert result.ok and len(result) == 10
    assert overlap.peak == 3
    assert elapsed == pytest.approx(4.0)
    # Ready nodes start in the order they were added (a batch at a time: trio then
    # runs their tasks, and their branches' turns, in an order of its own).
    started = [s.node for s in recorded]
    assert [sorted(started[i : i + 3]) for i in (0, 3, 6)] == [names[0:3], names[3:6], names[6:9]]


async def test_same_branch_nodes_are_served_in_mailbox_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Independent nodes on one branch run one at a time, in the order they were sent."""
    async with team("solo") as (session, overlap):
        flow = Flow()
        for label in ("first", "second", "third"):
            flow.add("solo", work(label), name=label)
        start = trio.current_time()
        result = await session.flow(flow, max_concurrent=5)
        elapsed = trio.current_time() - start
    assert result.ok
    assert overlap.peak == 1
    assert overlap.started == ["first", "second", "third"]
    assert elapsed == pytest.approx(3.0)
    turn_ids = [result.nodes[label].turn_id for label in ("first", "second", "third")]
    assert None not in turn_ids and len(set(turn_ids)) == 3  # three turns of the branch


# --------------------------------------------------------------- late binding, conditions


async def test_late_bound_commands_see_every_upstream_result() -> None:
    """A command function gets the results of all nodes upstream, direct or not."""
    seen: dict[str, Any] = {}

    async def review(upstream: dict[str, Any]) -> Chat:  # async functions work too
        seen.update(upstream)
        return Chat(f"review {upstream['writer']}")

    async with team("researcher", "writer", "critic") as (session, _):
        flow = Flow()
        facts = flow.add("researcher", Chat("facts"))
        draft = flow.add(
            "writer", lambda up: Chat(f"draft from {up['researcher']}"), depends_on=facts
        )
        flow.add("critic", review, depends_on=draft)
        result = await session.flow(flow)
    assert result["researcher"] == "re: facts"
    assert result["writer"] == "re: draft from re: facts"
    assert seen == {"writer": "re: draft from re: facts", "researcher": "re: facts"}
    assert result["critic"] == "re: review re: draft from re: facts"


async def test_a_false_condition_skips_the_node_and_its_dependents() -> None:
    """when=False skips the node (never sent) and everything after it; when=True runs."""
    async with team("a", "b") as (session, _):
        recorded: list[Signal] = []
        session.observe(NodeSignal, handler=recorded.append)
        flow = Flow()
        flow.add("a", Chat("score"))
        flow.add("b", Chat("publish"), depends_on="a", when=lambda up: "nope" in up["a"])
        flow.add("b", Chat("after publish"), depends_on="b", name="after")

        async def approve(upstream: dict[str, Any]) -> bool:
            return upstream["a"].startswith("re:")

        flow.add("b", Chat("revise"), depends_on="a", when=approve, name="revise")
        result = await session.flow(flow)
    assert result.outcomes == {
        "a": "completed",
        "b": "skipped",
        "after": "skipped",
        "revise": "completed",
    }
    assert result.nodes["b"].reason == "its condition (when) was false"
    assert result.nodes["after"].reason == "its dependency 'b' was skipped"
    assert ("NodeStarted", "b") not in node_events(recorded)
    assert ("NodeSkipped", "b") in node_events(recorded)


# ------------------------------------------------------------------------ failures


async def test_a_failure_skips_its_dependents_and_spares_independent_nodes() -> None:
    """A failed node's dependents are skipped with the reason; independent nodes complete."""
    async with team("a", "b") as (session, _):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow()
        flow.add("a", boom("bad"), name="bad")
        flow.add("b", work("next", 0), depends_on="bad", name="next")
        flow.add("b", work("last", 0), depends_on="next", name="last")
        flow.add("b", work("free", 0), name="free")
        result = await session.flow(flow)
    assert result.outcomes == {
        "bad": "failed",
        "next": "skipped",
        "last": "skipped",
        "free": "completed",
    }
    assert result.nodes["next"].reason == "its dependency 'bad' failed"
    assert result.nodes["last"].reason == "its dependency 'next' was skipped"
    assert isinstance(result.errors["bad"], ValueError)
    assert result.nodes["bad"].reason == "ValueError: bad went wrong"
    with pytest.raises(FlowNodeError) as info:
        result["bad"]
    assert info.value.outcome == "failed" and isinstance(info.value.__cause__, ValueError)
    with pytest.raises(FlowNodeError, match="skipped"):
        result["next"]
    with pytest.raises(KeyError):
        result["nobody"]
    with pytest.raises(ValueError, match="bad went wrong"):
        result.raise_for_failure()
    assert not result.ok and result.get("next", "none") == "none"
    failed = next(s for s in recorded if isinstance(s, NodeFailed))
    assert (failed.node, failed.error_type, failed.error_message) == (
        "bad",
        "ValueError",
        "bad went wrong",
    )
    assert balanced_turns(recorded)


async def test_fail_fast_cancels_running_nodes_and_skips_the_rest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """fail_fast: the first failure cancels the running node (its turn ends first) and skips
    the nodes not started; nothing starts afterwards."""
    async with team("a", "b", "c") as (session, overlap):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow()
        flow.add("a", boom("bad", seconds=1), name="bad")
        flow.add("b", work("slow", seconds=10), name="slow")
        flow.add("c", work("after", 0), depends_on="slow", name="after")
        flow.add("c", work("queued", 0), name="queued")  # waits for a slot
        start = trio.current_time()
        result = await session.flow(flow, max_concurrent=2, fail_fast=True)
        elapsed = trio.current_time() - start
    assert result.outcomes == {
        "bad": "failed",
        "slow": "cancelled",
        "after": "skipped",
        "queued": "skipped",
    }
    assert elapsed == pytest.approx(1.0)
    assert result.nodes["slow"].reason == "fail_fast: node 'bad' failed"
    assert result.nodes["queued"].reason == "fail_fast: node 'bad' failed"
    assert sorted(overlap.started) == ["bad", "slow"]
    assert balanced_turns(recorded)
    kinds = node_events(recorded)
    run_failed = [i for i, s in enumerate(recorded) if type(s).__name__ == "RunFailed"]
    cancelled_at = kinds.index(("NodeCancelled", "slow"))
    assert len(run_failed) == 2
    # The slow node's turn ended (RunFailed) before its NodeCancelled.
    node_signals = [i for i, s in enumerate(recorded) if isinstance(s, NodeSignal)]
    assert run_failed[-1] < node_signals[cancelled_at]


async def test_a_failing_command_function_fails_the_node_before_it_starts() -> None:
    """A command function that raises, or returns no work command, fails the node unsent."""
    async with team("a") as (session, _):
        recorded: list[Signal] = []
        session.observe(NodeSignal, handler=recorded.append)
        flow = Flow()
        flow.add("a", lambda up: 1 / 0, name="raises")
        flow.add("a", lambda up: "not a command", name="wrong")
        flow.add("a", Chat("x"), when=lambda up: up["nothing"], name="bad-when")
        result = await session.flow(flow)
    assert result.outcomes == {"raises": "failed", "wrong": "failed", "bad-when": "failed"}
    assert isinstance(result.errors["raises"], ZeroDivisionError)
    assert "returned str, not a work command" in str(result.errors["wrong"])
    assert isinstance(result.errors["bad-when"], KeyError)
    assert not any(isinstance(s, NodeStarted) for s in recorded)


async def test_a_node_whose_branch_stopped_fails_with_branch_closed() -> None:
    """A target that has stopped fails its node with BranchClosed; the flow goes on."""
    async with team("a", "b") as (session, _):
        gone = session.get_branch("b")
        flow = Flow()
        flow.add(gone, Chat("x"), name="late")
        flow.add("a", Chat("y"), name="fine")
        await session.remove(gone)
        by_name = Flow()
        by_name.add("b", Chat("z"))
        with pytest.raises(InvalidFlow):  # by name it no longer resolves
            await session.flow(by_name)
        result = await session.flow(flow)
    assert result.outcomes == {"late": "failed", "fine": "completed"}
    assert isinstance(result.errors["late"], pride.BranchClosed)


# --------------------------------------------------------------------- cancellation


async def test_cancelling_the_caller_cancels_running_nodes_and_starts_nothing_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled mid-flow: each started node gets exactly one terminal (its turn's first),
    nodes not started are skipped, and no node or turn starts afterwards."""
    async with team("a", "b", "c", "d") as (session, overlap):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow()
        flow.add("a", work("quick", 1), name="quick")
        flow.add("b", work("long", 10), name="long")
        flow.add("c", work("then", 10), depends_on="quick", name="then")
        flow.add("d", work("last", 1), depends_on=["then", "long"], name="last")
        with trio.move_on_after(1.5) as scope:
            await session.flow(flow)
        assert scope.cancelled_caught
        seen_at_return = len(recorded)
        await trio.sleep(20)  # nothing happens later
        assert len(recorded) == seen_at_return
    kinds = node_events(recorded)
    started = {node for kind, node in kinds if kind == "NodeStarted"}
    assert started == {"quick", "long", "then"}
    terminals: dict[str, list[str]] = {}
    for kind, node in kinds:
        if kind != "NodeStarted":
            terminals.setdefault(node, []).append(kind)
    assert terminals == {
        "quick": ["NodeCompleted"],
        "long": ["NodeCancelled"],
        "then": ["NodeCancelled"],
        "last": ["NodeSkipped"],
    }
    assert balanced_turns(recorded)
    assert sorted(overlap.started) == ["long", "quick", "then"]
    skipped = next(s for s in recorded if isinstance(s, NodeSkipped))
    assert skipped.reason == "the flow was cancelled"


async def test_cancelled_mid_flow_every_running_and_queued_node_is_cancelled_and_no_task_is_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled with a node's turn running on ``a``, another node sent and waiting in
    ``a``'s mailbox behind it, a turn running on ``b``, a command function still
    building its command and a node waiting on a dependency: each running turn ends
    with its RunFailed, then its node's NodeCancelled; the queued node is
    NodeCancelled with no turn ever started (its envelope dropped); the other two are
    skipped; no task of the flow is left, and the branches serve on."""

    async def hang(up: Any) -> Chat:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async with team("a", "b", "c") as (session, overlap):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("cut")
        flow.add("a", work("running-a", 10), name="running-a")
        flow.add("a", work("queued-a", 1), name="queued-a")
        flow.add("b", work("running-b", 10), name="running-b")
        flow.add("c", hang, name="building")
        flow.add("c", work("waiting", 1), depends_on="running-b", name="waiting")
        with trio.move_on_after(1) as scope:
            await session.flow(flow)
        assert scope.cancelled_caught
        names = _task_names(trio.lowlevel.current_root_task())
        assert [name for name in names if "flow cut" in name or "FlowRun" in name] == []
        assert await session.ask("a", Chat("still there?")) == "re: still there?"
    assert sorted(overlap.started) == ["running-a", "running-b"] and overlap.finished == []
    nodes = [s for s in recorded if isinstance(s, NodeSignal)]
    terminals = {s.node: s for s in nodes if not isinstance(s, NodeStarted)}
    assert {name: type(s).__name__ for name, s in terminals.items()} == {
        "running-a": "NodeCancelled",
        "queued-a": "NodeCancelled",
        "running-b": "NodeCancelled",
        "building": "NodeSkipped",
        "waiting": "NodeSkipped",
    }
    assert len(nodes) == 5 + 3  # a terminal for each node, a NodeStarted for each sent
    assert terminals["queued-a"].turn_id is None  # its turn never started
    for name in ("running-a", "running-b"):
        turn_id = terminals[name].turn_id
        failed_at = next(
            i for i, s in enumerate(recorded) if isinstance(s, RunFailed) and s.turn_id == turn_id
        )
        assert failed_at < recorded.index(terminals[name])  # the turn's terminal first
    started_turns = [s for s in recorded if isinstance(s, RunStart)]
    assert len(started_turns) == 3  # the two nodes' turns and the last ask
    assert balanced_turns(recorded)
    assert terminals["building"].reason == "the flow was cancelled"


def _task_names(task: trio.lowlevel.Task) -> list[str]:
    """The names of every task below ``task``."""
    names: list[str] = []
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            names.append(child.name)
            names.extend(_task_names(child))
    return names


async def test_a_branch_removed_mid_flow_fails_the_nodes_still_to_reach_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``b`` is removed while its first node's turn runs: that turn finishes (``remove``
    waits for it); the node sent and queued behind it in ``b``'s mailbox, and the node
    that starts after it, fail with BranchClosed; what depends on them is skipped, and
    the nodes elsewhere complete."""
    async with team("a", "b") as (session, overlap):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("removed")
        flow.add("b", work("running", 10), name="running")
        flow.add("b", work("queued", 1), name="queued")
        flow.add("b", work("later", 1), depends_on="running", name="later")
        flow.add("a", work("after", 1), depends_on="queued", name="after")
        flow.add("a", work("elsewhere", 1), name="elsewhere")

        async def remove_b() -> None:
            await trio.sleep(1)
            await session.remove("b")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(remove_b)
            result = await session.flow(flow)
    assert result.outcomes == {
        "running": "completed",
        "queued": "failed",
        "later": "failed",
        "after": "skipped",
        "elsewhere": "completed",
    }
    assert isinstance(result.errors["queued"], pride.BranchClosed)
    assert isinstance(result.errors["later"], pride.BranchClosed)
    assert result.nodes["after"].reason == "its dependency 'queued' failed"
    assert sorted(overlap.started) == ["elsewhere", "running"]
    assert balanced_turns(recorded)


async def test_a_branch_crashing_mid_flow_fails_its_node_and_serves_the_rest_after_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under one_for_all, ``a``'s node escalates mid-flow: that node fails with the
    Escalate, what depends on it is skipped, the node running on ``b`` is cancelled by
    the restart, and the node queued behind the crash in ``a``'s mailbox is kept and
    served after the restart."""

    async def crash(branch: Branch) -> str:
        await trio.sleep(1)
        raise pride.Escalate("state is corrupt")

    async with team("a", "b", strategy="one_for_all") as (session, _):
        session.register_operation("crash", crash)
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("crashing")
        flow.add("a", pride.Call("crash"), name="crash")
        flow.add("a", work("queued", 1), name="queued")
        flow.add("b", work("sibling", 10), name="sibling")
        flow.add("b", work("below", 1), depends_on="crash", name="below")
        result = await session.flow(flow)
    assert result.outcomes == {
        "crash": "failed",
        "queued": "completed",
        "sibling": "cancelled",
        "below": "skipped",
    }
    assert isinstance(result.errors["crash"], pride.Escalate)
    assert result.nodes["sibling"].reason == "its turn was cancelled (restart)"
    assert result["queued"] == "queued done by a"
    assert balanced_turns(recorded)


async def test_a_turn_cancelled_by_someone_else_cancels_its_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A node whose turn is cancelled from outside the flow (a shutdown) is 'cancelled'."""
    async with team("a", "b") as (session, _):
        flow = Flow()
        flow.add("a", work("long", 10), name="long")
        flow.add("b", work("after", 1), depends_on="long", name="after")
        async with trio.open_nursery() as nursery:

            async def stop_soon() -> None:
                await trio.sleep(1)
                await session.stop(grace=0)

            nursery.start_soon(stop_soon)
            result = await session.flow(flow)
    assert result.outcomes == {"long": "cancelled", "after": "skipped"}
    assert isinstance(result.errors["long"], pride.TurnCancelled)
    assert result.nodes["long"].reason == "its turn was cancelled (shutdown)"


@pytest.mark.parametrize(
    ("command", "outcome"), [(Chat("one"), "completed"), (boom("one"), "failed")]
)
async def test_a_node_whose_turn_ended_as_its_caller_cancelled_keeps_the_turn_s_outcome(
    tmp_path: Path, command: pride.WorkCommand, outcome: str
) -> None:
    """The caller cancelled just as the node's turn ended (cancelled from the turn's own
    terminal signal, after its commit): the node's terminal says what the turn did, as
    its commit rider journaled it, not NodeCancelled beside a journaled outcome."""
    async with team("a", "b", store=tmp_path / "store.db") as (session, _):
        recorded: list[Signal] = []
        scope = trio.CancelScope()

        def on_signal(signal: Signal) -> None:
            recorded.append(signal)
            if isinstance(signal, RunEnd | RunFailed):
                scope.cancel()

        session.observe(handler=on_signal)
        flow = Flow("cut")
        flow.add("a", command, name="one")
        flow.add("b", Chat("two"), depends_on="one", name="two")
        with scope:
            await session.flow(flow)
        assert scope.cancelled_caught
        [unfinished] = await session.unfinished_flows()
    terminals = [(type(s).__name__, s.node) for s in recorded if isinstance(s, NodeSignal)][1:]
    kind = {"completed": "NodeCompleted", "failed": "NodeFailed"}[outcome]
    assert terminals == [(kind, "one"), ("NodeSkipped", "two")]
    assert unfinished.outcomes == {"one": outcome}
    assert balanced_turns(recorded)


# ----------------------------------------------------------------------- refusal


@pytest.mark.parametrize("problem", ["cycle", "dangling", "unknown target"])
async def test_a_flow_that_cannot_start_runs_nothing(problem: str) -> None:
    """Cycles, dangling dependencies and unknown targets raise InvalidFlow before any turn."""
    async with team("a", "b") as (session, _):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("broken")
        flow.add("a", Chat("root"), name="root")
        if problem == "cycle":
            flow.add("a", Chat("x"), depends_on=["root", "y"], name="x")
            flow.add("b", Chat("y"), depends_on="x", name="y")
            culprit = "x"
        elif problem == "dangling":
            flow.add("b", Chat("y"), depends_on="nowhere", name="y")
            culprit = "y"
        else:
            flow.add("ghost", Chat("y"), depends_on="root", name="y")
            culprit = "y"
        with pytest.raises(InvalidFlow) as info:
            await session.flow(flow)
        with pytest.raises(InvalidFlow):
            async with session.flow_stream(flow):
                pytest.fail("the block must not run")
        assert recorded == []  # not a node signal, not a turn
    assert info.value.node == culprit and info.value.flow == "broken"


async def test_a_node_on_the_branch_whose_turn_starts_the_flow_is_refused() -> None:
    """A flow started inside a turn of branch X may not have a node on X (it would wait on
    itself): InvalidFlow names that node."""
    async with team("a", "planner") as (session, _):

        async def plan(branch: Branch) -> str:
            flow = Flow()
            flow.add("a", Chat("help"), name="helper")
            flow.add(branch, Chat("myself"), name="self")
            try:
                await session.flow(flow)
            except InvalidFlow as exc:
                return f"refused {exc.node}"
            return "ran"

        session.register_operation("plan", plan)
        assert await session.ask("planner", pride.Call("plan")) == "refused self"

        async def delegate(branch: Branch) -> Any:
            flow = Flow()
            flow.add("a", Chat("help"), name="helper")
            return (await session.flow(flow))["helper"]

        session.register_operation("delegate", delegate)
        assert await session.ask("planner", pride.Call("delegate")) == "re: help"


async def test_bad_options_are_refused() -> None:
    """max_concurrent < 1, max_spawn < 0, a non-Budget or a non-Flow raise at once."""
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Chat("x"))
        with pytest.raises(ValueError, match="max_concurrent"):
            await session.flow(flow, max_concurrent=0)
        with pytest.raises(ValueError, match="max_concurrent"):
            await session.flow(flow, max_concurrent=True)
        with pytest.raises(ValueError, match="max_spawn"):
            await session.flow(flow, max_spawn=-1)
        with pytest.raises(TypeError, match="Budget"):
            await session.flow(flow, budget={"max_model_calls": 1})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"pride\.Flow"):
            await session.flow([flow])  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="not running"):
        await session.flow(flow)


# ------------------------------------------------------------------------ signals


async def test_node_signals_in_order_with_their_fields() -> None:
    """The observer sees NodeStarted, the node's turn, then NodeCompleted, with the flow's id,
    the node's dependencies, its branch and a growing elapsed time."""
    async with team("a", "b") as (session, _):
        recorded: list[Signal] = []
        session.observe(handler=recorded.append)
        flow = Flow("pair")
        flow.add("a", Chat("one"), name="one")
        flow.add("b", Chat("two"), depends_on="one", name="two")
        result = await session.flow(flow)
    kinds = [type(s).__name__ for s in recorded if isinstance(s, NodeSignal | RunStart | RunEnd)]
    assert kinds == ["NodeStarted", "RunStart", "RunEnd", "NodeCompleted"] * 2
    nodes = [s for s in recorded if isinstance(s, NodeSignal)]
    assert {s.flow_id for s in nodes} == {result.flow_id}
    assert {s.flow_name for s in nodes} == {"pair"}
    assert [s.depends_on for s in nodes] == [(), (), ("one",), ("one",)]
    assert [s.branch_name for s in nodes] == ["a", "a", "b", "b"]
    assert nodes[0].command == "Chat"
    elapsed = [s.elapsed for s in nodes]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    completed = [s for s in nodes if isinstance(s, NodeCompleted)]
    run_ends = [s for s in recorded if isinstance(s, RunEnd)]
    assert [s.turn_id for s in completed] == [s.turn_id for s in run_ends]
    assert [s.turn_id for s in completed] == [result.nodes[n].turn_id for n in ("one", "two")]
    assert all(s.duration >= 0 for s in completed)
    run_start = next(s for s in recorded if isinstance(s, RunStart))
    assert run_start.branch_name == "a"


async def test_signals_survive_the_codec() -> None:
    """Node signals are travelling types: a JSON round trip gives them back unchanged."""
    async with team("a") as (session, _):
        recorded: list[Signal] = []
        session.observe(NodeSignal, handler=recorded.append)
        flow = Flow()
        flow.add("a", boom("x"), name="x")
        flow.add("a", Chat("y"), depends_on="x", name="y")
        await session.flow(flow)
    assert [type(s) for s in recorded] == [NodeStarted, NodeFailed, NodeSkipped]
    for signal in recorded:
        assert pride.messages.from_json(pride.messages.to_json(signal), Signal) == signal


async def test_a_raising_observer_does_not_break_the_flow() -> None:
    """Observers of node signals are isolated: a raising one is logged, the flow goes on."""
    async with team("a") as (session, _):

        def broken(signal: Signal) -> None:
            raise RuntimeError("observer bug")

        async def slow_async(signal: Signal) -> None:
            await trio.sleep(0)

        session.observe(NodeSignal, handler=broken)
        session.observe(NodeSignal, handler=slow_async)
        flow = Flow()
        flow.add("a", Chat("x"))
        result = await session.flow(flow)
    assert result.ok


# ------------------------------------------------------------------------- result


async def test_the_result_reports_outcomes_usage_and_a_picture() -> None:
    """FlowResult: results, outcomes, per-node usage summed into the flow's, and Mermaid."""
    async with team("a", "b") as (session, _):
        flow = Flow("two")
        flow.add("a", Chat("x"), name="x")
        flow.add("b", boom("y"), name="y")
        flow.add("b", Chat("z"), depends_on="y", name="z")
        result = await session.flow(flow)
    assert result.results == {"x": "re: x"}
    assert result.outcomes == {"x": "completed", "y": "failed", "z": "skipped"}
    assert list(result) == ["x", "y", "z"] and "x" in result and len(result) == 3
    assert result.nodes["x"].usage.model_calls == 1
    assert result.usage.model_calls == 1
    assert result.elapsed >= 0 and result.name == "two"
    assert repr(result) == "<FlowResult 'two' 1 completed, 1 failed, 1 skipped>"
    picture = result.to_mermaid()
    assert "classDef failed" in picture and "class n1 failed" in picture
    assert "class n2 skipped" in picture


async def test_a_flow_runs_again_with_fresh_state() -> None:
    """A Flow is a plan: running it twice gives two runs with their own ids and outcomes."""
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Chat("x"))
        first, second = await session.flow(flow), await session.flow(flow)
    assert first.flow_id != second.flow_id
    assert first.ok and second.ok


async def test_a_session_budget_stops_new_nodes_once_spent() -> None:
    """Nodes drawing on a spent session budget fail with BudgetExceeded, then the rest skip."""
    async with team("a", "b", "c", budget=Budget(max_model_calls=1)) as (session, _):
        flow = Flow()
        for name in "abc":
            flow.add(name, Chat(name))
        result = await session.flow(flow, max_concurrent=1)
    assert result.outcomes == {"a": "completed", "b": "failed", "c": "skipped"}
    assert isinstance(result.errors["b"], pride.BudgetExceeded)
    assert result.errors["b"].scope.startswith("session")  # type: ignore[attr-defined]
    assert result.nodes["c"].reason is not None
    assert "budget is spent" in result.nodes["c"].reason


async def test_a_node_can_target_a_branch_object_or_its_id() -> None:
    """Targets resolve by Branch, name or id alike."""
    async with Session() as session:
        branch = await session.spawn(Branch(name="x", chat_model=echo_model()))
        flow = Flow()
        flow.add(branch, Chat("by object"), name="object")
        flow.add(branch.id, Chat("by id"), name="id")
        flow.add("x", Chat("by name"), name="name")
        result = await session.flow(flow)
    assert result.results == {"object": "re: by object", "id": "re: by id", "name": "re: by name"}
