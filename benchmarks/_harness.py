"""Shared measuring helpers: repetitions after a warm-up, median/min/max, ratios.

Every comparison is computed from figures measured in the same process run,
so machine speed cancels out; absolute numbers are printed for context only.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import trio

T = TypeVar("T")


@attrs.frozen
class Stats:
    """Per-operation seconds over the repetitions of one benchmark."""

    name: str
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def line(self, unit: str = "us") -> str:
        scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
        return (
            f"{self.name:<48} median {self.median * scale:10.2f} {unit}   "
            f"min {self.min * scale:10.2f}   max {self.max * scale:10.2f}"
        )


async def measure(
    name: str,
    run_batch: Callable[[int], Awaitable[float | None]],
    *,
    ops: int,
    repeats: int,
    warmup: int = 1,
) -> Stats:
    """Time ``run_batch(ops)`` ``repeats`` times after ``warmup`` runs; per-op seconds.

    A batch that has setup to exclude (starting 1,000 actors, say) times its
    measured part itself and returns the elapsed seconds.
    """
    stats = await measure_interleaved({name: (run_batch, ops)}, repeats=repeats, warmup=warmup)
    return stats[name]


async def measure_interleaved(
    batches: Mapping[str, tuple[Callable[[int], Awaitable[float | None]], int]],
    *,
    repeats: int,
    warmup: int = 1,
) -> dict[str, Stats]:
    """Like :func:`measure` for several workloads compared with each other.

    ``batches`` maps each name to ``(run_batch, ops)``. The repetitions
    alternate (A B C, A B C, ...), so a change in machine speed during the run
    (another tenant, frequency scaling) lands on every side alike instead of
    on whichever block of samples it happened to hit.
    """
    for _ in range(warmup):
        for run_batch, ops in batches.values():
            await run_batch(ops)
    samples: dict[str, list[float]] = {name: [] for name in batches}
    for _ in range(repeats):
        for name, (run_batch, ops) in batches.items():
            start = time.perf_counter()
            elapsed = await run_batch(ops)
            if elapsed is None:
                elapsed = time.perf_counter() - start
            samples[name].append(elapsed / ops)
    return {name: Stats(name, tuple(values)) for name, values in samples.items()}


JUDGE_TARGETS = True
"""False for smoke runs (``--smoke``): their sizes are too small for a verdict."""


def _verdict(ok: bool) -> str:
    if not JUDGE_TARGETS:
        return "(smoke: not judged)"
    return "ok" if ok else "MISSED"


def ratio_line(label: str, value: float, target: str, ok: bool) -> str:
    """One printed comparison: the ratio, the target and whether it holds."""
    return f"  {label:<60} {value:8.2f}x   target {target:<10} {_verdict(ok)}"


def figure_line(label: str, value: float, unit: str, target: str, ok: bool) -> str:
    """One printed figure with its unit, the target and whether it holds."""
    return f"  {label:<60} {value:8.2f} {unit:<4} target {target:<10} {_verdict(ok)}"


class CollectorTime:
    """CPU time this thread spends in the garbage collector, and its collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __enter__(self) -> CollectorTime:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._started
            self.collections[info["generation"]] += 1


async def run_concurrently(
    work: Callable[[T], Awaitable[object]],
    each: Iterable[T],
    collected: list[CollectorTime] | None = None,
) -> float:
    """Run ``work(item)`` for every item at once, in a nursery of their own, and
    return the seconds until the last one ended: a fan-out's concurrent phase.
    With ``collected``, the garbage collector's share of it is appended there."""
    with CollectorTime() as collector:
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for item in each:
                nursery.start_soon(work, item)
        elapsed = time.perf_counter() - started
    if collected is not None:
        collected.append(collector)
    return elapsed
