"""Turn overhead and fan-out: pride's ask against trio's own floor, in one run.

Targets (issue 4 / issue 9 / issue 18 / issue 15):
* ``ask(branch, Chat(...))`` on the scripted model, empty history, costs at most
  4x a bare memory-channel request/reply round trip;
* 1,000 branches running turns concurrently sustain at least 80% of the
  single-branch turn rate (printed beside trio's own fan-out, 1,000 channel
  request/reply pairs against one, and the garbage collector's time in each:
  docs/benchmarks.md, "Fan-out against its floor");
* with ``pride.telemetry`` installed but no OpenTelemetry provider configured,
  a turn costs at most 1.05x the turn with tracing off (the in-memory
  exporter's cost is printed for information);
* a session member costs what a standalone branch costs: its turn with
  nothing subscribed at most 1.1x the standalone turn, with one observer of
  ``RunEnd`` at most 1.2x; 1,000 members of one session running turns
  concurrently sustain at least 80% of the single (standalone) branch's rate
  (printed with its two factors: 1,000 branches without a session against the
  single branch, and the members against those);
  an idle member that ran one turn holds at most 8 KiB (measured in a fresh
  process, `benchmarks._memory_probe`; its ``Chat`` turn records no message);
* spawning into a session costs the same per member at 10,000 members as at
  1,000 (the rate at 10,000 at least 0.8x the rate at 1,000): a spawn looks
  names up in an index instead of scanning the members. The garbage
  collector's time per spawn is printed beside it, and the ratio without it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable

import trio

from benchmarks._floor import channel_fan_out, channel_round_trips
from benchmarks._harness import (
    CollectorTime,
    Stats,
    figure_line,
    measure_interleaved,
    ratio_line,
    run_concurrently,
)
from benchmarks._workloads import fan_out, scripted, turns_on
from benchmarks.bench_memory import probe
from pride import Branch, Chat, RunEnd, Session, Signal, ask


async def _main(smoke: bool) -> None:
    repeats = 2 if smoke else 9
    ops = 200 if smoke else 5000
    single = turns_on(Branch(chat_model=scripted()))
    floor_name = "floor: channel request/reply"
    turn_name = "pride: ask(branch, Chat) empty history"
    fan_sizes = [50] if smoke else [1000, 10000]
    fan_name = "pride: {} branches concurrently (per turn)"
    first_fan = fan_sizes[0]
    floor_fan_name = f"floor: {first_fan} channel pairs concurrently"
    fan_ops = first_fan * (2 if smoke else 10)
    collected: dict[str, list[CollectorTime]] = {"pride": [], "floor": []}
    # The floor, the single-branch turn and the first fan-out alternate, so the
    # two targets compare samples taken side by side; the floor's own fan-out
    # with them, so the fan-out's ratio has the floor's beside it.
    stats = await measure_interleaved(
        {
            floor_name: (channel_round_trips, ops),
            turn_name: (single, ops),
            fan_name.format(first_fan): (fan_out(first_fan, collected["pride"]), fan_ops),
            floor_fan_name: (channel_fan_out(first_fan, collected["floor"]), fan_ops),
        },
        repeats=repeats,
    )
    floor, turn = stats[floor_name], stats[turn_name]
    print(floor.line())
    print(turn.line())
    ratio = turn.median / floor.median
    print(ratio_line("turn / floor round trip", ratio, "<= 4x", ratio <= 4.0))
    _fan_line(stats[fan_name.format(first_fan)], turn, first_fan)
    _floor_fan_lines(
        stats[floor_fan_name],
        floor,
        first_fan,
        turn.median / stats[fan_name.format(first_fan)].median,
    )
    _collector_lines(collected, fan_ops, stats[fan_name.format(first_fan)], turn, first_fan)

    await _tracing(smoke)
    await _sessions(smoke)
    await _spawns(smoke)

    for size in fan_sizes[1:]:  # information only: slower, fewer repetitions
        paired = await measure_interleaved(
            {turn_name: (single, ops), fan_name.format(size): (fan_out(size), size * 10)},
            repeats=3,
        )
        _fan_line(paired[fan_name.format(size)], paired[turn_name], size)


def _floor_fan_lines(fan: Stats, floor: Stats, size: int, pride_ratio: float) -> None:
    """The floor's fan-out: how trio itself (and CPython under it) scales to ``size``
    concurrent request/reply pairs, the ratio the fan-out target is up against."""
    print(fan.line())
    rate = floor.median / fan.median
    print(ratio_line(f"  floor: {size}-pair rate / one pair's rate", rate, "(info)", True))
    print(
        ratio_line(
            f"  pride's {size}-branch ratio / the floor's", pride_ratio / rate, "(info)", True
        )
    )


def _collector_lines(
    collected: dict[str, list[CollectorTime]], ops: int, fan: Stats, turn: Stats, size: int
) -> None:
    """The garbage collector's share of each fan-out, and pride's fan-out ratio without
    it. With thousands of tasks alive, objects still in flight at a young collection
    survive it, and the older generations' collections walk them (and every live
    branch); one branch's sequential turns free everything they make as they go."""
    share: dict[str, float] = {}
    for side, runs in collected.items():
        share[side] = statistics.median(c.seconds for c in runs) / ops
        full = statistics.median(c.collections[2] for c in runs)
        young = statistics.median(c.collections[0] + c.collections[1] for c in runs)
        print(
            f"    {side}: garbage collector {share[side] * 1e6:6.2f} us per round trip of the"
            f" fan-out, {young:g} young and {full:g} full collections per batch"
        )
    rate = turn.median / (fan.median - share["pride"])
    label = f"  {size}-branch rate / single, the collector's time left out"
    print(ratio_line(label, rate, "(info)", True))


async def _tracing(smoke: bool) -> None:
    """The turn with tracing off, installed but unconfigured, and recording in memory."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        import pride.telemetry
    except ImportError:
        print("  tracing rows skipped: the otel extra is not installed (pip install 'pride[otel]')")
        return
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    single = turns_on(Branch(chat_model=scripted()))

    # CPU seconds per turn of each mode's samples too: on a shared machine the
    # trio thread's CPU time moves less than the wall clock with other tenants.
    cpu: dict[Callable[[], object], list[float]] = {}

    def mode(setup: Callable[[], object]) -> Callable[[int], Awaitable[None]]:
        async def batch(ops: int) -> None:
            setup()
            started = time.thread_time()
            try:
                await single(ops)
            finally:
                cpu.setdefault(setup, []).append((time.thread_time() - started) / ops)
                pride.telemetry.uninstrument()
                exporter.clear()

        return batch

    off = "pride: turn, tracing off"
    unconfigured = "pride: turn, otel installed, no provider"
    memory = "pride: turn, in-memory exporter"
    stats = await measure_interleaved(
        {
            off: (mode(pride.telemetry.uninstrument), 200 if smoke else 3000),
            unconfigured: (mode(pride.telemetry.instrument), 200 if smoke else 3000),
            memory: (mode(lambda: pride.telemetry.instrument(provider)), 100 if smoke else 1000),
        },
        repeats=2 if smoke else 15,
    )
    for name in (off, unconfigured, memory):
        print(stats[name].line())
    ratio = stats[unconfigured].median / stats[off].median
    print(ratio_line("otel installed, no provider / tracing off", ratio, "<= 1.05x", ratio <= 1.05))
    off_cpu, unconfigured_cpu = (
        statistics.median(cpu[setup])
        for setup in (pride.telemetry.uninstrument, pride.telemetry.instrument)
    )
    print(
        f"    event-loop CPU per turn: off {off_cpu * 1e6:.1f} us, no provider "
        f"{unconfigured_cpu * 1e6:.1f} us"
    )
    ratio = unconfigured_cpu / off_cpu
    print(ratio_line("  the same in event-loop CPU", ratio, "(info)", True))
    recording = stats[memory].median / stats[off].median
    print(ratio_line("in-memory exporter / tracing off", recording, "(info)", True))


def member_turns(*, observed: bool) -> Callable[[int], Awaitable[float]]:
    """``n`` sequential ``ask(member, Chat("hi"))`` turns of a branch spawned into a
    Session; with ``observed``, one synchronous observer of ``RunEnd`` is subscribed.
    Starting and stopping the session is setup: only the turns are timed."""

    def seen(signal: Signal) -> None:
        pass

    async def run(n: int) -> float:
        command = Chat("hi")
        async with Session() as session:
            if observed:
                session.observe(RunEnd, handler=seen)
            member = await session.spawn(Branch(chat_model=scripted()))
            started = time.perf_counter()
            for _ in range(n):
                await ask(member, command)
            return time.perf_counter() - started

    return run


def session_fan_out(members: int) -> Callable[[int], Awaitable[float]]:
    """About ``total`` turns spread over ``members`` members of one Session, running
    concurrently; the seconds per turn of the concurrent phase only."""

    async def run(total: int) -> float:
        per_member = max(1, total // members)
        model = scripted()
        async with Session() as session:
            branches = [
                await session.spawn(Branch(chat_model=model, name=f"member-{index}"))
                for index in range(members)
            ]

            async def worker(branch: Branch) -> None:
                command = Chat("hi")
                for _ in range(per_member):
                    await ask(branch, command)

            elapsed = await run_concurrently(worker, branches)
        return elapsed * total / (per_member * members)

    return run


async def _sessions(smoke: bool) -> None:
    """Session members against a standalone branch, samples alternating."""
    ops = 200 if smoke else 3000
    size = 50 if smoke else 1000
    standalone = "pride: turn, standalone branch"
    member = "pride: turn, member, nothing subscribed"
    observed = "pride: turn, member, RunEnd observer"
    fan = f"pride: {size} members of a session (per turn)"
    # The same concurrency without a session: what the members' rate would be if
    # membership cost nothing (the first section's fan-out, sampled beside these).
    bare = f"pride: {size} branches, no session (per turn)"
    turns = size * (2 if smoke else 10)
    stats = await measure_interleaved(
        {
            standalone: (turns_on(Branch(chat_model=scripted())), ops),
            member: (member_turns(observed=False), ops),
            observed: (member_turns(observed=True), ops),
            fan: (session_fan_out(size), turns),
            bare: (fan_out(size), turns),
        },
        repeats=2 if smoke else 15,
    )
    for name in (standalone, member, observed, fan, bare):
        print(stats[name].line())
    alone = stats[standalone].median
    ratio = stats[member].median / alone
    print(ratio_line("session member / standalone turn", ratio, "<= 1.1x", ratio <= 1.1))
    ratio = stats[observed].median / alone
    print(ratio_line("member with RunEnd observer / standalone", ratio, "<= 1.2x", ratio <= 1.2))
    rate = alone / stats[fan].median
    print(
        ratio_line(
            f"{size}-member rate / single-branch rate", rate, ">= 0.8x", rate >= 0.8 or smoke
        )
    )
    # The target above is the product of these two: concurrency, then membership.
    rate = alone / stats[bare].median
    print(ratio_line(f"  {size} branches, no session / single-branch rate", rate, "(info)", True))
    rate = stats[bare].median / stats[fan].median
    print(ratio_line(f"  {size}-member rate / {size} branches, no session", rate, "(info)", True))
    count = 200 if smoke else 10_000
    per_member = probe("session", count) / 1024
    print(f"  idle session members: {count:>7}   {per_member:8.2f} KiB each (one Chat turn each)")
    if not smoke:
        print(
            figure_line(
                f"per idle session member ({count})", per_member, "KiB", "<= 8", per_member <= 8
            )
        )


async def spawn_members(members: int, collected: list[CollectorTime] | None = None) -> float:
    """``members`` branches spawned into one Session, one after another; only the
    spawns are timed (making the branches and the session's start and stop are setup).
    With ``collected``, the garbage collector's share of the spawns is appended to it."""
    model = scripted()
    branches = [Branch(chat_model=model, name=f"member-{index}") for index in range(members)]
    async with Session() as session:
        with CollectorTime() as collector:
            started = time.perf_counter()
            for branch in branches:
                await session.spawn(branch)
            elapsed = time.perf_counter() - started
    if collected is not None:
        collected.append(collector)
    return elapsed


async def _spawns(smoke: bool) -> None:
    """Spawn rate at two session sizes, samples alternating: flat, not falling with size.

    The spawn path itself is flat (the same Python calls per spawn at either
    size); what grows is CPython's cyclic collector: a heap of 10,000 members
    crosses the threshold of its full collections, which 1,000 members do not
    reach, so it is printed beside the rate."""
    small, large = (50, 200) if smoke else (1000, 10_000)
    names = {size: f"pride: spawn, session of {size} (per spawn)" for size in (small, large)}
    collected: dict[int, list[CollectorTime]] = {small: [], large: []}

    def sized(size: int) -> Callable[[int], Awaitable[float]]:
        return lambda members: spawn_members(members, collected[size])

    stats = await measure_interleaved(
        {names[size]: (sized(size), size) for size in (small, large)},
        repeats=2 if smoke else 5,
        warmup=0,
    )
    for size in (small, large):
        print(stats[names[size]].line())
        seconds = statistics.median(c.seconds for c in collected[size]) / size
        full = statistics.median(c.collections[2] for c in collected[size])
        print(f"    garbage collector {seconds * 1e6:6.1f} us per spawn, {full:g} full collections")
    rate = stats[names[small]].median / stats[names[large]].median
    print(ratio_line(f"spawn rate at {large} / at {small} members", rate, ">= 0.8x", rate >= 0.8))
    less = {
        size: stats[names[size]].median
        - statistics.median(c.seconds for c in collected[size]) / size
        for size in (small, large)
    }
    outside = less[small] / less[large]
    print(ratio_line("the same, the collector's time left out", outside, "(info)", True))


def _fan_line(fan: Stats, turn: Stats, size: int) -> None:
    print(fan.line())
    rate_ratio = turn.median / fan.median
    targeted = size == 1000
    print(
        ratio_line(
            f"{size}-branch rate / single-branch rate",
            rate_ratio,
            ">= 0.8x" if targeted else "(info)",
            rate_ratio >= 0.8 or not targeted,
        )
    )


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
