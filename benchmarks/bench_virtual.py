"""Virtual branches over a big store: activation, turns, memory and start-up.

Targets (issue 31), over a store of 1,000,000 conversations of ten messages
(built by the benchmark in a temporary directory, its size on disk printed):

* activating a random passivated conversation: p50 <= 1 ms, p99 <= 5 ms;
* a turn on a just-activated conversation against a turn on a live one
  (printed as a ratio, for information);
* resident memory with 10,000 active (and the rest passivated) at most what
  10,000 live branches with the same history cost, plus 50 MB (each figure
  measured in a fresh process);
* a session's start over that store (open, register the kind) <= 1 s;
* no growth over 100,000 activate/passivate cycles of one conversation
  (resident memory over the last 90,000, at most 1 MiB).

The anchor, side by side in the same run: the peers' pattern (langgraph's
checkpointer, openai-agents' sessions), loading the conversation from the
store for every turn and writing it back, against a turn on a live virtual
branch.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from benchmarks._harness import figure_line, ratio_line
from benchmarks._rss import rss_bytes
from benchmarks._virtual_store import build, factory, model, name_of
from pride import Branch, ChatAndRecord, Session
from pride.store import BranchStore


def _p(figures: list[float], q: int) -> float:
    return statistics.quantiles(figures, n=100)[q - 1] if len(figures) >= 100 else max(figures)


async def _measure(path: Path, count: int, samples: int) -> dict[str, float]:
    found: dict[str, float] = {}
    started = time.perf_counter()
    async with Session(store=path) as session:
        await session.virtual("user", factory, passivate_after=3600.0)
        found["start"] = time.perf_counter() - started
        chooser = random.Random(31)
        names = [name_of(chooser.randrange(count)) for _ in range(samples)]
        activations = []
        for name in names:
            begun = time.perf_counter()
            await session.activate(name)
            activations.append(time.perf_counter() - begun)
            await session.passivate(name)
        found["activate_p50"] = statistics.median(activations)
        found["activate_p99"] = _p(activations, 99)
        fresh, live = [], []
        for name in names[: samples // 2]:
            begun = time.perf_counter()
            await session.ask(name, ChatAndRecord("one more question"))  # activates it
            fresh.append(time.perf_counter() - begun)
            begun = time.perf_counter()
            await session.ask(name, ChatAndRecord("and another"))  # live now
            live.append(time.perf_counter() - begun)
            await session.passivate(name)
        found["turn_fresh"] = statistics.median(fresh)
        found["turn_live"] = statistics.median(live)
        # Activate and passivate one conversation over and over: nothing may grow.
        cycles = 500 if samples < 1000 else 100_000
        name = name_of(0)
        for cycle in range(cycles):
            if cycle == cycles // 10:
                settled = rss_bytes()
            await session.activate(name)
            await session.passivate(name)
        found["cycles"] = cycles
        found["cycle_growth"] = rss_bytes() - settled
    # The peers' pattern: the conversation loaded for the turn and written back.
    async with BranchStore(path) as store:
        chooser = random.Random(32)
        peers = []
        for _ in range(samples // 2):
            name = name_of(chooser.randrange(count))
            begun = time.perf_counter()
            stored = await store.load(name)
            assert stored is not None
            branch = Branch.from_dict(stored, chat_model=model())
            async with branch:
                await branch.chat_and_record("one more question")
            await store.save(branch)
            peers.append(time.perf_counter() - begun)
        found["turn_peers"] = statistics.median(peers)
    return found


def _probe(*args: str) -> float:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._virtual_store", *args],
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main(smoke: bool) -> None:
    count = 2_000 if smoke else 1_000_000
    active = 200 if smoke else 10_000
    samples = 200 if smoke else 2_000
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "virtual.db"
        seconds = build(path, count)
        size = path.stat().st_size
        print(
            f"  store: {count:,} conversations of 10 messages, {size / 2**20:,.0f} MiB on disk "
            f"(built in {seconds:.0f} s); load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} CPUs"
        )
        found = trio.run(_measure, path, count, samples)
        ms = 1e3
        print(
            f"  activating a passivated conversation: p50 {found['activate_p50'] * ms:.3f} ms, "
            f"p99 {found['activate_p99'] * ms:.3f} ms ({samples} random names)"
        )
        print(
            figure_line(
                "activation p50",
                found["activate_p50"] * ms,
                "ms",
                "<= 1",
                found["activate_p50"] <= 1e-3,
            )
        )
        print(
            figure_line(
                "activation p99",
                found["activate_p99"] * ms,
                "ms",
                "<= 5",
                found["activate_p99"] <= 5e-3,
            )
        )
        print(
            f"  turn: just activated {found['turn_fresh'] * ms:.3f} ms, live "
            f"{found['turn_live'] * ms:.3f} ms, peers' load-turn-save "
            f"{found['turn_peers'] * ms:.3f} ms (medians)"
        )
        fresh_ratio = found["turn_fresh"] / found["turn_live"]
        print(
            ratio_line("turn on a just-activated / on a live branch", fresh_ratio, "(info)", True)
        )
        peers_ratio = found["turn_peers"] / found["turn_live"]
        print(
            ratio_line(
                "peers' load-turn-save / turn on a live branch", peers_ratio, "(anchor)", True
            )
        )
        print(
            figure_line(
                "session start over the store", found["start"], "s", "<= 1", found["start"] <= 1.0
            )
        )
        grown = found["cycle_growth"] / 2**20
        cycled = int(found["cycles"] * 0.9)
        print(
            figure_line(
                f"RSS growth over the last {cycled:,} activate/passivate cycles",
                grown,
                "MiB",
                "<= 1",
                grown <= 1,
            )
        )
        virtual_rss = _probe("probe", str(path), str(active))
        plain_rss = _probe("plain", str(active))
        extra = (virtual_rss - plain_rss) / 2**20
        print(
            f"  resident memory: {active:,} active of {count:,}: {virtual_rss / 2**20:,.1f} MiB; "
            f"{active:,} plain live branches: {plain_rss / 2**20:,.1f} MiB"
        )
        print(
            figure_line(
                f"{active:,} active beyond {active:,} live branches",
                extra,
                "MiB",
                "<= 50",
                extra <= 50,
            )
        )
