"""Flow overhead: a 100-node fan-out/fan-in flow against the same work issued by hand.

Target (issue 21): ``session.flow`` of a fan-out/fan-in graph (one root, 98
nodes after it, one node after all of them: 100 nodes, each one ``Chat`` turn
of its own branch on the scripted model) costs at most 1.2x the same turns
issued by hand: ``ask`` the root, the 98 in a nursery, then the last. Both
run with the same concurrency (the flow's ``max_concurrent`` at its width);
a second pair at the default ``max_concurrent=5`` against a hand-written
``CapacityLimiter(5)`` is printed for information.

What the flow adds per node is its bookkeeping: one task, the send order,
``NodeStarted`` and ``NodeCompleted`` through the session's observer, and the
flow's usage account every node's envelope carries.
"""

from __future__ import annotations

import trio

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from benchmarks._workloads import scripted
from pride import Branch, Chat, Flow, Session, ask

NODES = 100


def _fan_flow(branches: list[Branch]) -> Flow:
    flow = Flow("fan")
    root = flow.add(branches[0], Chat("root"), name="root")
    middle = [
        flow.add(branches[i], Chat(f"part {i}"), depends_on=root, name=f"part-{i}")
        for i in range(1, NODES - 1)
    ]
    flow.add(branches[NODES - 1], Chat("join"), depends_on=middle, name="join")
    return flow


async def _by_hand(branches: list[Branch], limit: int | None) -> None:
    await ask(branches[0], Chat("root"))
    limiter = trio.CapacityLimiter(limit) if limit is not None else None

    async def part(i: int) -> None:
        if limiter is None:
            await ask(branches[i], Chat(f"part {i}"))
            return
        async with limiter:
            await ask(branches[i], Chat(f"part {i}"))

    async with trio.open_nursery() as nursery:
        for i in range(1, NODES - 1):
            nursery.start_soon(part, i)
    await ask(branches[NODES - 1], Chat("join"))


async def _main(smoke: bool) -> None:
    repeats = 3 if smoke else 15
    runs = 2 if smoke else 20  # flows per sample
    model = scripted()
    async with Session(name="bench") as session:
        branches = [await session.spawn(Branch(chat_model=model)) for _ in range(NODES)]
        flow = _fan_flow(branches)

        def flows(width: int) -> object:
            async def batch(ops: int) -> None:
                for _ in range(ops // NODES):
                    result = await session.flow(flow, max_concurrent=width)
                    assert result.ok

            return batch

        def hand(limit: int | None) -> object:
            async def batch(ops: int) -> None:
                for _ in range(ops // NODES):
                    await _by_hand(branches, limit)

            return batch

        names = {
            "hand": "by hand: ask + nursery (per node)",
            "flow": f"session.flow, max_concurrent={NODES} (per node)",
            "hand5": "by hand: nursery + CapacityLimiter(5) (per node)",
            "flow5": "session.flow, max_concurrent=5 (per node)",
        }
        stats = await measure_interleaved(
            {
                names["hand"]: (hand(None), NODES * runs),  # type: ignore[dict-item]
                names["flow"]: (flows(NODES), NODES * runs),  # type: ignore[dict-item]
                names["hand5"]: (hand(5), NODES * runs),  # type: ignore[dict-item]
                names["flow5"]: (flows(5), NODES * runs),  # type: ignore[dict-item]
            },
            repeats=repeats,
        )
    _report(stats[names["flow"]], stats[names["hand"]], targeted=True)
    _report(stats[names["flow5"]], stats[names["hand5"]], targeted=False)


def _report(flow: Stats, hand: Stats, *, targeted: bool) -> None:
    print(hand.line())
    print(flow.line())
    ratio = flow.median / hand.median
    extra = (flow.median - hand.median) * 1e6
    print(f"  flow overhead per node: {extra:.1f} us")
    label = "flow / by hand, 100-node fan-out/fan-in" + ("" if targeted else " (cap 5)")
    print(
        ratio_line(label, ratio, "<= 1.2x" if targeted else "(info)", ratio <= 1.2 or not targeted)
    )


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
