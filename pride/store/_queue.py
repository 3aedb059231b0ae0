"""The write queue: what branches queued for the store, and the group commit that writes it.

Every branch of a store queues into one pending `Batch` (rows, turn-journal
and flow-journal operations, in order). A flush commits it: whoever flushes
while no write is under way takes the whole batch (every branch's rows: one
transaction, one fsync), and every other flush whose rows it holds waits for
that commit and shares its outcome. Rows queued while a commit is under way
go with the next one.

One write at a time (a `trio.Lock`, which saves and deletes take too).
Branches whose turns end together queue behind the commit under way, and
the first of them to get the lock commits all their rows at once: with 100
branches in step, one commit per round of turns (`benchmarks/bench_durable.py`).
(Waking the waiters all at once instead, on an event, was measured: it split
each round into a small commit and a large one, two fsyncs on the critical
path instead of one, for no measurable saving on the event loop's thread.)

Once a commit has taken the pending batch, the batch is written or put back
in front of the queue, never dropped: the write runs shielded from
cancellation, so a flush cancelled as its commit starts (waiting for a
worker thread) cannot leave other branches answered ok for rows that were
never written. The write itself cannot be abandoned anyway (a thread).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import trio

from ..errors import StoreError
from ._batch import AfterCommit, Batch, Row, materialised
from .flows import FlowOp
from .journal import JournalOp

__all__ = ["Spawn", "WriteQueue", "Writer"]

log = logging.getLogger("pride.store")

Writer = Callable[[list[Row], list[JournalOp], list[FlowOp]], None]
"""Writes one batch in one transaction (blocking: run in a worker thread)."""

Spawn = Callable[[Callable[[], Awaitable[None]]], None]
"""Starts a task (``nursery.start_soon``)."""


class WriteQueue:
    """The pending batch of a store, the commit under way, and who may write.

    Args:
        path: the store file (for messages).
        write: commits one batch (see `Writer`); called in a worker thread.
    """

    def __init__(self, path: Path, write: Writer) -> None:
        self.path = path
        self._write = write
        self.pending = Batch()
        self.committing: Batch | None = None
        self._lock = trio.Lock()  # one write at a time: a commit, a save, a delete
        self.commits = 0
        self._committer = False  # a task committing for the waiters runs (or was started)

    # ------------------------------------------------------------ queueing

    def row(self, row: Row) -> None:
        self.pending.rows.append(row)
        self.pending.branches[row[0]] += 1

    def refuse(self, branch_name: str, error: StoreError) -> None:
        """A message of ``branch_name`` could not be made a row: its next flush fails."""
        self.pending.refused.setdefault(branch_name, error)
        self.pending.branches[branch_name] += 1

    def journal(self, op: JournalOp) -> None:
        pending = self.pending
        ops = pending.journal.get(op.turn_id)
        if ops is None:
            pending.journal[op.turn_id] = [op]
        else:
            ops.append(op)
        pending.branches[op.branch_name] += 1

    def forget_unwritten_turn(self, branch_name: str, turn_id: str) -> bool:
        """Take a turn whose begin is still queued out of the queue (nothing of it is
        ever written); False if some of it was already taken by a commit."""
        pending = self.pending
        ops = pending.journal.get(turn_id)
        if ops is None or ops[0].kind != "begin":
            return False
        del pending.journal[turn_id]
        left = pending.branches[branch_name] - len(ops)
        if left > 0:
            pending.branches[branch_name] = left
        else:
            del pending.branches[branch_name]
        return True

    def flow(self, op: FlowOp, key: str, branch_name: str | None = None) -> None:
        """Queue a flow-journal operation: committed by a flush of ``key`` (the
        flow's), and of ``branch_name`` too when given (the branch whose turn
        produced it, so that the turn's commit carries it)."""
        self.pending.flows.append(op)
        self.pending.branches[key] += 1
        if branch_name is not None:
            self.pending.branches[branch_name] += 1

    def unwritten(self) -> bool:
        """True while something is queued or being committed."""
        return self.pending.holds(None) or self.committing is not None

    # ------------------------------------------------------------- writing

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Be the one write under way (a commit, a save, a delete) while inside."""
        async with self._lock:
            yield

    async def flush(self, key: str | None) -> None:
        """Wait until what ``key`` (a branch, or None: everyone) queued so far is
        committed, committing it if nobody else took it.

        Raises:
            StoreError: a commit holding the caller's rows failed (the rows
                stay queued, ahead of newer ones).
        """
        waiting = [
            batch
            for batch in (self.committing, self.pending)
            if batch is not None and batch.holds(key)
        ]
        for batch in waiting:
            if batch is self.pending:
                async with self._lock:
                    if batch is self.pending:  # nobody took it while we waited
                        await self._commit()
            await batch.done.wait()
            failure = batch.failure(key)
            if failure is not None:
                raise failure

    def after_commit(self, key: str, done: AfterCommit, spawn: Spawn) -> bool:
        """Call ``done(failure)`` once what ``key`` queued so far is committed (None)
        or a commit holding it failed (the StoreError), without waiting for it.

        Returns False, and calls nothing, when nothing of ``key`` is queued or
        being committed. Otherwise ``done`` is called, once, by whichever task
        commits the batch holding ``key``'s last rows (never from inside this
        call); if no commit is under way or started for waiters, ``spawn``
        starts one. Like `flush`, a commit of ``key``'s rows already under way
        that fails is ``done``'s failure too, even if the next one succeeds.
        """
        pending, committing = self.pending, self.committing
        earlier = committing if committing is not None and committing.holds(key) else None
        if pending.holds(key):
            pending.waiters.append((key, earlier, done))
            if not self._committer:
                self._committer = True
                spawn(self._commit_for_waiters)
            return True
        if earlier is not None:
            earlier.waiters.append((key, None, done))
            return True
        return False

    async def _commit_for_waiters(self) -> None:
        """Commit until no waiter waits for a queued batch (one commit per batch of
        turns: the waiters queued while one commit is under way share the next)."""
        try:
            # The waiters' callers are answered only by a commit: it must happen even
            # if the task hosting it is cancelled (a shutdown).
            with trio.CancelScope(shield=True):
                while self.pending.waiters:
                    async with self._lock:
                        if self.pending.waiters:  # nobody committed them meanwhile
                            await self._commit()
        finally:
            self._committer = False

    async def _commit(self) -> None:
        """Commit the pending batch (the caller holds the write)."""
        batch, self.pending = self.pending, Batch()
        self.committing = batch
        try:
            with trio.CancelScope(shield=True):  # taken: written, or given back
                # JSON given as functions is made here, in the event loop's thread.
                journal = [materialised(op) for op in batch.journal_ops()]
                flows = [op.materialised() for op in batch.flows]
                if batch.rows or journal or flows:
                    await trio.to_thread.run_sync(self._write, batch.rows, journal, flows)
        except Exception as exc:  # any failure (SQLite, the OS, a bug): never a lost batch
            batch.error = StoreError(f"writing to {self.path} failed: {exc}")
            batch.error.__cause__ = exc
            log.error(
                "%s (%d rows of %s kept queued for the next commit)",
                batch.error,
                len(batch.rows),
                ", ".join(sorted(batch.branches)),
            )
            self.pending.take_back(batch)
        else:
            self.commits += 1 if batch.rows or batch.journal or batch.flows else 0
        finally:
            self.committing = None
            batch.done.set()
            batch.answer_waiters()
