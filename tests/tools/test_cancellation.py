"""Cancelling the caller of ``execute`` cancels its tool calls; ``Cancelled`` leaves alone."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing

from pride.messages.commands import ActionCall
from pride.tools import ActionManager


async def _cancel_while_running(
    execute: Callable[[], Awaitable[Any]], ready: Callable[[], Awaitable[None]]
) -> list[BaseException]:
    """Run ``execute`` in a cancel scope, cancel it once ``ready()`` returns.

    Returns what left ``execute``, as seen right at its boundary.
    """
    escaped: list[BaseException] = []

    async def run(scope: trio.CancelScope) -> None:
        with scope:
            try:
                await execute()
            except BaseException as exc:
                escaped.append(exc)
                raise
        assert scope.cancelled_caught

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, scope)
        await ready()
        scope.cancel()
    return escaped


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_cancelling_the_caller_cancels_running_tools(strategy: Any) -> None:
    """Running async tools see Cancelled, and Cancelled itself (no group) leaves execute."""
    entered: list[str] = []
    cancelled: list[str] = []
    all_in = trio.Event()

    async def wait(name: str) -> None:
        entered.append(name)
        if len(entered) == (2 if strategy == "concurrent" else 1):
            all_in.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(name)
            raise

    manager = ActionManager([wait])
    calls = [ActionCall("wait", {"name": "a"}), ActionCall("wait", {"name": "b"})]
    escaped = await _cancel_while_running(
        lambda: manager.execute(calls, strategy=strategy), all_in.wait
    )
    assert [type(exc) for exc in escaped] == [trio.Cancelled]
    assert sorted(entered) == (["a", "b"] if strategy == "concurrent" else ["a"])
    assert sorted(cancelled) == sorted(entered)


@pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
async def test_tool_with_its_own_nursery_still_gives_plain_cancelled(strategy: Any) -> None:
    """A tool whose own nursery raises a group of Cancelled still yields a bare Cancelled."""
    ready = trio.Event()

    async def fan_out() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(trio.sleep_forever)
            ready.set()

    manager = ActionManager([fan_out])
    escaped = await _cancel_while_running(
        lambda: manager.execute([ActionCall("fan_out")], strategy=strategy), ready.wait
    )
    assert [type(exc) for exc in escaped] == [trio.Cancelled]


async def test_cancel_while_waiting_for_a_slot(autojump_clock: trio.testing.MockClock) -> None:
    """Calls still waiting on the max_concurrent limiter are cancelled too and never start."""
    started: list[int] = []
    first_in = trio.Event()

    async def work(i: int) -> None:
        started.append(i)
        first_in.set()
        await trio.sleep_forever()

    manager = ActionManager([work])
    calls = [ActionCall("work", {"i": i}) for i in range(3)]

    async def ready() -> None:
        await first_in.wait()
        await trio.testing.wait_all_tasks_blocked()

    escaped = await _cancel_while_running(lambda: manager.execute(calls, max_concurrent=1), ready)
    assert [type(exc) for exc in escaped] == [trio.Cancelled]
    assert len(started) == 1


async def test_timeout_cancels_tools(autojump_clock: trio.testing.MockClock) -> None:
    """A deadline around execute cancels slow tools; move_on_after catches the Cancelled."""

    async def slow() -> str:
        await trio.sleep(60)
        return "done"

    with trio.move_on_after(5) as scope:
        await ActionManager([slow]).execute([ActionCall("slow"), ActionCall("slow")])
    assert scope.cancelled_caught
    assert trio.current_time() == 5


async def test_sync_tool_is_waited_for_then_cancelled() -> None:
    """A sync tool's thread cannot be interrupted: execute waits for it, then raises Cancelled."""
    entered = trio.Event()
    release = threading.Event()
    log: list[str] = []

    def blocking() -> str:
        trio.from_thread.run_sync(entered.set)
        release.wait(timeout=10)
        log.append("thread finished")
        return "late"

    manager = ActionManager([blocking])

    async def ready() -> None:
        await entered.wait()

    async def execute() -> Any:
        try:
            return await manager.execute([ActionCall("blocking")])
        finally:
            log.append("execute left")

    async with trio.open_nursery() as nursery:

        async def release_later() -> None:
            # Runs after the cancel: execute must still be waiting on the thread.
            await entered.wait()
            await trio.testing.wait_all_tasks_blocked()
            log.append("releasing")
            release.set()

        nursery.start_soon(release_later)
        escaped = await _cancel_while_running(execute, ready)
    assert [type(exc) for exc in escaped] == [trio.Cancelled]
    assert log == ["releasing", "thread finished", "execute left"]
