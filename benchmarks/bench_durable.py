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

A third pair of figures is the cost of an ``ask(branch, Act(()))`` (an Act with
no tool call: it records nothing, so with a store there is nothing to commit)
with a store and without: it is what a cluster host pays per message it
serves (issue 16), so a store must not add to it.

Besides the rates, each workload prints where a turn's time goes (medians
over the measured repetitions): the event loop thread's CPU per turn
(``time.thread_time`` over the measured phase: the runtime's and the
store's Python work; SQLite writes in a worker thread), and with a store
the turns each commit carried (group commit). A turn's wall time beyond the
loop's CPU ("waiting") is the loop idle: for the commit that holds it (when
every branch does, nothing else can run), or for the machine.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from benchmarks._workloads import scripted
from pride import Act, Branch, ChatAndRecord, Durability, Session


class _Breakdown:
    """Per repetition: loop CPU per turn, turns per commit."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wait: list[float] = []
        self.per_commit: list[float] = []

    def line(self) -> str:
        # The first run is the harness's warm-up.
        cpu, per_commit = self.cpu[1:] or self.cpu, self.per_commit[1:] or self.per_commit
        wait = self.wait[1:] or self.wait
        text = (
            f"    event-loop CPU {statistics.median(cpu) * 1e6:6.0f} us per turn, "
            f"waiting {statistics.median(wait) * 1e6:5.0f} us"
        )
        if per_commit:
            text += f", {statistics.median(per_commit):5.1f} turns per commit"
        return text


def _turns(
    branches: int, store: str | None, journal: bool, breakdown: _Breakdown
) -> Callable[[int], Awaitable[float]]:
    """``total`` ChatAndRecord turns spread over ``branches`` concurrent branches."""

    async def run(total: int) -> float:
        per_branch = max(1, total // branches)
        turns = per_branch * branches
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

                commits = session.store.commits if session.store is not None else 0
                started, cpu = time.perf_counter(), time.thread_time()
                async with trio.open_nursery() as nursery:
                    for branch in members:
                        nursery.start_soon(worker, branch)
                elapsed = time.perf_counter() - started
                breakdown.cpu.append((time.thread_time() - cpu) / turns)
                # The rest of a turn's wall time: the loop idle (every branch waiting
                # for a commit) or the machine busy elsewhere.
                breakdown.wait.append(max(0.0, elapsed / turns - breakdown.cpu[-1]))
                if session.store is not None:
                    breakdown.per_commit.append(turns / max(1, session.store.commits - commits))
        return elapsed * total / turns

    return run


def _empty_acts(store: bool) -> Callable[[int], Awaitable[float]]:
    """``total`` sequential ``ask(branch, Act(()))`` on one branch of a session."""

    async def run(total: int) -> float:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory, "store.db") if store else None
            async with Session(store=path) as session:
                branch = await session.spawn(Branch(name="host", chat_model=scripted()))
                await branch.chat_and_record("stored")  # the branch is in the store
                command = Act(())
                started = time.perf_counter()
                for _ in range(total):
                    await session.ask(branch, command)
                return time.perf_counter() - started

    return run


def _rate(stats: Stats) -> float:
    return 1.0 / stats.median


async def _main(smoke: bool) -> None:
    branches = 10 if smoke else 100
    total = branches * (3 if smoke else 40)
    repeats = 2 if smoke else 7
    workloads = {
        "no store": (None, False),
        "store, journal off": ("store", False),
        "store, journal on": ("store", True),
    }
    breakdowns = {name: _Breakdown() for name in workloads}
    label = "{} ({} branches, per turn)"
    stats = await measure_interleaved(
        {
            label.format(name, branches): (
                _turns(branches, store, journal, breakdowns[name]),
                total,
            )
            for name, (store, journal) in workloads.items()
        },
        repeats=repeats,
    )
    plain, off, on = (stats[label.format(name, branches)] for name in workloads)
    for name, figure in zip(workloads, (plain, off, on), strict=True):
        print(figure.line())
        print(breakdowns[name].line())
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
    acts = await measure_interleaved(
        {
            "ask(branch, Act(())), no store": (_empty_acts(False), 200 if smoke else 3000),
            "ask(branch, Act(())), store": (_empty_acts(True), 200 if smoke else 3000),
        },
        repeats=repeats,
    )
    bare, stored = acts.values()
    print(bare.line())
    print(stored.line())
    act = bare.median / stored.median
    # No target of its own: issue 16's 10,000 messages/s per host pair rests on it.
    print(ratio_line("empty Act, store / no store (rate)", act, "~1x", act >= 0.9))


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
