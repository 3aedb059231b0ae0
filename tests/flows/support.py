"""Helpers for the flow tests: a team of branches whose work takes virtual time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from pride import Branch, Call, NodeSignal, Session, Signal
from tests.helpers import echo_model


class Overlap:
    """Counts how many ``work`` operations run at once, and records their order."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.started: list[str] = []
        self.finished: list[str] = []

    async def work(self, branch: Branch, label: str = "", seconds: float = 1.0) -> str:
        self.now += 1
        self.peak = max(self.peak, self.now)
        self.started.append(label)
        try:
            await trio.sleep(seconds)
        finally:
            self.now -= 1
        self.finished.append(label)
        return f"{label} done by {branch.name}"

    async def boom(self, branch: Branch, label: str = "", seconds: float = 0.0) -> str:
        self.started.append(label)
        await trio.sleep(seconds)
        raise ValueError(f"{label} went wrong")


@asynccontextmanager
async def team(*names: str, **session_options: Any) -> AsyncIterator[tuple[Session, Overlap]]:
    """A running session with branches ``names`` (echo models) and the ``work`` operation."""
    overlap = Overlap()
    async with Session(**session_options) as session:
        session.register_operation("work", overlap.work)
        session.register_operation("boom", overlap.boom)
        for name in names:
            await session.spawn(Branch(name=name, chat_model=echo_model()))
        yield session, overlap


def node_events(signals: list[Signal]) -> list[tuple[str, str]]:
    """``(kind, node)`` for each node signal, in order."""
    return [(type(s).__name__, s.node) for s in signals if isinstance(s, NodeSignal)]


def work(label: str, seconds: float = 1.0) -> Call:
    """The command of a node that takes ``seconds`` of (virtual) time."""
    return Call("work", label=label, seconds=seconds)


def boom(label: str, seconds: float = 0.0) -> Call:
    """The command of a node that fails with ValueError after ``seconds``."""
    return Call("boom", label=label, seconds=seconds)


def balanced_turns(signals: list[Signal]) -> bool:
    """Every RunStart has exactly one terminal with its turn id, and no terminal is stray."""
    from pride import RunEnd, RunFailed, RunStart

    started = [s.turn_id for s in signals if isinstance(s, RunStart)]
    ended = [s.turn_id for s in signals if isinstance(s, RunEnd | RunFailed)]
    return sorted(map(str, started)) == sorted(map(str, ended)) and len(set(ended)) == len(ended)
