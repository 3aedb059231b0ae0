"""Issue 36, item 5: deep and wide flows settle without recursion.

A node that does not complete skips its dependents, theirs, and so on down the
graph: 2,000 levels of it must end in a FlowResult (or Cancelled), never in a
RecursionError. Only the first node of each chain runs a turn, so these stay fast.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio
import trio.testing

from pride import Flow, NodeSkipped, Signal
from tests.flows.support import boom, team, work

DEPTH = 2_000
assert sys.getrecursionlimit() < DEPTH  # deeper than any recursion could go


def chain(first: Any, *, when: Any = None) -> Flow:
    """``n0 -> n1 -> ... -> n1999``: ``first`` is n0's command, every other node works."""
    flow = Flow()
    previous = flow.add("a", first, name="n0", when=when)
    for index in range(1, DEPTH):
        previous = flow.add("a", work(f"n{index}"), depends_on=previous, name=f"n{index}")
    return flow


def _skipped_down_the_chain(result: Any, first: str) -> None:
    assert result.outcomes["n0"] == first
    assert all(result.outcomes[f"n{index}"] == "skipped" for index in range(1, DEPTH))


@pytest.mark.parametrize("fail_fast", [False, True])
async def test_issue36_a_failing_first_node_skips_a_deep_chain(
    autojump_clock: trio.testing.MockClock, fail_fast: bool
) -> None:
    """The first node fails: every node below it is skipped, with or without fail_fast."""
    skipped: list[Signal] = []
    async with team("a") as (session, overlap):
        session.observe(NodeSkipped, handler=skipped.append)
        result = await session.flow(chain(boom("n0")), fail_fast=fail_fast)
    _skipped_down_the_chain(result, "failed")
    assert overlap.started == ["n0"]
    assert len(skipped) == DEPTH - 1  # one signal per skipped node
    assert result.nodes["n1"].reason == "its dependency 'n0' failed" or fail_fast


async def test_issue36_a_first_node_skipped_by_when_skips_a_deep_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first node's condition is false: the whole chain below it is skipped."""
    async with team("a") as (session, overlap):
        result = await session.flow(chain(work("n0"), when=lambda upstream: False))
    _skipped_down_the_chain(result, "skipped")
    assert overlap.started == []


async def test_issue36_cancelling_a_deep_chain_skips_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The caller cancels while the first node runs: it is cancelled, the rest skipped,
    and Cancelled reaches the caller."""
    skipped: list[Signal] = []
    async with team("a") as (session, overlap):
        session.observe(NodeSkipped, handler=skipped.append)
        with trio.move_on_after(0.5) as scope:
            await session.flow(chain(work("n0", seconds=10.0)))
    assert scope.cancelled_caught
    assert overlap.started == ["n0"] and overlap.finished == []
    assert len(skipped) == DEPTH - 1


@pytest.mark.parametrize("cancel", [False, True])
async def test_issue36_a_hung_observer_does_not_hold_a_skipped_cascade_per_node(
    autojump_clock: trio.testing.MockClock, cancel: bool
) -> None:
    """An async NodeSkipped subscriber that never returns: each delivery is bounded,
    and the skips of one cascade share one FINALIZE_GRACE, so 49 skipped nodes cost
    one grace period, not 49 (with the caller cancelling, too: its cancellation
    waits for that shielded announcement)."""
    from pride.actors.turn import FINALIZE_GRACE

    seen: list[Signal] = []

    async def hang(signal: Signal) -> None:
        seen.append(signal)
        await trio.sleep_forever()

    flow = Flow()
    previous = flow.add("a", boom("n0") if not cancel else work("n0", seconds=10.0), name="n0")
    for index in range(1, 50):
        previous = flow.add("a", work(f"n{index}"), depends_on=previous, name=f"n{index}")
    async with team("a") as (session, _):
        session.observe(NodeSkipped, handler=hang)
        start = trio.current_time()
        with trio.move_on_after(0.5 if cancel else 1_000.0):
            result = await session.flow(flow)
        elapsed = trio.current_time() - start
    assert len(seen) == 49  # every subscriber was still handed its signal
    assert elapsed <= (0.5 if cancel else 0.0) + FINALIZE_GRACE + 1.0
    if not cancel:
        assert result.outcomes["n49"] == "skipped"
