"""The write queue: what branches queued for the store, and the group commit that writes it.

Every branch of a store queues into one pending `Batch` (rows, turn-journal
and flow-journal operations, in order). Commits run one at a time, each in a
worker thread, each taking the whole pending batch (every branch's rows: one
transaction, one fsync). A batch is committed once someone waits for it (a
`flush`, or a turn handed to its commit with `after_commit`): at once if no
write is under way, else as soon as the one under way ends. So while one
commit is on its way to the disk, the branches answered by the previous one
run their next turns, and their rows make the next batch: the event loop
keeps working while the disk does (classic group commit), and a commit's
size is whatever accumulated during the last one.

A commit is started synchronously, by the call that wants it or by the end
of the previous commit (`trio.lowlevel.start_thread_soon`, handing the
outcome back through the trio token), not by a task: no task waits on the
disk, no task switch is spent per commit, and nobody's cancellation can
abandon a batch that was taken. Once a commit has taken the pending batch,
the batch is written or put back in front of the queue, never dropped.

Saves and deletes are queued rows like any other (`pride.store._batch`), so
they land in the order they were called, between the rows queued before
and after them.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import outcome
import trio

from ..errors import StoreError
from ._batch import AfterCommit, Batch, Row
from .flows import FlowOp
from .journal import JournalOp

__all__ = ["WriteQueue", "Writer"]

log = logging.getLogger("pride.store")

Writer = Callable[[list[Row], list[JournalOp], list[FlowOp]], None]
"""Writes one batch in one transaction (blocking: run in a worker thread)."""


class WriteQueue:
    """The pending batch of a store, the commit under way, and who may write.

    Args:
        path: the store file (for messages).
        write: commits one batch (see `Writer`); called in a worker thread.
        max_row_bytes: the bound on a journal row (`Batch.bounded_ops`).
    """

    def __init__(self, path: Path, write: Writer, max_row_bytes: int) -> None:
        self.path = path
        self.max_row_bytes = max_row_bytes
        self._write = write
        self.pending = Batch()
        self.committing: Batch | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.commits = 0
        # A row refused in a batch that another branch's flush committed: nobody
        # of its branch waited on that batch, so its next flush fails with it
        # (else the turn that queued it would be answered as durable).
        self.unheard: dict[str, StoreError] = {}

    # ------------------------------------------------------------ queueing

    def row(self, row: Row) -> None:
        pending = self.pending
        pending.rows.append(row)
        branches = pending.branches  # get(), not +=: a Counter's __missing__ is Python
        branches[row[0]] = branches.get(row[0], 0) + 1

    def rows(self, branch_name: str, rows: list[Row]) -> None:
        """Queue ``rows``, all of ``branch_name``, in order."""
        pending = self.pending
        pending.rows.extend(rows)
        branches = pending.branches
        branches[branch_name] = branches.get(branch_name, 0) + len(rows)

    def refuse(self, branch_name: str, error: StoreError) -> None:
        """A message of ``branch_name`` could not be made a row: its next flush fails."""
        pending = self.pending
        pending.branches[branch_name] += 1
        pending.refuse(branch_name, error, pending.mark(branch_name))

    def journal(self, op: JournalOp) -> None:
        pending = self.pending
        ops = pending.journal.get(op.turn_id)
        if ops is None:
            pending.journal[op.turn_id] = [op]
        else:
            ops.append(op)
        pending.branches[op.branch_name] += 1
        pending.marks[op.turn_id] = pending.mark(op.branch_name)

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

    def holds(self, branch_name: str) -> bool:
        """True while rows of ``branch_name`` are queued or being committed."""
        committing = self.committing
        return self.pending.holds(branch_name) or (
            committing is not None and committing.holds(branch_name)
        )

    def unwritten(self) -> bool:
        """True while something is queued or being committed."""
        return self.pending.holds(None) or self.committing is not None

    # ------------------------------------------------------------- writing

    async def flush(self, key: str | None) -> None:
        """Wait until what ``key`` (a branch, or None: everyone) queued so far is
        committed, committing it if nobody else did.

        Raises:
            StoreError: a commit holding the caller's rows failed (the rows
                stay queued, ahead of newer ones).

        A row of ``key`` refused in a commit that someone else's flush started
        (before ``key`` waited for it) fails this flush too: it was never written.

        Cancellation: the commit goes on (and shares its outcome with everyone
        else waiting for it); only the wait ends.
        """
        waiting = [
            batch
            for batch in (self.committing, self.pending)
            if batch is not None and batch.holds(key)
        ]
        if key is not None:
            for batch in waiting:
                batch.heard.add(key)
        failure = None
        for batch in waiting:
            if batch is self.pending:
                self._want(batch)
            await batch.done.wait()
            failure = batch.failure(key)
            if failure is not None:
                break
        # Taken only now: a flush cancelled while it waits leaves it for the next.
        unheard = None if key is None or not self.unheard else self.unheard.pop(key, None)
        failure = failure or unheard
        del unheard
        if failure is not None:
            try:  # its traceback holds this frame: no cycle through the local
                raise failure
            finally:
                del failure

    def after_commit(self, key: str, done: AfterCommit) -> bool:
        """Call ``done(failure)`` once what ``key`` queued so far is committed (None)
        or a commit holding it failed (the StoreError), without waiting for it.

        Returns False, and calls nothing, when nothing of ``key`` is queued or
        being committed and no row of it was refused unheard (see `flush`).
        Otherwise ``done`` is called, once, when the commit holding ``key``'s
        last rows ends (never from inside this call); that commit starts at
        once if no write is under way. Like `flush`, a commit
        of ``key``'s rows already under way that fails is ``done``'s failure
        too, even if the next one succeeds.
        """
        pending, committing = self.pending, self.committing
        earlier = committing if committing is not None and committing.holds(key) else None
        unheard = self.unheard.pop(key, None) if self.unheard else None
        if unheard is not None:  # refused in a commit someone else started: say so
            done = _failing_with(unheard, done)
        if earlier is not None:
            earlier.heard.add(key)
        if pending.branches.get(key, 0) > 0:  # pending.holds(key), asked by every turn
            pending.waiters.append((key, earlier, done, pending.mark(key)))
            self._want(pending)
            return True
        if earlier is not None:
            earlier.waiters.append((key, None, done, math.inf))
            return True
        if unheard is not None:  # answered after this call, as a commit would be
            told = Batch()
            told.waiters.append((key, None, done, math.inf))
            trio.lowlevel.current_trio_token().run_sync_soon(told.answer_waiters)
            return True
        return False

    def _keep_unheard(self, batch: Batch) -> None:
        """Keep the refusals of ``batch`` nobody concerned heard for their keys' next
        flush. One refusal can name several keys (a flow's event: the flow's and the
        branch whose turn carried it); told to any of them, it was heard."""
        covered: dict[str, float] = {}  # per key, the last mark its waiters cover
        for key, _earlier, _done, covers in batch.waiters:
            covered[key] = max(covered.get(key, 0), covers)
        named: dict[int, tuple[StoreError, list[tuple[str, float]]]] = {}
        for key, mark, refused in batch.refusals:
            named.setdefault(id(refused), (refused, []))[1].append((key, mark))
        for refused, keys in named.values():
            heard = any(
                key in batch.heard or (key in covered and (not mark or mark <= covered[key]))
                for key, mark in keys
            )
            if not heard:
                for key, _mark in keys:
                    self.unheard.setdefault(key, refused)

    def _want(self, batch: Batch) -> None:
        """Someone waits for ``batch`` (the pending one): commit it once the tasks
        running now have run, so that the branches whose turns end together
        share one commit."""
        if batch.wanted:
            return
        batch.wanted = True
        if self._token is None:
            self._token = trio.lowlevel.current_trio_token()
        self._token.run_sync_soon(self._kick)

    def _kick(self) -> None:
        """Start committing the pending batch if someone waits for it and nothing
        else writes."""
        if self.committing is None and self.pending.wanted:
            self._start()

    def _start(self) -> None:
        """Take the pending batch and start writing it in a worker thread."""
        if self._token is None:
            self._token = trio.lowlevel.current_trio_token()
        batch, self.pending = self.pending, Batch()
        self.committing = batch
        try:
            # JSON given as functions is made here, in the event loop's thread, and
            # every journal row measured against the store's bound.
            journal, flows = batch.bounded_ops(self.path, self.max_row_bytes)
        except Exception as exc:  # never a lost batch: fail it like a failed write
            self._token.run_sync_soon(self._written, batch, False, outcome.Error(exc))
            return
        if not (batch.rows or journal or flows):  # answered after this call, like a write
            self._token.run_sync_soon(self._written, batch, False, outcome.Value(None))
            return
        rows, token, written = batch.rows, self._token, self._written

        def deliver(result: outcome.Outcome[Any]) -> None:  # in the worker thread
            try:
                token.run_sync_soon(written, batch, True, result)
            except trio.RunFinishedError:  # the store was never closed: nothing to answer
                log.error("%s: a commit ended after its event loop did", self.path)

        try:
            trio.lowlevel.start_thread_soon(
                lambda: self._write(rows, journal, flows), deliver, name=f"pride store {self.path}"
            )
        except Exception as exc:  # no thread to be had (often called outside any task)
            self._token.run_sync_soon(self._written, batch, False, outcome.Error(exc))

    def _written(self, batch: Batch, wrote: bool, result: outcome.Outcome[Any]) -> None:
        """A commit ended (in the event loop's thread): settle its batch, answer
        who waited for it, and start the next commit if one is wanted."""
        if isinstance(result, outcome.Error):
            exc = result.error
            batch.error = StoreError(f"writing to {self.path} failed: {exc}")
            batch.error.__cause__ = exc
            log.error(
                "%s (%d rows of %s kept queued for the next commit)",
                batch.error,
                len(batch.rows),
                ", ".join(sorted(batch.branches)),
            )
            self.pending.take_back(batch)
        elif wrote:
            self.commits += 1
        if batch.refused:
            self._keep_unheard(batch)
        self.committing = None
        batch.done.set()
        batch.answer_waiters()
        self._kick()


def _failing_with(error: StoreError, done: AfterCommit) -> AfterCommit:
    """``done``, told ``error`` whatever the commit it waits for answers."""

    def told(failure: StoreError | None) -> None:
        done(failure or error)

    return told
