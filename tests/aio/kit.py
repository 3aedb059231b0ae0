"""What the asyncio tests share: branches whose turns wait, stream or count, and a run helper.

pytest-trio runs every ``async def`` test on trio (trio_mode), so these tests
are plain functions that call ``asyncio.run`` themselves: the asyncio program
is the test, and pride runs as its guest.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

import pride
from pride import Branch, ScriptedModel

T = TypeVar("T")

#: A bound for every asyncio program of these tests: a hang fails, it never stalls.
DEADLINE = 30.0


def run(main: Callable[[], Awaitable[T]]) -> T:
    """``asyncio.run(main())`` within `DEADLINE`, leaving no asyncio task behind."""

    async def bounded() -> T:
        async with asyncio.timeout(DEADLINE):
            result = await main()
        assert asyncio.all_tasks() == {asyncio.current_task()}, asyncio.all_tasks()
        return result

    return asyncio.run(bounded())


def run_or_fail_on_hang(main: Callable[[], Awaitable[T]]) -> T:
    """`run` in a thread of its own: a program that hangs through every cancellation
    (a deadlock, which `DEADLINE` cannot end) fails the test instead of stalling it.

    The hung thread is left behind (a daemon), with its loop and its trio run.
    """
    outcome: list[Any] = []

    def target() -> None:
        try:
            outcome.append((run(main), None))
        except BaseException as exc:
            outcome.append((None, exc))

    thread = threading.Thread(target=target, name="pride.aio test program", daemon=True)
    thread.start()
    thread.join(DEADLINE + 5)
    assert outcome, f"the asyncio program hung past its {DEADLINE} s deadline"
    result, error = outcome[0]
    if error is not None:
        raise error
    return result  # type: ignore[no-any-return]


def echo() -> ScriptedModel:
    """A model answering each request with its last user message, upper-cased."""

    def reply(request: Any) -> str:
        return str(request.messages[-1]["content"]).upper()

    return ScriptedModel(reply)


def waiting(gate: list[trio.Event] | None = None, seconds: float = 30.0) -> ScriptedModel:
    """A model whose every answer takes ``seconds`` (a running turn to cancel)."""

    async def reply(request: Any) -> str:
        await trio.sleep(seconds)
        return "late"

    return ScriptedModel(reply)


async def counted(branch: Branch, *, n: int, produced: list[int]) -> str:
    """A registered operation streaming ``n`` integers, noting each one it produced."""
    turn = pride.current_turn()
    assert turn is not None
    for index in range(n):
        produced.append(index)
        await turn.emit(index)
    return f"counted {n}"


def branch(name: str, model: ScriptedModel | None = None, **options: Any) -> Branch:
    return Branch(name=name, chat_model=model or echo(), **options)
