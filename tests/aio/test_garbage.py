"""Issue 30: a call across the bridge, answered or failed, leaves no reference cycle.

An error raised through a frame that still reaches it (a future holding the
exception, held by the call the frame holds) is a reference cycle: the error,
every frame of its traceback and all they hold wait for a garbage collection
instead of going with their last reference (the guarantee of
tests/reliability/test_error_frames.py, across the bridge). A stream's end is
such an error too (``StopAsyncIteration``), so each stream left one.
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import pride
import pride.aio
from pride import Chat, ChatAndRecord
from tests.helpers import saving_garbage

from .kit import branch, run


async def _fails() -> None:
    raise KeyError("from trio")


async def _fails_as_an_operation(member: pride.Branch) -> None:
    raise KeyError("from a turn")


def _kinds(objects: list[object]) -> list[tuple[str, int]]:
    return collections.Counter(type(o).__qualname__ for o in objects).most_common(6)


@pytest.mark.parametrize("case", ["ask", "ask fails", "run", "run fails", "stream", "stream fails"])
def test_a_bridged_call_leaves_no_reference_cycle(case: str) -> None:
    async def main() -> None:
        async with pride.aio.open_session() as team:
            member = branch("echo")
            member.register_operation("fails", _fails_as_an_operation)
            await team.spawn(member)

            async def streamed(command: pride.WorkCommand) -> None:
                async with team.stream("echo", command) as items:
                    async for _ in items:
                        pass

            calls: dict[str, Callable[[], Awaitable[Any]]] = {
                "ask": lambda: team.ask("echo", Chat("hi")),
                "ask fails": lambda: team.ask("echo", pride.Call("fails")),
                "run": lambda: team.run(team.session.ask, "echo", Chat("hi")),
                "run fails": lambda: team.run(_fails),
                "stream": lambda: streamed(ChatAndRecord("hi")),
                "stream fails": lambda: streamed(pride.Call("fails")),
            }
            call = calls[case]

            async def once() -> None:
                try:
                    await call()
                except KeyError:
                    assert case.endswith("fails")

            await once()
            with saving_garbage() as garbage:
                for _ in range(10):
                    await once()
            assert _kinds(garbage) == []

    run(main)
