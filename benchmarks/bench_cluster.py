"""Remote branches on a local Ray cluster, against a bare Ray actor call in the same run.

Targets (issue 16), figures from one process and one Ray cluster:

* a remote ``ask(ref, Chat)`` (a whole turn on a host) over a bare Ray actor
  call (``ray.get(actor.ping.remote(b"x"))``, no pride at all): at most 1.5x
  at p50;
* at least 10,000 messages/s per host pair with 1,000 concurrent senders
  (batched): a message is an envelope delivered, served in mailbox order and
  answered (``Act`` with no calls: the mailbox round trip without a model);
  remote ``Chat`` turns/s at the same concurrency are printed beside it;
* caller cancel to remote cancellation, p50 at most 20 ms: from
  ``reply.cancel()`` until the caller's observer holds the turn's terminal
  ``RunFailed`` (so the figure is the whole round trip back, an upper bound);
* memory per host process (PSS), reported.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from typing import Any

import trio

import pride
from benchmarks._cluster_cpu import CpuSnapshot, cpu_rows
from benchmarks._cluster_floor import AsyncEcho, SyncEcho, TrioEcho, wait_trio
from benchmarks._harness import CollectorTime, figure_line, ratio_line
from pride import Act, Call, Chat, RunFailed, RunStart, Signal
from pride.cluster import Cluster

FACTORY = "benchmarks._cluster_branches:bench"


_LATENCY_ROWS = {
    "threaded": "bare Ray call, plain actor (ray.get)",
    "bare": "bare Ray call, async actor (ray.get)",
    "bare_trio": "  the same, waited on from trio",
    "floor": "design floor: trio echo host, trio caller",
    "ask": "remote ask(ref, Chat): a turn on a host",
}
"""The latency rows, in the order they print (see `benchmarks._cluster_floor`)."""


def _p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def _bare_calls(ray: Any, actor: Any, n: int) -> list[float]:
    """Calls waited on with ``ray.get`` in a thread: Ray's own round trip."""

    def run() -> list[float]:
        samples = []
        for _ in range(n):
            start = time.perf_counter()
            ray.get(actor.ping.remote(b"x"))
            samples.append(time.perf_counter() - start)
        return samples

    return await trio.to_thread.run_sync(run)


async def _trio_calls(actor: Any, n: int) -> list[float]:
    """Calls waited on from trio, as a trio caller must (`_cluster_floor.wait_trio`)."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await wait_trio(actor.ping.remote(b"x"))
        samples.append(time.perf_counter() - start)
    return samples


async def _asks(ref: Any, n: int) -> list[float]:
    samples = []
    command = Chat("hi")
    for _ in range(n):
        start = time.perf_counter()
        await pride.ask(ref, command)
        samples.append(time.perf_counter() - start)
    return samples


async def _throughput(ref: Any, command: Any, senders: int, per_sender: int) -> float:
    async def sender() -> None:
        for _ in range(per_sender):
            await pride.ask(ref, command)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(senders):
            nursery.start_soon(sender)
    return senders * per_sender / (time.perf_counter() - start)


async def _floor_throughput(floor: Any, batch: int, messages: int, in_flight: int = 4) -> float:
    """Messages/s through the design floor in batches of ``batch``, ``in_flight`` calls
    at a time (as a caller's link keeps at most four deliveries under way)."""
    payload = json.dumps(
        [{"k": "send", "id": f"{n:032x}", "b": "bench", "mode": "ask"} for n in range(batch)]
    ).encode()
    calls = max(in_flight, messages // batch)

    async def caller(n: int) -> None:
        for _ in range(n):
            await wait_trio(floor.echo_batch.remote(payload))

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(in_flight):
            nursery.start_soon(caller, calls // in_flight)
    return calls // in_flight * in_flight * batch / (time.perf_counter() - start)


def _ray_calls(cluster: Cluster, host: str) -> int:
    """Ray calls this process made to ``host`` so far (deliveries and polls)."""
    return cluster._directory.links[host].calls


async def _cancel_latencies(cluster: Cluster, ref: Any, n: int) -> list[float]:
    ended: dict[Any, float] = {}
    events: dict[Any, trio.Event] = {}
    start_event = trio.Event()
    last_start: list[Any] = []

    def seen(signal: Signal) -> None:
        if signal.branch_name != ref.name:
            return
        if isinstance(signal, RunStart):
            last_start.append(signal.turn_id)
            start_event.set()
        elif isinstance(signal, RunFailed) and signal.turn_id in events:
            ended[signal.turn_id] = time.perf_counter()
            events[signal.turn_id].set()

    cluster.observe((RunStart, RunFailed), handler=seen)
    samples = []
    for _ in range(n):
        start_event = trio.Event()
        last_start.clear()
        reply = await pride.send(ref, Call("block"))
        await start_event.wait()
        turn_id = last_start[0]
        events[turn_id] = trio.Event()
        cancelled_at = time.perf_counter()
        reply.cancel()
        await events[turn_id].wait()
        samples.append(ended[turn_id] - cancelled_at)
    cluster.unobserve(seen)
    return samples


def _pss_mib(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).memory_full_info().pss) / 2**20


async def _main(ray: Any, smoke: bool) -> None:
    storage = tempfile.mkdtemp(prefix="pride-bench-cluster-")
    latency_n = 30 if smoke else 600
    senders, per_sender = (50, 2) if smoke else (1000, 10)
    cancels = 3 if smoke else 40

    def actor(cls: type, **options: Any) -> Any:
        return ray.remote(num_cpus=0, **options)(cls).remote()

    # The async ones as the host is made (max_concurrency=1000); the plain one as Ray's default.
    bare, floor = actor(AsyncEcho, max_concurrency=1000), actor(TrioEcho, max_concurrency=1000)
    threaded = actor(SyncEcho)
    for yardstick in (bare, floor, threaded):
        await _bare_calls(ray, yardstick, 20)
    async with Cluster(namespace="pride-bench", storage=storage) as cluster:
        ref = await cluster.spawn(FACTORY, name="bench", host="bench")
        await _asks(ref, 20)
        # Interleaved rounds: a change in machine load lands on every row alike.
        rows: dict[str, list[float]] = {name: [] for name in _LATENCY_ROWS}
        rounds = 6
        for _ in range(rounds):
            n = latency_n // rounds
            rows["threaded"] += await _bare_calls(ray, threaded, n)
            rows["bare"] += await _bare_calls(ray, bare, n)
            rows["bare_trio"] += await _trio_calls(bare, n)
            rows["floor"] += await _trio_calls(floor, n)
            rows["ask"] += await _asks(ref, n)
        p50 = {name: _p50(samples) for name, samples in rows.items()}
        for name, label in _LATENCY_ROWS.items():
            print(f"{label:<52} p50 {p50[name] * 1e3:8.3f} ms")
        ratio = p50["ask"] / p50["bare"]
        print(ratio_line("remote ask / bare Ray call, p50", ratio, "<= 1.5x", ratio <= 1.5))
        print(
            f"  = Ray's async actor {p50['bare'] / p50['threaded']:.2f}x a plain one (info)"
            f"; the design floor {p50['floor'] / p50['bare']:.2f}x the bare call"
            f" (its trio caller {p50['bare_trio'] / p50['bare']:.2f}x)"
            f"; pride's work {p50['ask'] / p50['floor']:.2f}x the floor"
        )

        pid = await pride.ask(ref, Call("pid"))
        calls = _ray_calls(cluster, "bench")
        await _asks(ref, 100)
        calls = _ray_calls(cluster, "bench") - calls
        print(f"  Ray calls per ask, one ask at a time: {calls / 100:.2f} (the poll included)")
        await _throughput(ref, Act(()), senders // 5, 2)
        threads = await pride.ask(ref, Call("threads"))
        calls, polls = _ray_calls(cluster, "bench"), cluster._directory.links["bench"].polls
        collected = await pride.ask(ref, Call("gc_spent"))
        before = CpuSnapshot.take(pid)
        with CollectorTime() as collector:
            messages = await _throughput(ref, Act(()), senders, per_sender)
        after_cpu = CpuSnapshot.take(pid)
        count = senders * per_sender
        calls = _ray_calls(cluster, "bench") - calls
        polls = cluster._directory.links["bench"].polls - polls
        per_call = count / max(1, calls)
        print(
            f"  CPU per Act message at {senders} senders ({per_call:.0f} messages per Ray call:"
            f" {calls - polls} deliveries, {polls} polls; two cores carry 10,000/s at <= 200 us"
            " in all):"
        )
        for place, us in cpu_rows(before, after_cpu, threads, count):
            print(f"    {place:<46} {us:6.1f} us")
        after = await pride.ask(ref, Call("gc_spent"))
        runs = "/".join(str(int(b - a)) for a, b in zip(collected[1:], after[1:], strict=True))
        gc_us = (after[0] - collected[0]) / count * 1e6
        print(
            f"  of which the host's garbage collector: {gc_us:.1f} us per message"
            f" ({runs} collections of generations 0/1/2)"
        )
        # The caller's trio thread: pride's side and Ray's submission calls.
        print(
            f"  of which the caller's garbage collector: {collector.seconds / count * 1e6:.1f} us "
            f"({'/'.join(str(n) for n in collector.collections)} collections of "
            "generations 0/1/2)"
        )
        batch = max(1, round(per_call))
        floor_rate = await _floor_throughput(floor, batch, count)
        print(
            f"  design floor at {batch} messages per Ray call, 4 calls under way:"
            f" {floor_rate:,.0f} messages/s; pride's Act messages {messages / floor_rate:.2f}x that"
        )
        turns = await _throughput(ref, Chat("hi"), senders, per_sender)
        print(f"  {senders} concurrent senders: {turns:,.0f} remote Chat turns/s (info)")
        print(
            figure_line(
                f"messages/s per host pair, {senders} concurrent senders",
                messages,
                "/s",
                ">= 10000",
                messages >= 10_000,
            )
        )

        latencies = await _cancel_latencies(cluster, ref, cancels)
        cancel_p50 = _p50(latencies) * 1e3
        print(
            figure_line(
                "caller cancel -> remote RunFailed seen, p50",
                cancel_p50,
                "ms",
                "<= 20",
                cancel_p50 <= 20,
            )
        )
        print(f"  host process memory: {_pss_mib(pid):.1f} MiB PSS (pid {pid}, one branch)")


def main(smoke: bool) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    print(f"  ray.init: {time.perf_counter() - started:.1f} s")
    try:
        trio.run(_main, ray, smoke)
    finally:
        ray.shutdown()
