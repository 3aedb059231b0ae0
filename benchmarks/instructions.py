"""Instructions per operation of bench_turns' and bench_durable's workloads, counted by callgrind.

``python -m benchmarks.instructions [--jobs N] [rows...]`` (rows: ``turns``, ``tracing``,
``members``, ``spawns``, ``durable``; default all). Not part of ``make bench``: it needs
``valgrind`` and takes several minutes per row.

Wall time on a shared two-core machine moves 10-30% between runs, more than
the 5% a target may allow; the instructions a workload executes do not move
with the load. Each workload runs in a fresh interpreter under callgrind at
two sizes, and the difference divided by the difference in operations is
what one more operation costs: the interpreter's start, imports and the
workload's setup cancel out. Instructions are not time (a cache miss costs
no instruction), so these figures say whether pride's *work* per operation
grows, not how fast the machine runs it; bench_turns prints the time.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import trio

# Each workload: (small, large) operation counts. The spawn ones run with the
# cyclic collector off ("-nogc") or on, to tell pride's work from CPython's.
WORKLOADS: dict[str, tuple[int, int]] = {
    "turn, tracing off": (200, 1200),
    "turn, otel installed, no provider": (200, 1200),
    "turn, standalone branch": (200, 1200),
    # The same turns through the facade verb (``await branch.chat("hi")``).
    "turn, standalone branch, branch.chat": (200, 1200),
    "turn, 1000 branches, no session": (2000, 12000),
    "turn, 1000 members of a session": (2000, 12000),
    "spawn, session of 1000": (0, 1000),
    "spawn, session of 10000": (0, 10000),
    "spawn, session of 1000, collector off": (0, 1000),
    "spawn, session of 10000, collector off": (0, 10000),
    # bench_durable's workload: ChatAndRecord turns over 100 branches of a session.
    "durable turn, no store": (200, 1200),
    "durable turn, store, journal off": (200, 1200),
    "durable turn, store, journal on": (200, 1200),
}

ROWS: dict[str, list[tuple[str, str, str]]] = {
    "turns": [
        (
            "branch.chat(...) / ask(branch, Chat(...)) (per turn)",
            "turn, standalone branch, branch.chat",
            "turn, standalone branch",
        ),
    ],
    # (label, numerator, denominator): a ratio of instructions per operation
    "tracing": [
        (
            "otel installed, no provider / tracing off",
            "turn, otel installed, no provider",
            "turn, tracing off",
        ),
    ],
    "members": [
        (
            "1000 members / one branch (per turn)",
            "turn, 1000 members of a session",
            "turn, standalone branch",
        ),
        (
            "1000 branches, no session / one branch",
            "turn, 1000 branches, no session",
            "turn, standalone branch",
        ),
    ],
    "spawns": [
        ("spawn at 10000 / at 1000 members", "spawn, session of 10000", "spawn, session of 1000"),
        (
            "the same, collector off",
            "spawn, session of 10000, collector off",
            "spawn, session of 1000, collector off",
        ),
    ],
    "durable": [
        (
            "store + journal / no store (per turn)",
            "durable turn, store, journal on",
            "durable turn, no store",
        ),
        (
            "journal on / journal off (per turn)",
            "durable turn, store, journal on",
            "durable turn, store, journal off",
        ),
    ],
}


def _durable(name: str) -> Callable[[int], Awaitable[object]]:
    """``count`` ChatAndRecord turns over 100 branches of a session (every thread's
    instructions count: with a store, the commits' worker thread too)."""
    from pathlib import Path

    from benchmarks._workloads import scripted
    from pride import Branch, ChatAndRecord, Durability, Session

    async def turns(count: int) -> None:
        with tempfile.TemporaryDirectory() as directory:
            path = None if name.endswith("no store") else Path(directory, "store.db")
            durability = Durability(journal=name.endswith("journal on"))
            async with Session(store=path, durability=durability) as session:
                model = scripted()
                members = [
                    await session.spawn(Branch(name=f"b{index}", chat_model=model))
                    for index in range(100)
                ]
                command = ChatAndRecord("hello")

                async def caller(branch: Branch) -> None:
                    for _ in range(count // 100):
                        await session.ask(branch, command)

                async with trio.open_nursery() as nursery:
                    for branch in members:
                        nursery.start_soon(caller, branch)

    return turns


def _workload(name: str) -> Callable[[int], Awaitable[object]]:
    from benchmarks._workloads import fan_out, scripted, turns_on, verb_turns_on
    from benchmarks.bench_turns import session_fan_out
    from pride import Branch, Session

    if name.startswith("turn, tracing off") or name.startswith("turn, otel"):
        import pride.telemetry

        if "otel" in name:
            pride.telemetry.instrument()
        return turns_on(Branch(chat_model=scripted()))
    if name == "turn, standalone branch":
        return turns_on(Branch(chat_model=scripted()))
    if name == "turn, standalone branch, branch.chat":
        return verb_turns_on(Branch(chat_model=scripted()))
    if name == "turn, 1000 branches, no session":
        return fan_out(1000)
    if name == "turn, 1000 members of a session":
        return session_fan_out(1000)
    if name.startswith("durable turn"):
        return _durable(name)
    size = int(name.split("session of ")[1].split(",", maxsplit=1)[0])
    if "collector off" in name:
        gc.disable()

    async def spawns(count: int) -> None:
        # The branches and the session are made at either count: only the spawns differ.
        model = scripted()
        branches = [Branch(chat_model=model, name=f"member-{index}") for index in range(size)]
        async with Session() as session:
            for branch in branches[:count]:
                await session.spawn(branch)

    return spawns


def _child(name: str, count: int) -> None:
    trio.run(_workload(name), count)


def _instructions(name: str, count: int) -> int:
    """Instructions callgrind counts for one run of ``name`` with ``count`` operations."""
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={os.path.join(scratch, 'out')}",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--child",
                name,
                str(count),
            ],
            capture_output=True,
            text=True,
            check=True,
            # String hashing is seeded per process; a fixed seed keeps dictionary
            # probing, hence the count, the same from run to run.
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"refs:\s+([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from callgrind for {name!r}:\n{done.stderr}")
    return int(found.group(1).replace(",", ""))


def per_operation(names: list[str], jobs: int) -> dict[str, float]:
    """Instructions per operation of each workload (two callgrind runs each)."""
    runs = [(name, count) for name in names for count in WORKLOADS[name]]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        counts = dict(zip(runs, pool.map(lambda run: _instructions(*run), runs), strict=True))
    result = {}
    for name in names:
        small, large = WORKLOADS[name]
        result[name] = (counts[name, large] - counts[name, small]) / (large - small)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("rows", nargs="*", help=f"some of {', '.join(ROWS)} (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="callgrind runs at once")
    parser.add_argument("--child", nargs=2, metavar=("WORKLOAD", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return 0
    if shutil.which("valgrind") is None:
        print("valgrind is not installed: nothing to count")
        return 1
    rows = args.rows or list(ROWS)
    unknown = [row for row in rows if row not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}: choose from {', '.join(ROWS)}")
    names = list(dict.fromkeys(n for row in rows for _, *pair in ROWS[row] for n in pair))
    counted = per_operation(names, args.jobs)
    for name in names:
        print(f"{name:<48} {counted[name]:12,.0f} instructions per operation")
    for row in rows:
        for label, numerator, denominator in ROWS[row]:
            print(f"  {label:<60} {counted[numerator] / counted[denominator]:8.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
