"""Durable throughput: turns per second with a store and its journal, against no store.

Targets (issue 19), every figure from the same run, interleaved:

* 100 branches running ``ChatAndRecord`` turns concurrently, with a store
  (journal on, every turn committed before it is answered, group commit
  across branches), sustain at least 0.7x the turn rate without a store;
* the journal on costs at most a fifth: journal on >= 0.8x journal off.

The model is the scripted one (answers at once), so what is measured is the
runtime and the store, the store's fsync included (``synchronous=FULL``).
Starting the branches is setup, not measured; each repetition writes a
fresh store file.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from benchmarks._workloads import scripted
from pride import Branch, ChatAndRecord, Durability, Session


def _turns(branches: int, store: str | None, journal: bool) -> Callable[[int], Awaitable[float]]:
    """``total`` ChatAndRecord turns spread over ``branches`` concurrent branches."""

    async def run(total: int) -> float:
        per_branch = max(1, total // branches)
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory, "store.db") if store else None
            durability = Durability(journal=journal)
            async with Session(store=path, durability=durability) as session:
                model = scripted()
                members = [
                    await session.spawn(Branch(name=f"b{index}", chat_model=model))
                    for index in range(branches)
                ]
                command = ChatAndRecord("hello")

                async def worker(branch: Branch) -> None:
                    for _ in range(per_branch):
                        await session.ask(branch, command)

                started = time.perf_counter()
                async with trio.open_nursery() as nursery:
                    for branch in members:
                        nursery.start_soon(worker, branch)
                elapsed = time.perf_counter() - started
        return elapsed * total / (per_branch * branches)

    return run


def _rate(stats: Stats) -> float:
    return 1.0 / stats.median


async def _main(smoke: bool) -> None:
    branches = 10 if smoke else 100
    total = branches * (3 if smoke else 40)
    repeats = 2 if smoke else 7
    names = {
        "no store": _turns(branches, None, journal=False),
        "store, journal off": _turns(branches, "store", journal=False),
        "store, journal on": _turns(branches, "store", journal=True),
    }
    label = "{} ({} branches, per turn)"
    stats = await measure_interleaved(
        {label.format(name, branches): (run, total) for name, run in names.items()},
        repeats=repeats,
    )
    plain, off, on = (stats[label.format(name, branches)] for name in names)
    for figure in (plain, off, on):
        print(figure.line())
    print(
        f"  rates: no store {_rate(plain):.0f} turns/s, store {_rate(off):.0f} turns/s, "
        f"store + journal {_rate(on):.0f} turns/s"
    )
    durable = plain.median / on.median
    print(
        ratio_line(
            f"store + journal / no store, {branches} branches", durable, ">= 0.7x", durable >= 0.7
        )
    )
    journal = off.median / on.median
    print(ratio_line("journal on / journal off", journal, ">= 0.8x", journal >= 0.8))


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
