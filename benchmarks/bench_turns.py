"""Turn overhead and fan-out: pride's ask against trio's own floor, in one run.

Targets (issue 4 / issue 9):
* ``ask(branch, Chat(...))`` on the scripted model, empty history, costs at most
  4x a bare memory-channel request/reply round trip;
* 1,000 branches running turns concurrently sustain at least 80% of the
  single-branch turn rate.
"""

from __future__ import annotations

import trio

from benchmarks._floor import channel_round_trips
from benchmarks._harness import measure, ratio_line
from benchmarks._workloads import fan_out, scripted, turns_on
from pride import Branch


async def _main(smoke: bool) -> None:
    repeats = 2 if smoke else 7
    ops = 200 if smoke else 5000
    floor = await measure(
        "floor: channel request/reply", channel_round_trips, ops=ops, repeats=repeats
    )
    turn = await measure(
        "pride: ask(branch, Chat) empty history",
        turns_on(Branch(chat_model=scripted())),
        ops=ops,
        repeats=repeats,
    )
    print(floor.line())
    print(turn.line())
    ratio = turn.median / floor.median
    print(ratio_line("turn / floor round trip", ratio, "<= 4x", ratio <= 4.0))

    fan_sizes = [50] if smoke else [1000, 10000]
    for size in fan_sizes:
        total = size * (2 if smoke else 10)
        fan = await measure(
            f"pride: {size} branches concurrently (per turn)",
            fan_out(size),
            ops=total,
            repeats=2 if smoke else 3,
        )
        print(fan.line())
        rate_ratio = turn.median / fan.median
        target_ok = rate_ratio >= 0.8
        print(
            ratio_line(
                f"{size}-branch rate / single-branch rate",
                rate_ratio,
                ">= 0.8x" if size == 1000 else "(info)",
                target_ok or size != 1000,
            )
        )


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
