"""Flows at size: what a long chain or a wide fan-out costs per node.

A late-bound node is handed its upstream results (every node above it, direct
or not). Handed as a copy, a chain of n such nodes builds n mappings of up to
n entries: O(n²) time and, for a function that keeps what it was handed,
O(n²) memory (8,000 nodes took 16 times as long as 2,000). Handed as a
read-only view of the run's results, each node costs the same however deep
it sits. These tests count what the mappings hold rather than time them.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

from pride import Branch, Call, Flow, NodeSignal, Signal
from pride.flows.state import NodeState
from tests.flows.support import team

CHAIN = 1_000


class Marker:
    """The first node's result: who holds a reference to it is what we count."""


async def test_a_late_bound_chain_hands_each_node_a_view_not_a_copy() -> None:
    """1,000 late-bound nodes in a chain, each keeping the mapping it was handed:
    the mappings do not each hold every result above them (a copy would hold the
    first node's result 999 times over), yet each reads every upstream result,
    nearest first, and cannot change them."""
    marker = Marker()
    kept: list[Mapping[str, Any]] = []

    async def first(branch: Branch) -> Marker:
        return marker

    async def step(branch: Branch, previous: int = 0) -> int:
        return previous + 1

    def command(index: int) -> Any:
        def build(up: Mapping[str, Any]) -> Call:
            kept.append(up)
            before = up[f"n{index - 1}"]
            return Call("step", previous=0 if isinstance(before, Marker) else before)

        return build

    async with team("a") as (session, _):
        session.register_operation("first", first)
        session.register_operation("step", step)
        flow = Flow("chain")
        previous = flow.add("a", Call("first"), name="n0")
        for index in range(1, CHAIN):
            previous = flow.add("a", command(index), depends_on=previous, name=f"n{index}")
        result = await session.flow(flow)
    assert result.ok and result[f"n{CHAIN - 1}"] == CHAIN - 1
    assert len(kept) == CHAIN - 1
    # A handful of holders (the run's state, the result), not one per kept mapping.
    assert sys.getrefcount(marker) < 20
    last = kept[-1]
    assert len(last) == CHAIN - 1 and last["n0"] is marker  # every node above, direct or not
    assert list(last)[:3] == [f"n{CHAIN - 2}", f"n{CHAIN - 3}", f"n{CHAIN - 4}"]
    assert dict(last) == {f"n{i}": (marker if i == 0 else i) for i in range(CHAIN - 1)}
    assert "n0" in kept[0] and f"n{CHAIN - 1}" not in last  # not itself, nothing below
    assert kept[5].get("no such node") is None and 42 not in kept[6]
    with pytest.raises(KeyError):
        last[f"n{CHAIN - 1}"]
    with pytest.raises(TypeError):
        last["n0"] = "changed"  # type: ignore[index]


FAN_OUT = 2_000


async def test_a_wide_fan_out_on_one_branch_keeps_its_send_order_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2,000 nodes on one branch with no concurrency bound all wait in that branch's
    send order at once. Each node leaving it must not search the queue (which made
    the fan-out O(n²): 40,000 nodes took 28 s, against 6.6 s now): counted here as
    the comparisons of node states the run makes, about two million for a search
    per node, none for the marked queue. The nodes are still sent, and served, in
    the order they started."""
    compared = 0

    def counting_eq(self: NodeState, other: object) -> bool:
        nonlocal compared
        compared += 1
        return self is other

    monkeypatch.setattr(NodeState, "__eq__", counting_eq)
    served: list[str] = []

    async def step(branch: Branch, label: str = "") -> str:
        served.append(label)
        return label

    async with team("a") as (session, _):
        session.register_operation("step", step)
        flow = Flow("fan")
        root = flow.add("a", Call("step", label="root"), name="root")
        for index in range(FAN_OUT):
            flow.add("a", Call("step", label=f"n{index}"), depends_on=root, name=f"n{index}")
        result = await session.flow(flow, max_concurrent=10**18)
    assert result.ok and len(result) == FAN_OUT + 1
    assert served == ["root", *(f"n{index}" for index in range(FAN_OUT))]
    assert compared < FAN_OUT


async def test_nodes_leaving_one_branch_s_send_order_out_of_turn_keep_the_rest_in_order() -> None:
    """On one branch: ``slow``'s command function waits while the nodes after it fail
    (their functions raise) or wait behind it. Those that fail leave the send order
    from its middle, and the rest are still sent in the order they started, each
    once: ``slow`` first, then ``next``, then ``last``."""
    release = trio.Event()
    served: list[str] = []

    async def step(branch: Branch, label: str = "") -> str:
        served.append(label)
        return label

    async def slow(up: Mapping[str, Any]) -> Call:
        await release.wait()
        return Call("step", label="slow")

    def broken(up: Mapping[str, Any]) -> Call:
        raise ValueError("no command")

    async def release_once_the_rest_wait() -> None:
        await trio.testing.wait_all_tasks_blocked()
        release.set()

    async with team("a") as (session, _):
        session.register_operation("step", step)
        flow = Flow("order")
        root = flow.add("a", Call("step", label="root"), name="root")
        flow.add("a", slow, depends_on=root, name="slow")
        flow.add("a", broken, depends_on=root, name="broken-1")
        flow.add("a", Call("step", label="next"), depends_on=root, name="next")
        flow.add("a", broken, depends_on=root, name="broken-2")
        flow.add("a", Call("step", label="last"), depends_on=root, name="last")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(release_once_the_rest_wait)
            result = await session.flow(flow, max_concurrent=10)
    assert served == ["root", "slow", "next", "last"]
    assert result.outcomes == {
        "root": "completed",
        "slow": "completed",
        "broken-1": "failed",
        "next": "completed",
        "broken-2": "failed",
        "last": "completed",
    }


async def test_a_stream_consumer_that_reads_nothing_until_the_end_finds_two_signals_per_node() -> (
    None
):
    """A ``flow_stream`` consumer that reads nothing while 500 nodes run: the run is not
    held back by it (it has finished before the first read), and what waited for the
    consumer is each node's two signals, no more (the buffer is bounded by the graph,
    about 170 bytes a signal), none dropped, in the order the observer saw them."""
    size = 500
    observed: list[Signal] = []
    ended = trio.Event()

    def on_signal(signal: Signal) -> None:
        observed.append(signal)
        if len(observed) == 2 * (size + 1):  # every node's NodeStarted and terminal
            ended.set()

    async def step(branch: Branch) -> str:
        return "ok"

    async with team("a", "b", "c") as (session, _):
        session.register_operation("step", step)
        session.observe(NodeSignal, handler=on_signal)
        flow = Flow("wide")
        root = flow.add("a", Call("step"), name="root")
        for index in range(size):
            flow.add("abc"[index % 3], Call("step"), depends_on=root, name=f"n{index}")
        async with session.flow_stream(flow, max_concurrent=5) as events:
            await ended.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert events.run.finished  # it did not wait for the consumer
            read = [event async for event in events]
    assert read == observed
    assert events.result is not None and events.result.ok
    kinds = collections.Counter((type(s).__name__, s.node) for s in read)
    assert set(kinds.values()) == {1} and len(kinds) == 2 * (size + 1)
