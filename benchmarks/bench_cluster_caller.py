"""The caller's side of remote asks alone: an in-process host stub, no Ray, no turn.

The cluster benchmark measures whole processes, where Ray's own per-call work
and the host's turn dwarf what the caller's pride code costs, and the load of
the machine moves every figure. Here the caller's link talks to
`benchmarks._cluster_stub.StubHost`, which answers each delivery on a thread
of its own (as Ray completes a future), so the caller's trio thread spends
only pride's caller work: making the envelope, encoding and flushing the
batch, applying the answers and waking the askers.

Compared in the same run with the floor every ask pays whatever its target:
the send API's own work (a `Reply`, its caller parked and woken) against a
local target that answers each scheduling round's envelopes in one pass.
Printed: CPU of the trio thread per ask at 1,000 concurrent senders, the
garbage collector's share of it, the objects the collector tracks per ask in
flight, and the latency of one ask at a time (info: the stub's thread hops
are in it).
"""

from __future__ import annotations

import gc
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing

import pride
from benchmarks._cluster_stub import StubHost, stub_ref
from benchmarks._harness import CollectorTime
from pride import Act

_ANSWER = "ok"


class _Answerer:
    """A local target answering every envelope of a scheduling round in one pass."""

    name = "floor"

    def __init__(self) -> None:
        self.id = uuid.uuid4()
        self.holding = False  # keep envelopes unanswered (to count what they keep)
        self._queued: list[Any] = []
        self._kick = trio.Event()

    def hold(self, holding: bool) -> None:
        self.holding = holding
        self._kick.set()

    async def deliver(self, reply: Any) -> None:
        self.deliver_nowait(reply)

    def deliver_nowait(self, reply: Any) -> None:
        self._queued.append(reply)
        self._kick.set()

    async def serve(self) -> None:
        while True:
            await self._kick.wait()
            self._kick = trio.Event()
            if self.holding:
                continue
            queued, self._queued = self._queued, []
            for reply in queued:
                reply.succeed(_ANSWER)


async def _concurrent(target: Any, senders: int, per_sender: int) -> tuple[float, CollectorTime]:
    """Trio-thread CPU seconds per ask, ``senders`` tasks asking ``per_sender`` times."""
    command = Act(())

    async def sender() -> None:
        for _ in range(per_sender):
            await pride.ask(target, command)

    started = time.thread_time()
    with CollectorTime() as collector:
        async with trio.open_nursery() as nursery:
            for _ in range(senders):
                nursery.start_soon(sender)
    return (time.thread_time() - started) / (senders * per_sender), collector


async def _one_at_a_time(target: Any, n: int) -> float:
    command = Act(())
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        await pride.ask(target, command)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def _tracked_per_ask(target: Any, hold: Callable[[bool], None], n: int) -> float:
    """Objects the collector tracks per ask in flight, its task's own not counted."""
    command = Act(())

    async def idle() -> None:
        await trio.sleep_forever()

    async def count(start: Callable[[], Awaitable[Any]]) -> int:
        async with trio.open_nursery() as nursery:
            await trio.testing.wait_all_tasks_blocked()
            gc.collect()
            gc.disable()
            try:
                before = gc.get_count()[0]
                for _ in range(n):
                    nursery.start_soon(start)
                await trio.testing.wait_all_tasks_blocked()
                counted = gc.get_count()[0] - before
            finally:
                gc.enable()
                hold(False)
                nursery.cancel_scope.cancel()
        return counted

    async def asks() -> None:
        await pride.ask(target, command)

    hold(True)
    asking = await count(asks)
    idling = await count(idle)
    return (asking - idling) / n


async def _main(smoke: bool) -> None:
    senders, per_sender = (50, 2) if smoke else (1000, 10)
    rounds = 1 if smoke else 5
    latency_n = 50 if smoke else 2000
    host = StubHost(turns=False)
    try:
        async with trio.open_nursery() as nursery:
            floor = _Answerer()
            nursery.start_soon(floor.serve)
            link, ref = stub_ref(host, nursery.start_soon)
            await nursery.start(link.run)
            for target in (floor, ref):  # warm up: imports, codec converters
                await _concurrent(target, senders // 5, 2)
            per_ask: dict[str, list[float]] = {"floor": [], "remote": []}
            gc_seconds = 0.0
            collections = [0, 0, 0]
            stub_cpu = host.cpu
            for _ in range(rounds):  # interleaved: a change of load lands on both alike
                cpu, _ = await _concurrent(floor, senders, per_sender)
                per_ask["floor"].append(cpu)
                cpu, collector = await _concurrent(ref, senders, per_sender)
                per_ask["remote"].append(cpu)
                gc_seconds += collector.seconds
                ran = zip(collections, collector.collections, strict=True)
                collections = [a + b for a, b in ran]
            count = rounds * senders * per_sender
            stub_us = (host.cpu - stub_cpu) / count * 1e6
            floor_us = statistics.median(per_ask["floor"]) * 1e6
            remote_us = statistics.median(per_ask["remote"]) * 1e6
            print(
                f"floor: ask(local target, Act), {senders} senders     "
                f"{floor_us:6.1f} us of CPU per ask (trio thread)"
            )
            print(
                f"ask(RemoteBranchRef to a stub host), {senders} senders"
                f" {remote_us:6.1f} us of CPU per ask (trio thread)"
            )
            ratio = remote_us / floor_us
            print(f"  remote caller's CPU / the send API's floor: {ratio:.2f}x (info)")
            print(
                f"  of which garbage collection {gc_seconds / count * 1e6:.1f} us per ask"
                f" ({'/'.join(str(n) for n in collections)} collections of generations 0/1/2"
                f" in {count:,} asks); the stub's own thread {stub_us:.1f} us per ask (excluded)"
            )

            held = 100 if smoke else 1000
            tracked = await _tracked_per_ask(ref, host.hold, held)
            floor_tracked = await _tracked_per_ask(floor, floor.hold, held)
            print(
                f"  objects the collector tracks per ask in flight: remote {tracked:.1f},"
                f" the floor's {floor_tracked:.1f} (the asking task's own excluded)"
            )
            floor_p50 = await _one_at_a_time(floor, latency_n)
            remote_p50 = await _one_at_a_time(ref, latency_n)
            print(
                f"  one ask at a time, p50: remote {remote_p50 * 1e6:.0f} us (two thread hops"
                f" to the stub and back in it), the floor {floor_p50 * 1e6:.0f} us (info)"
            )
            nursery.cancel_scope.cancel()
    finally:
        host.close()


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
