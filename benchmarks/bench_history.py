"""History scaling: the same turn over 10 to 10,000 messages of history.

Target (issue 9): the 1,000-message turn costs at most 2x the empty-history
turn. Messages render once each and the history's provider entries are kept
compiled, so a turn copies a list of references instead of re-rendering.
"""

from __future__ import annotations

import trio

from benchmarks._harness import measure, ratio_line
from benchmarks._workloads import branch_with_history, turns_on


async def _main(smoke: bool) -> None:
    sizes = [0, 10, 100] if smoke else [0, 10, 100, 1000, 10000]
    repeats = 2 if smoke else 7
    figures = {}
    for size in sizes:
        ops = 100 if smoke else (3000 if size <= 1000 else 500)
        stats = await measure(
            f"pride: turn over {size} messages",
            turns_on(branch_with_history(size)),
            ops=ops,
            repeats=repeats,
        )
        figures[size] = stats.median
        print(stats.line())
    for size in sizes[1:]:
        ratio = figures[size] / figures[0]
        target = "<= 2x" if size == 1000 else "(info)"
        print(
            ratio_line(
                f"{size}-message turn / empty-history turn",
                ratio,
                target,
                ratio <= 2.0 or size != 1000,
            )
        )


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
