"""``pride run``'s answer lines on standard output, written off the event loop, bounded.

The problem: a client that writes requests and does not read its answers (or
reads them slower than they come) fills stdout's pipe, and a write on the
event loop's thread then blocks the whole process: no branch advances, and
SIGINT and SIGTERM are never answered, since the loop that would see them is
stuck in ``write`` (three SIGTERMs left it there; only SIGKILL ended it).
Options: make stdout non-blocking (``FdStream``; but the flag belongs to the
open file, which a terminal shares with stderr, so logging would start to
fail with ``EAGAIN``), drop answers nobody reads (loses them), or write from
a worker thread. The choice is the thread: one writer task takes the lines
in order and writes each batch in ``trio.to_thread``, so a blocked stdout
blocks only that thread.

A writer that can wait needs a bound on what waits for it: every request
read holds one of ``max_pending`` places until its answer line is written,
and the reader takes a place before it reads the next line. A client that
stops reading its answers therefore stops being read itself once
``max_pending`` answers wait (its own writes then block: backpressure), and
holds at most that many answers in the process. A line is read only once it
has a place, so stopping never leaves a read request without its answer.
"""

from __future__ import annotations

import logging
import math

import trio

from ._descriptors import write_all

__all__ = ["MAX_PENDING", "Answers"]

log = logging.getLogger("pride.cli")

MAX_PENDING = 1024
"""Requests read and not yet answered on stdout, by default (``--max-pending``)."""


class Answers:
    """The ordered, bounded output of answer lines (see the module docstring).

    Args:
        fd: the descriptor answers are written to (standard output).
        max_pending: how many request lines may be read before their answers
            are written.
    """

    def __init__(self, fd: int = 1, max_pending: int = MAX_PENDING) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self._fd = fd
        self._places = trio.Semaphore(max_pending)
        self._send, self._receive = trio.open_memory_channel[tuple[str, bool]](math.inf)
        self._written = trio.Event()
        self._broken = False
        # One deadline for every wait on the last writes: the serving part's drain and
        # the process's exit both wait, and the second must not wait a bound anew.
        self._deadline = math.inf
        self._waits: set[trio.CancelScope] = set()
        self.unwritten = 0
        """Lines given up on: stdout broke, or the forced stop stopped waiting for it."""

    async def place(self) -> None:
        """Wait for a place for the next request line (call before reading it)."""
        await self._places.acquire()

    def give_back(self) -> None:
        """Return the place taken for a line that needs no answer (blank, or end of input)."""
        self._places.release()

    def write(self, line: str, *, placed: bool = True) -> None:
        """Queue one answer line; never blocks. ``placed`` says it answers a line that
        took a place (False for an answer nobody's line asked for here: a resumed turn)."""
        try:
            self._send.send_nowait((line, placed))
        except trio.ClosedResourceError:  # after the final flush began: nothing may be lost quietly
            self.unwritten += 1
            log.error("an answer came after the output closed and is not written: %s", line[:200])

    async def run(self) -> None:
        """Write the queued lines in order until `close`; the writer task."""
        try:
            async with self._receive:
                async for first, first_placed in self._receive:
                    batch, places = [first], int(first_placed)
                    while True:  # what else is queued goes in the same write
                        try:
                            line, placed = self._receive.receive_nowait()
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                        batch.append(line)
                        places += placed
                    await self._write(batch)
                    for _ in range(places):
                        self._places.release()
        finally:
            self._written.set()

    async def _write(self, batch: list[str]) -> None:
        if self._broken:
            self.unwritten += len(batch)
            return
        data = "".join(line + "\n" for line in batch).encode("utf-8")
        try:
            await trio.to_thread.run_sync(write_all, self._fd, data, abandon_on_cancel=True)
        except trio.Cancelled:
            self.unwritten += len(batch) + self._receive.statistics().current_buffer_used
            raise
        except OSError as exc:  # the reader went away: keep serving, but say so
            self._broken = True
            self.unwritten += len(batch)
            log.error("cannot write answers to stdout (the next are dropped): %s", exc)

    def close(self) -> None:
        """No more lines: the writer ends once the queued ones are written."""
        self._send.close()

    async def flush(self, bound: float) -> bool:
        """`close`, then wait until every queued line is written: at most ``bound``
        seconds from now, and never past the deadline an earlier flush (or `hurry`)
        set, so the last writes are waited for within one bound however many parts of
        the process wait on them. True when the writer has ended, every line written
        (or counted in `unwritten`); False when the wait gave up.
        """
        self.close()
        self._deadline = min(self._deadline, trio.current_time() + bound)
        with trio.CancelScope(deadline=self._deadline) as scope:
            self._waits.add(scope)
            try:
                await self._written.wait()
            finally:
                self._waits.discard(scope)
        return self._written.is_set()

    def hurry(self, bound: float) -> None:
        """Bring the flush's deadline to at most ``bound`` seconds from now, a wait in
        progress included (a forced stop). Before any flush it does nothing: the first
        flush is given its own bound."""
        if self._deadline == math.inf and not self._waits:
            return
        self._deadline = min(self._deadline, trio.current_time() + bound)
        for scope in self._waits:
            scope.deadline = min(scope.deadline, self._deadline)
