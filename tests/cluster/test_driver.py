"""Waiting on Ray from trio: completed calls reach the loop, in bursts, and cancellably.

Ray completes a call's future on a thread of its own; these tests complete
plain ``concurrent.futures`` futures from a thread the same way (the driver
only ever calls ``ref.future()``), so they need no cluster.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Any

import pytest
import trio
import trio.testing

from pride.cluster.caller.driver import on_done, wait_ref


class _Ref:
    """What the driver needs of a Ray ``ObjectRef``: its future."""

    def __init__(self) -> None:
        self.future_ = concurrent.futures.Future[Any]()

    def future(self) -> concurrent.futures.Future[Any]:
        return self.future_


def _from_a_thread(*steps: Any) -> None:
    thread = threading.Thread(target=lambda: [step() for step in steps])
    thread.start()
    thread.join()


async def test_a_burst_of_completions_is_one_wake_of_the_loop_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refs = [_Ref() for _ in range(5)]
    seen: list[Any] = []
    for ref in refs:
        on_done(ref, lambda future: seen.append(future.result()))

    def broken(future: Any) -> None:
        raise RuntimeError("a broken callback")

    late = _Ref()
    on_done(late, broken)
    # All complete while the loop does not run: they arrive together, in order,
    # and one broken callback is logged without keeping the others from running.
    steps = [lambda: late.future_.set_result(None)]
    steps += [(lambda ref=ref, n=n: ref.future_.set_result(n)) for n, ref in enumerate(refs)]
    _from_a_thread(*steps)
    with caplog.at_level(logging.ERROR, logger="pride.cluster"):
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [0, 1, 2, 3, 4]
    assert "a completion callback failed" in caplog.text


async def test_wait_ref_returns_raises_and_is_cancellable() -> None:
    done, failed, never = _Ref(), _Ref(), _Ref()
    _from_a_thread(
        lambda: done.future_.set_result("value"),
        lambda: failed.future_.set_exception(ValueError("remote")),
    )
    assert await wait_ref(done) == "value"
    with pytest.raises(ValueError, match="remote"):
        await wait_ref(failed)
    cancelled = False

    async def waiting() -> None:
        nonlocal cancelled
        try:
            await wait_ref(never)
        except trio.Cancelled:
            cancelled = True
            raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiting)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert cancelled
    never.future_.set_result("too late")  # completing after the wait gave up wakes nobody
    await trio.testing.wait_all_tasks_blocked()
