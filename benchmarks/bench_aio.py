"""pride in asyncio (issue 30): asks from asyncio through pride.aio against the same from trio.

Targets, each side measured in the same process run, samples interleaved
(``trio.run`` and ``asyncio.run`` take turns, setup excluded from the timing):
* a sequential ``await team.ask(name, Chat)`` from asyncio costs at most 2x the
  same ``await session.ask(name, Chat)`` from trio (one branch, scripted model);
* 1,000 concurrent asyncio callers across 10 branches sustain at least 0.8x
  the throughput of 1,000 concurrent trio callers doing the same.

For information: the same sequential asks, and the same 1,000 callers, made
from trio code inside the guest run (``team.run``), which is guest mode's own
cost without the bridge (the concurrent one bounds what the bridge can reach);
CPU time per ask beside the wall time; and a cold call, made after the bridge
has been quiet for longer than ``pride.aio.LINGER`` (trio asleep in its I/O
thread: the wake-up every call of a naive bridge pays).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

import pride.aio
from benchmarks._harness import Stats, ratio_line
from pride import Branch, Chat, ScriptedModel, Session

CALLERS = 1000
BRANCHES = 10

Timed = tuple[float, float]  # (wall seconds, CPU seconds) per operation


def _model() -> ScriptedModel:
    return ScriptedModel(lambda request: "ok")


def _per_op(started: Timed, ops: int) -> Timed:
    return (time.perf_counter() - started[0]) / ops, (time.process_time() - started[1]) / ops


def _now() -> Timed:
    return time.perf_counter(), time.process_time()


async def _sequential(ask: Callable[[str, Chat], Awaitable[Any]], ops: int) -> Timed:
    command = Chat("hi")
    for _ in range(min(ops, 200)):  # warm-up: the worker pool, caches
        await ask("b0", command)
    started = _now()
    for _ in range(ops):
        await ask("b0", command)
    return _per_op(started, ops)


async def _trio_sequential(ops: int) -> Timed:
    async with Session() as session:
        await session.spawn(Branch(name="b0", chat_model=_model()))
        return await _sequential(session.ask, ops)


async def _aio_sequential(ops: int) -> Timed:
    async with pride.aio.open_session() as team:
        await team.spawn(Branch(name="b0", chat_model=_model()))
        return await _sequential(team.ask, ops)


async def _guest_trio_sequential(ops: int) -> Timed:
    async with pride.aio.open_session() as team:
        await team.spawn(Branch(name="b0", chat_model=_model()))
        return await team.run(_sequential, team.session.ask, ops)


async def _trio_concurrent(ops: int) -> Timed:
    async with Session() as session:
        for index in range(BRANCHES):
            await session.spawn(Branch(name=f"b{index}", chat_model=_model()))
        return await _callers(session, ops)


async def _callers(session: Session, ops: int) -> Timed:
    """``CALLERS`` trio tasks asking ``session``'s branches at once (warm-up excluded)."""
    command = Chat("hi")

    async def caller(index: int, asks: int) -> None:
        for _ in range(asks):
            await session.ask(f"b{index % BRANCHES}", command)

    async with trio.open_nursery() as nursery:  # warm-up
        for index in range(CALLERS):
            nursery.start_soon(caller, index, 1)
    per_caller = max(1, ops // CALLERS)
    started = _now()
    async with trio.open_nursery() as nursery:
        for index in range(CALLERS):
            nursery.start_soon(caller, index, per_caller)
    return _per_op(started, per_caller * CALLERS)


async def _guest_trio_concurrent(ops: int) -> Timed:
    async with pride.aio.open_session() as team:
        for index in range(BRANCHES):
            await team.spawn(Branch(name=f"b{index}", chat_model=_model()))
        return await team.run(_callers, team.session, ops)


async def _aio_concurrent(ops: int) -> Timed:
    async with pride.aio.open_session() as team:
        for index in range(BRANCHES):
            await team.spawn(Branch(name=f"b{index}", chat_model=_model()))
        command = Chat("hi")

        async def caller(index: int, asks: int) -> None:
            for _ in range(asks):
                await team.ask(f"b{index % BRANCHES}", command)

        await asyncio.gather(*(caller(index, 1) for index in range(CALLERS)))  # warm-up
        per_caller = max(1, ops // CALLERS)
        started = _now()
        await asyncio.gather(*(caller(index, per_caller) for index in range(CALLERS)))
        return _per_op(started, per_caller * CALLERS)


async def _aio_cold(ops: int) -> Timed:
    async with pride.aio.open_session() as team:
        await team.spawn(Branch(name="b0", chat_model=_model()))
        command = Chat("hi")
        await team.ask("b0", command)
        wall = cpu = 0.0
        for _ in range(ops):
            await asyncio.sleep(pride.aio.LINGER * 4)  # trio goes to sleep in its thread
            started = _now()
            await team.ask("b0", command)
            elapsed = _per_op(started, 1)
            wall, cpu = wall + elapsed[0], cpu + elapsed[1]
        return wall / ops, cpu / ops


SIDES: dict[str, tuple[str, Callable[[int], Awaitable[Timed]]]] = {
    "trio: session.ask sequential": ("trio", _trio_sequential),
    "asyncio: team.ask sequential": ("asyncio", _aio_sequential),
    "trio in the guest: team.run(ask loop)": ("asyncio", _guest_trio_sequential),
    f"trio: {CALLERS} callers, {BRANCHES} branches (per ask)": ("trio", _trio_concurrent),
    f"asyncio: {CALLERS} callers, {BRANCHES} branches (per ask)": ("asyncio", _aio_concurrent),
    f"trio in the guest: {CALLERS} callers (per ask)": ("asyncio", _guest_trio_concurrent),
}


def _run(kind: str, fn: Callable[[int], Awaitable[Timed]], ops: int) -> Timed:
    if kind == "trio":
        return trio.run(fn, ops)
    return asyncio.run(fn(ops))  # type: ignore[arg-type]


def main(smoke: bool) -> None:
    repeats = 2 if smoke else 7
    sizes = {"sequential": 200 if smoke else 3000, "concurrent": 1000 if smoke else 10_000}
    walls: dict[str, list[float]] = {name: [] for name in SIDES}
    cpus: dict[str, list[float]] = {name: [] for name in SIDES}
    for _ in range(repeats):
        for name, (kind, fn) in SIDES.items():
            ops = sizes["concurrent" if "callers" in name else "sequential"]
            wall, cpu = _run(kind, fn, ops)
            walls[name].append(wall)
            cpus[name].append(cpu)
    stats = {name: Stats(name, tuple(values)) for name, values in walls.items()}
    for name in SIDES:
        print(f"{stats[name].line()}   cpu {statistics.median(cpus[name]) * 1e6:8.2f} us")
    names = list(SIDES)
    trio_seq, aio_seq, guest_seq, trio_conc, aio_conc, guest_conc = (
        stats[name].median for name in names
    )
    ratio = aio_seq / trio_seq
    print(ratio_line("sequential ask: asyncio bridge / trio", ratio, "<= 2x", ratio <= 2.0))
    cpu_ratio = statistics.median(cpus[names[1]]) / statistics.median(cpus[names[0]])
    print(ratio_line("  (the same in CPU time)", cpu_ratio, "(info)", True))
    print(ratio_line("  trio in the guest / trio (guest mode's own cost)", guest_seq / trio_seq,
                     "(info)", True))  # fmt: skip
    throughput = trio_conc / aio_conc
    print(ratio_line(f"{CALLERS} callers: asyncio throughput / trio", throughput, ">= 0.8x",
                     throughput >= 0.8))  # fmt: skip
    cpu_throughput = statistics.median(cpus[names[3]]) / statistics.median(cpus[names[4]])
    print(ratio_line("  (the same in CPU time)", cpu_throughput, "(info)", True))
    print(ratio_line("  trio in the guest / trio, the same callers (the bound)",
                     trio_conc / guest_conc, "(info)", True))  # fmt: skip
    cold_wall, cold_cpu = asyncio.run(_aio_cold(5 if smoke else 50))
    print(f"  {'a cold call (trio asleep in its I/O thread), wall':<60} {cold_wall * 1e6:8.2f} us"
          f"   cpu {cold_cpu * 1e6:.2f} us")  # fmt: skip
