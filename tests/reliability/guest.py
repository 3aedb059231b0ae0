"""Drive one trio run a step at a time from synchronous code (hypothesis rules).

hypothesis's ``RuleBasedStateMachine`` calls its rules synchronously, one
after another, while a branch needs its actor running across all of them.
trio's guest mode (:func:`trio.lowlevel.start_guest_run`) lets synchronous
code host the run loop: trio hands the host each batch of work as a
callback and makes progress only while the host runs those callbacks. Here
the host is the test itself. :meth:`GuestRun.call` gives the run a job and
runs trio's callbacks until the job has finished *and every task is blocked*;
between two calls trio is paused, so the next rule starts from a quiescent
world. With a ``MockClock`` (autojump) and no real I/O, the run is as
deterministic as ``trio.run``, and pytest-trio's seeding of trio's scheduler
under hypothesis applies to it as well.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Awaitable, Callable
from typing import Any

import outcome
import trio
import trio.testing


class GuestRun:
    """One trio run, hosted by synchronous code.

    ``main(serve)`` is the run's root: it sets up whatever must outlive single
    jobs (a session, a nursery of callers), then awaits ``serve()``, which runs
    jobs until :meth:`close`. If trio makes no progress for ``patience`` real
    seconds, the host gives up with :class:`RuntimeError` rather than hang.
    """

    def __init__(
        self,
        main: Callable[[Callable[[], Awaitable[None]]], Awaitable[None]],
        *,
        clock: trio.abc.Clock,
        patience: float = 60.0,
    ) -> None:
        self._callbacks: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._patience = patience
        self._finished: outcome.Outcome[None] | None = None
        self._answer: outcome.Outcome[Any] | None = None
        self._jobs: trio.MemorySendChannel[Callable[[], Awaitable[Any]]] | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._root = trio.CancelScope()

        async def root() -> None:
            with self._root:
                await main(self._serve)

        trio.lowlevel.start_guest_run(
            root,
            run_sync_soon_threadsafe=self._callbacks.put,
            done_callback=self._done,
            clock=clock,
        )
        self._pump(lambda: self._jobs is not None)

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        send, receive = trio.open_memory_channel[Callable[[], Awaitable[Any]]](math.inf)
        self._jobs = send
        async with receive:
            async for job in receive:
                answer = await outcome.acapture(job)
                await trio.testing.wait_all_tasks_blocked()
                self._answer = answer

    def _done(self, result: outcome.Outcome[None]) -> None:
        self._finished = result

    def _pump(self, until: Callable[[], bool]) -> None:
        """Run trio's callbacks until ``until()`` holds."""
        while not until():
            if self._finished is not None:
                self._finished.unwrap()  # the run failed: that is the error to see
                raise RuntimeError("the trio run ended while a job was outstanding")
            try:
                callback = self._callbacks.get(timeout=self._patience)
            except queue.Empty:
                raise RuntimeError(f"trio made no progress for {self._patience} s") from None
            callback()

    def call(self, job: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``await job()`` inside the run and return (or raise) its outcome, once
        every task of the run is blocked."""
        assert self._token is not None and self._jobs is not None, "the run is not serving"
        self._answer = None
        self._token.run_sync_soon(self._jobs.send_nowait, job)
        self._pump(lambda: self._answer is not None)
        return self._take_answer().unwrap()

    def _take_answer(self) -> outcome.Outcome[Any]:
        answer, self._answer = self._answer, None
        assert answer is not None
        return answer

    def close(self) -> None:
        """Stop serving, let ``main`` finish, and raise whatever it raised."""
        if self._finished is None:
            assert self._token is not None and self._jobs is not None
            self._token.run_sync_soon(self._jobs.close)
            self._pump(lambda: self._finished is not None)
        assert self._finished is not None
        self._finished.unwrap()

    def abandon(self) -> None:
        """Cancel everything and wait for the run to end (after a failure)."""
        if self._finished is None and self._token is not None:
            self._token.run_sync_soon(self._root.cancel)
            self._pump(lambda: self._finished is not None)
