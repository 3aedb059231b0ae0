"""One trio guest run on one asyncio loop: started, driven, kept hot, stopped.

trio's guest mode (`trio.lowlevel.start_guest_run`) unrolls trio's scheduler
into callbacks on the host loop and does its I/O wait in a worker thread. Two
things make that costly for a bridge that hands many short calls across, and
this module answers both with trio's public hooks only:

* **Waking trio costs a thread round trip.** When trio has nothing runnable it
  waits for I/O in its thread; a call handed in from asyncio then has to wake
  that thread, which wakes the loop again (`call_soon_threadsafe`), before the
  call even starts: measured at 4.7x a trio-native ask for a naive bridge. So
  after every call (and every other crossing) trio is kept **hot** for
  `LINGER` seconds: a task waits in `trio.testing.wait_all_tasks_blocked`,
  which makes trio poll for I/O without sleeping (timeout 0) for as long as
  it waits, and wakes only when every other trio task is blocked. While work
  flows it costs nothing; once trio is idle it costs one loop pass per tick
  until `LINGER` has gone by with no crossing, and then trio sleeps in its
  thread as usual (the next call pays one wake-up).
* **Each scheduler pass is a loop callback.** trio asks the host to run its
  next pass "soon" through ``run_sync_soon_not_threadsafe``; this module's
  driver runs up to `MAX_TICKS` passes back to back in one callback while
  trio has work and has produced nothing for asyncio, and yields to the loop
  as soon as it has (a caller's answer, a signal to a handler) or goes idle.

The guest run is one per loop (trio allows one per thread): every team opened
on a loop shares it, it starts with the first and ends when the last closes.
It also owns the pool of trio tasks that run calls (`submit`): a task parked
for the next call is handed it with one `trio.lowlevel.reschedule`, where a
new task per call would cost a spawn.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import outcome
import trio
import trio.testing

from ..errors import exception_leaves
from ._errors import TeamClosed
from ._wake import wake_on_signals

__all__ = [
    "LINGER",
    "MAX_IDLE_WORKERS",
    "MAX_TICKS",
    "Guest",
    "Job",
    "acquire",
    "release",
    "wait_through",
]

log = logging.getLogger("pride.aio")

LINGER = 0.0005
"""Seconds trio stays hot (polling instead of sleeping in its I/O thread) after
the last crossing between asyncio and trio. Half a millisecond covers the gap
between one call's answer and the next call of a caller that loops; it costs at
most that much CPU each time the bridge falls quiet."""

MAX_TICKS = 16
"""trio scheduler passes run back to back in one loop callback, at most."""

MAX_IDLE_WORKERS = 1024
"""trio tasks kept parked for the next call; past that a finished worker exits."""


class Job(Protocol):
    """What the pool runs: one call (see `pride.aio._calls.Call`)."""

    async def run(self, scope: trio.CancelScope) -> None:
        """Run in a worker task (``scope.cancel()`` cancels it); answer the asyncio side;
        never raise but Cancelled."""
        ...


class Member(Protocol):
    """What the guest asks of a team when its run ends before the team closed."""

    def guest_ended(self, error: BaseException) -> None: ...


_guests: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Guest] = weakref.WeakKeyDictionary()

# The guest run of this thread, from its start to its end: one whose loop stopped
# before it ended holds the thread's trio run for good, and says so when refused.
_this_thread = threading.local()


async def acquire(loop: asyncio.AbstractEventLoop) -> Guest:
    """The guest run on ``loop``, started if there is none; counts one more user.

    Raises:
        RuntimeError: this thread already runs trio (``trio.run``, or a guest
            run pride did not start).

    Cancellation: cancelled while the run starts, nothing is counted (a run
    started for nobody stops again once the last user leaves).
    """
    guest = _guests.get(loop)
    while guest is not None and guest.stopping:  # the last team just left: let it end
        await guest.wait_finished()
        guest = _guests.get(loop)
    if guest is None:
        guest = Guest(loop)
        guest.start()
        _guests[loop] = guest
    guest.users += 1
    try:
        await asyncio.shield(guest.started)
    except BaseException:
        await release(guest)
        raise
    return guest


async def release(guest: Guest) -> None:
    """Count one user less; the last one stops the run and waits for its end.

    Cancellation: the wait goes on (the run stops promptly: only parked tasks
    are left in it); the cancellation is raised after it.
    """
    guest.users -= 1
    if guest.users > 0 or guest.stopping:
        return
    guest.stop()
    cancelled = await wait_through(guest.finished)
    if cancelled is not None:
        raise cancelled


async def wait_through(
    future: asyncio.Future[Any], *, on_cancel: Callable[[], object] | None = None
) -> asyncio.CancelledError | None:
    """Wait for ``future`` whatever happens; return the cancellation that came meanwhile.

    For the waits that must see their end even when the waiting task is
    cancelled (a closing run, a call's trio side finishing): the caller
    raises the cancellation after. ``on_cancel()`` runs at each cancellation
    (to hurry what is waited for).
    """
    cancelled = None
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError as exc:
            cancelled = exc
            if on_cancel is not None:
                on_cancel()
    return cancelled


class Guest:
    """A trio run hosted by one asyncio loop, in that loop's thread.

    Made and started by `acquire`, stopped by the last `release`.
    ``nursery`` holds every team's session task and the pool's workers.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.users = 0
        self.stopping = False
        self.members: weakref.WeakSet[Any] = weakref.WeakSet()
        self.started: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
        self.nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        # The driver: the one pass trio asked to run next, and whether a driver
        # callback is running it now.
        self._next_tick: Callable[[], object] | None = None
        self._driving = False
        self.yield_to_host = False
        # Hot: until when trio polls instead of sleeping, and the hot task when parked.
        self._hot_until = 0.0
        self._cold_task: trio.lowlevel.Task | None = None
        # The pool: worker tasks parked for their next job, most recent last.
        self._idle: list[trio.lowlevel.Task] = []
        # Undoes `wake_on_signals` when the run ends (None: it did nothing).
        self._unwake: Callable[[], None] | None = None

    # ------------------------------------------------------------ the run

    def start(self) -> None:
        """Start the guest run on the loop (from a coroutine running on it)."""
        try:
            trio.lowlevel.start_guest_run(
                self._main,
                run_sync_soon_threadsafe=self.loop.call_soon_threadsafe,
                run_sync_soon_not_threadsafe=self._tick_soon,
                done_callback=self._done,
                # The host keeps SIGINT and the signal wake-up fd: trio must not take
                # the fd from asyncio (which would then miss its own signals) nor give
                # it back wrongly when it ends. See docs/asyncio.md on Ctrl-C.
                host_uses_signal_set_wakeup_fd=True,
            )
        except RuntimeError as exc:
            left: Guest | None = getattr(_this_thread, "guest", None)
            if left is not None and left.loop.is_closed():
                teams = ", ".join(sorted(repr(member) for member in left.members)) or "a team"
                raise RuntimeError(
                    "pride.aio cannot start trio in this thread: a team of an earlier "
                    f"asyncio loop here was never closed ({teams}), and that loop stopped "
                    "with the team's trio run still in it. That run can never end, and trio "
                    "allows one run per thread: no trio can start in this thread again. "
                    "Close every team before its loop stops (leave its async with block, "
                    "or await team.aclose())."
                ) from exc
            raise RuntimeError(
                "pride.aio cannot start trio as a guest of this loop: this thread already "
                f"runs trio ({exc}). Use pride's trio API directly there, or open the "
                "team from a thread whose asyncio loop runs no other trio."
            ) from exc
        _this_thread.guest = self
        # While trio sleeps in its I/O thread nothing wakes the loop for a signal handler
        # that scheduled its work with a plain call_soon (ipykernel's interrupt): a signal
        # wakes it now, where the host set no wake-up fd of its own (pride.aio._wake).
        self._unwake = wake_on_signals(self.loop)

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self._stop = trio.Event()
            nursery.start_soon(self._keep_hot)
            self.started.set_result(None)
            await self._stop.wait()
            nursery.cancel_scope.cancel()  # parked workers and the hot task: nothing else

    def stop(self) -> None:
        """End the run once its nursery is empty but for parked tasks (no team left)."""
        self.stopping = True
        if self._stop is not None:
            self._stop.set()

    async def wait_finished(self) -> None:
        """Wait until the run has ended (cancellation: only the waiting stops)."""
        await asyncio.wait((self.finished,))

    def _done(self, result: outcome.Outcome[None]) -> None:
        if getattr(_this_thread, "guest", None) is self:
            del _this_thread.guest
        unwake, self._unwake = self._unwake, None
        if unwake is not None:
            unwake()
        if _guests.get(self.loop) is self:
            del _guests[self.loop]
        self.stopping = True
        if not self.started.done():
            self.started.set_exception(
                RuntimeError(f"pride.aio: the trio guest run ended before it started: {result!r}")
            )
        error = result.error if isinstance(result, outcome.Error) else None
        if error is not None:
            log.error("pride.aio: the trio guest run ended with an error", exc_info=error)
            ended = TeamClosed(f"the trio guest run ended: {error!r}")
            ended.__cause__ = error
            for member in list(self.members):
                member.guest_ended(ended)
        self.finished.set_result(result)
        if error is not None and _is_interrupt(error):
            # trio took SIGINT (the host had left it to Python's default handler) and
            # delivered it into the run, which ended with it: raise it where an asyncio
            # program expects it, out of the loop's run_until_complete / run_forever.
            raise KeyboardInterrupt

    # ------------------------------------------------------------ the driver

    def _tick_soon(self, tick: Callable[[], object]) -> None:
        # trio's run_sync_soon_not_threadsafe: called in this thread, once per pass.
        self._next_tick = tick
        if not self._driving:
            self.loop.call_soon(self._drive)

    def _drive(self) -> None:
        self._driving = True
        try:
            for _ in range(MAX_TICKS):
                tick, self._next_tick = self._next_tick, None
                if tick is None:
                    break
                self.yield_to_host = False
                tick()
                if self.yield_to_host:
                    break
        finally:
            self._driving = False
        if self._next_tick is not None:
            self.loop.call_soon(self._drive)

    # ------------------------------------------------------------ keeping trio hot

    def heat(self) -> None:
        """Note a crossing: keep trio polling for `LINGER` seconds from now."""
        self._hot_until = time.perf_counter() + LINGER
        task, self._cold_task = self._cold_task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def _keep_hot(self) -> None:
        task = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._cold_task = None
            return trio.lowlevel.Abort.SUCCEEDED

        while True:
            if time.perf_counter() < self._hot_until:
                # Returns when every other trio task is blocked: trio is idle, so the
                # loop gets its turn before the next pass.
                await trio.testing.wait_all_tasks_blocked()
                self.yield_to_host = True
            else:
                self._cold_task = task
                await trio.lowlevel.wait_task_rescheduled(abort)

    # ------------------------------------------------------------ the pool

    def note_crossing(self) -> None:
        """Note that asyncio just handed trio work (on the asyncio side): trio asleep in
        its I/O thread is kept hot from now (the work itself wakes it)."""
        if self._cold_task is not None:
            self.heat()

    def submit(self, job: Job) -> None:
        """Have ``job.run()`` run in a trio task soon (called on the asyncio side)."""
        self.note_crossing()
        if self._idle:
            trio.lowlevel.reschedule(self._idle.pop(), outcome.Value(job))
        elif self.nursery is None or self.stopping:
            raise TeamClosed("the trio guest run has ended")
        else:
            # Spawned in an empty context: a worker serves many callers, so it carries
            # none of the first caller's context variables.
            contextvars.Context().run(self.nursery.start_soon, self._worker, job)

    async def _worker(self, job: Job) -> None:
        task = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._idle.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        # One cancel scope for the worker's life, handed to each job: cancelling it
        # cancels the job running, and then the worker ends.
        with trio.CancelScope() as scope:
            await job.run(scope)
            while not scope.cancel_called and len(self._idle) < MAX_IDLE_WORKERS:
                self._idle.append(task)
                job = await trio.lowlevel.wait_task_rescheduled(abort)
                await job.run(scope)

    def after_call(self) -> None:
        """Note that trio just made work for asyncio (an answer): let the loop run."""
        self.yield_to_host = True
        if not self.finished.done():
            self.heat()


def _is_interrupt(error: BaseException | None) -> bool:
    """True when ``error`` is (or was caused by, or groups) a KeyboardInterrupt."""
    while error is not None:
        leaves = exception_leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            return True
        error = error.__cause__
    return False
