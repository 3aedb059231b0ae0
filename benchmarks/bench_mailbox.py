"""Mailbox throughput: cheap commands sent into one branch, against a bare channel.

Target (issue 9): ``send`` of cheap commands into one branch sustains at least
50% of a one-way trio memory channel's throughput. The cheap command is an
``Act`` with no calls: served in mailbox order, no model turn.
"""

from __future__ import annotations

import trio

from benchmarks._floor import channel_one_way
from benchmarks._harness import measure_interleaved, ratio_line
from pride import Act, Branch, send


async def _sends(n: int) -> None:
    async with Branch() as branch:
        command = Act(())
        last = None
        for _ in range(n):
            last = await send(branch, command)
        assert last is not None
        await last.result()


async def _main(smoke: bool) -> None:
    ops = 500 if smoke else 20_000
    repeats = 2 if smoke else 7
    floor_name, mailbox_name = "floor: one-way channel send", "pride: send(branch, Act(())) served"
    stats = await measure_interleaved(
        {floor_name: (channel_one_way, ops), mailbox_name: (_sends, ops)}, repeats=repeats
    )
    floor, mailbox = stats[floor_name], stats[mailbox_name]
    print(floor.line())
    print(mailbox.line())
    ratio = floor.median / mailbox.median
    print(ratio_line("mailbox throughput / channel throughput", ratio, ">= 0.5x", ratio >= 0.5))


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
