"""Branch factories the cluster benchmark places on its host (importable by the host)."""

from __future__ import annotations

import gc
import os
import threading
import time
from typing import Any

import trio

from pride import Branch, ScriptedModel

_gc_spent = [0.0, 0.0]  # seconds in the collector so far; the start of the one under way
_gc_runs = [0, 0, 0]  # collections per generation


def _time_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_spent[1] = time.perf_counter()
    else:
        _gc_spent[0] += time.perf_counter() - _gc_spent[1]
        _gc_runs[info["generation"]] += 1


class Bench(Branch):
    """A branch on a scripted model, with ``block``, ``pid`` and ``gc_spent`` operations."""

    __slots__ = ()

    async def block(self, seconds: float = 60.0) -> str:
        await trio.sleep(seconds)
        return "slept"

    async def pid(self) -> int:
        return os.getpid()

    async def threads(self) -> dict[str, int]:
        """The host process's Python threads: name to native thread id (for CPU per thread)."""
        return {thread.name: thread.native_id or 0 for thread in threading.enumerate()}

    async def gc_spent(self) -> list[float]:
        """Seconds the host process spent collecting garbage so far, then the
        collections of each generation."""
        return [_gc_spent[0], *_gc_runs]


def bench(*, name: str, mailbox_size: int = 4096) -> Branch:
    if _time_gc not in gc.callbacks:
        gc.callbacks.append(_time_gc)  # the host's collector, timed for the benchmark
    return Bench(name=name, chat_model=ScriptedModel(None), mailbox_size=mailbox_size)  # echoes
