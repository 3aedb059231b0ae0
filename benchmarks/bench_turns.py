"""Turn overhead and fan-out: pride's ask against trio's own floor, in one run.

Targets (issue 4 / issue 9 / issue 18):
* ``ask(branch, Chat(...))`` on the scripted model, empty history, costs at most
  4x a bare memory-channel request/reply round trip;
* 1,000 branches running turns concurrently sustain at least 80% of the
  single-branch turn rate;
* with ``pride.telemetry`` installed but no OpenTelemetry provider configured,
  a turn costs at most 1.05x the turn with tracing off (the in-memory
  exporter's cost is printed for information).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from benchmarks._floor import channel_round_trips
from benchmarks._harness import Stats, measure_interleaved, ratio_line
from benchmarks._workloads import fan_out, scripted, turns_on
from pride import Branch


async def _main(smoke: bool) -> None:
    repeats = 2 if smoke else 9
    ops = 200 if smoke else 5000
    single = turns_on(Branch(chat_model=scripted()))
    floor_name = "floor: channel request/reply"
    turn_name = "pride: ask(branch, Chat) empty history"
    fan_sizes = [50] if smoke else [1000, 10000]
    fan_name = "pride: {} branches concurrently (per turn)"
    first_fan = fan_sizes[0]
    # The floor, the single-branch turn and the first fan-out alternate, so the
    # two targets compare samples taken side by side.
    stats = await measure_interleaved(
        {
            floor_name: (channel_round_trips, ops),
            turn_name: (single, ops),
            fan_name.format(first_fan): (fan_out(first_fan), first_fan * (2 if smoke else 10)),
        },
        repeats=repeats,
    )
    floor, turn = stats[floor_name], stats[turn_name]
    print(floor.line())
    print(turn.line())
    ratio = turn.median / floor.median
    print(ratio_line("turn / floor round trip", ratio, "<= 4x", ratio <= 4.0))
    _fan_line(stats[fan_name.format(first_fan)], turn, first_fan)

    await _tracing(smoke)

    for size in fan_sizes[1:]:  # information only: slower, fewer repetitions
        paired = await measure_interleaved(
            {turn_name: (single, ops), fan_name.format(size): (fan_out(size), size * 10)},
            repeats=3,
        )
        _fan_line(paired[fan_name.format(size)], paired[turn_name], size)


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

    def mode(setup: Callable[[], object]) -> Callable[[int], Awaitable[None]]:
        async def batch(ops: int) -> None:
            setup()
            try:
                await single(ops)
            finally:
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
    recording = stats[memory].median / stats[off].median
    print(ratio_line("in-memory exporter / tracing off", recording, "(info)", True))


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
