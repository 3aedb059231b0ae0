"""The write queue: rows and journal operations (turns', flows') committed together, in order.

A `Batch` collects what branches queue between two commits; every flush
waiting on it shares its outcome. A row whose sequence number is `REWRITE`
stands for "delete the branch's stored messages": the rows after it are its
new conversation; `HEADER` for its projection and `DELETE` for forgetting it
(saves and deletes are queued like messages, so they land in call order).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from ..errors import StoreError
from ._bounds import oversize, refusal
from .flows import FlowOp, flow_key
from .journal import FAILED, JournalOp, Text, status_room

__all__ = ["DELETE", "HEADER", "REWRITE", "AfterCommit", "Batch", "Row", "materialised"]

log = logging.getLogger("pride.store")

# In a queued batch, a row with this sequence number stands for "delete the
# branch's stored messages": the rows after it are its new conversation.
REWRITE = -1
# A row with this one is a branch's projection (``message_id`` its branch id,
# ``data`` its JSON): "store this branch", committed with the rows after it.
HEADER = -2
# And this one: "forget the branch": its projection, its messages, its journaled turns.
DELETE = -3

Row = tuple[str, int, str, str]

AfterCommit = Callable[[StoreError | None], None]
"""Called once a batch's commit is over: with None (committed) or the failure."""


@attrs.define
class Batch:
    """Rows committed together, and the outcome every flush waiting on them shares.

    ``journal`` holds the journal operations by turn (in the order turns first
    appear; each turn's in order); ``branches`` counts each branch's rows and
    operations, so a flush waits only for a batch that holds something of its own.
    """

    rows: list[Row] = attrs.field(factory=list)
    journal: dict[str, list[JournalOp]] = attrs.field(factory=dict)
    flows: list[FlowOp] = attrs.field(factory=list)
    branches: collections.Counter[str] = attrs.field(factory=collections.Counter)
    done: trio.Event = attrs.field(factory=trio.Event)
    error: StoreError | None = None
    refused: dict[str, StoreError] = attrs.field(factory=dict)
    """Per branch, the first message queued in this batch that could not be made a row:
    the branch's flush fails with it, so the turn that recorded it is not answered ok."""
    refusals: list[tuple[str, float, StoreError]] = attrs.field(factory=list)
    """Every refusal as ``(key, mark, error)``: ``mark`` is how many operations ``key``
    had queued in this batch once the refused row was queued (`mark`), so that a
    commit waiter hears only the refusals of what it waits for (``0``: unmarked,
    every waiter of ``key`` hears it)."""
    marks: dict[str, int] = attrs.field(factory=dict)
    """Per turn, the mark of its last journal operation queued in this batch."""
    heard: set[str] = attrs.field(factory=set)
    """The keys whose flush waited on this batch (told its whole outcome) or whose
    waiter was given this batch as ``earlier``. A refusal no flush and no waiter of
    its keys heard is kept for that key's next flush (`WriteQueue.unheard`)."""
    wanted: bool = False
    """Someone waits for this batch's commit (a flush, a waiter): commit it next."""
    waiters: list[tuple[str, Batch | None, AfterCommit, float]] = attrs.field(factory=list)
    """What to call once this batch's commit is over: ``(key, earlier, done, covers)``,
    where ``earlier`` is the batch that was being committed with rows of ``key`` when
    the waiter was added (its failure is the waiter's too), see
    `WriteQueue.after_commit`, and ``covers`` the mark of ``key`` then (``inf``: all):
    the waiter hears the refusals marked after the waiter before it, up to that."""

    def holds(self, branch_name: str | None) -> bool:
        if branch_name is None:
            return bool(self.rows or self.journal or self.flows or self.refused)
        return self.branches[branch_name] > 0

    def failure(self, branch_name: str | None) -> StoreError | None:
        if self.error is not None:
            return self.error
        if branch_name is None:
            return next(iter(self.refused.values()), None)
        return self.refused.get(branch_name)

    def mark(self, key: str) -> int:
        """How many operations ``key`` has queued in this batch (a position in them)."""
        return self.branches.get(key, 0)

    def refusal_between(self, key: str, after: float, upto: float) -> StoreError | None:
        """The first refusal of ``key`` marked in ``(after, upto]`` (or unmarked)."""
        for refused_key, mark, error in self.refusals:
            if refused_key == key and (not mark or after < mark <= upto):
                return error
        return None

    def answer_waiters(self) -> None:
        """Call every waiter with its outcome (the commit is over); a waiter that
        raises is logged, and the others are still called. Nothing raised escapes:
        this runs outside any task (a callback of trio's run loop), where an
        exception, even a BaseException, would crash the whole run.

        A waiter hears the write's failure, or the refusals of what its key queued
        since the waiter of that key before it: two turns of one branch sharing a
        batch (the second served while the first waits for its commit) are each
        told of their own rows only."""
        waiters, self.waiters = self.waiters, []
        clean = self.error is None and not self.refused  # the common case: no lookups
        ranges: dict[str, tuple[float, float]] = {}  # per key, the last waiter's marks
        for key, earlier, done, covers in waiters:
            failure = None
            if not clean:
                after, upto = ranges.get(key, (0, 0))
                if covers != upto:  # a waiter with nothing queued since shares the range
                    after, upto = upto, covers
                    ranges[key] = (after, upto)
                failure = self.error or self.refusal_between(key, after, upto)
            if failure is None and earlier is not None:
                failure = earlier.failure(key)
            try:
                done(failure)
            except BaseException:
                log.exception("a commit waiter of %r failed", key)

    def journal_ops(self) -> list[JournalOp]:
        return [op for ops in self.journal.values() for op in ops]

    def bounded_ops(self, path: Path, bound: int) -> tuple[list[JournalOp], list[FlowOp]]:
        """The journal and flow operations to commit, their JSON made (called when the
        commit starts, in the event loop's thread).

        An operation whose row is over ``bound`` bytes (`pride.store._bounds`) is
        taken out of the batch, never written: its branch's flush (and its
        flow's) fails with the error naming it, so the turn that made it fails.
        A refused begin takes its turn's (or flow's) other operations of the
        batch with it: steps without their turn would be rows nobody reads. A begin
        is measured with the room its status changes may take (`status_room`). A
        refused step or status change marks its turn failed in the same commit
        (`_failed`); a refused flow event is replaced by what its ``refused`` makes.
        """
        journal: list[JournalOp] = []
        for turn_id, ops in list(self.journal.items()):
            kept: list[JournalOp] = []
            changed = False
            for op in map(materialised, ops):
                room = status_room(op.tag, op.detail) if op.kind == "begin" else 0
                size = oversize(max(bound - room, 0), *_journal_columns(op))
                if not size:
                    kept.append(op)
                    continue
                changed = True
                error = refusal(path, _journal_row(op, room), size + room, bound)
                self._refuse((op.branch_name,), error, self.marks.get(op.turn_id, 0))
                if op.kind == "begin":
                    kept = []
                    break
                # The turn fails here; its entry says so in this same commit, so that
                # a process stopping before the turn's end is committed leaves a turn
                # a restart abandons, never one it resumes without the refused row.
                kept.append(_failed(op, size, bound))
            if changed:  # what a failed write puts back: what is committed, no more
                if kept:
                    self.journal[turn_id] = kept
                else:
                    del self.journal[turn_id]
            journal.extend(kept)
        flows: list[FlowOp] = []
        dropped: set[str] = set()
        refused = False
        for flow_op in map(FlowOp.materialised, self.flows):
            if flow_op.flow_id in dropped:
                continue
            size = oversize(
                bound,
                *(
                    (flow_op.flow_id, flow_op.name, _text(flow_op.data))
                    if flow_op.kind == "begin"
                    else (_text(flow_op.data),)
                ),
            )
            if not size:
                flows.append(flow_op)
                continue
            refused = True
            error = refusal(path, _flow_row(flow_op), size, bound)
            self._refuse((flow_key(flow_op.flow_id), flow_op.branch_name), error)
            replaced = _in_place(flow_op, size, bound)
            if replaced is not None:  # the node's failure, in this same commit
                flows.append(replaced)
            if flow_op.kind == "begin":
                dropped.add(flow_op.flow_id)
                flows = [kept for kept in flows if kept.flow_id != flow_op.flow_id]
        if refused:  # what a failed write puts back: what is committed, no more
            self.flows = list(flows)
        return journal, flows

    def _refuse(self, keys: tuple[str | None, ...], error: StoreError, mark: float = 0) -> None:
        log.error("%s", error)
        for key in keys:
            if key is not None:
                self.refuse(key, error, mark)

    def refuse(self, key: str, error: StoreError, mark: float = 0) -> None:
        """Record that a row of ``key`` (queued at ``mark``; 0: unmarked) is refused."""
        self.refused.setdefault(key, error)
        self.refusals.append((key, mark, error))

    def take_back(self, failed: Batch) -> None:
        """Put a failed batch's rows back in front of this (newer) one."""
        self.rows[:0] = failed.rows
        journal = failed.journal
        for turn_id, ops in self.journal.items():
            journal.setdefault(turn_id, []).extend(ops)
        self.journal = journal
        self.flows[:0] = failed.flows
        self.branches.update(failed.branches)
        # Marks stay in order: what this batch queued is marked after what it took back.
        for turn_id, mark in failed.marks.items():
            self.marks.setdefault(turn_id, mark)


def _failed(op: JournalOp, size: int, bound: int) -> JournalOp:
    """The status change marking ``op``'s turn failed, ``op`` (a row of ``size``
    bytes, over ``bound``) being refused: a short detail saying which row, never
    the row itself (`pride.store.journal.write_journal` keeps the status once set)."""
    row = f"its journal step {op.step}" if op.kind == "step" else "a change of its journal entry"
    detail = (
        f"{row} was refused at its commit (at least {size:,} bytes, more than "
        f"max_row_bytes ({bound:,})): the turn failed there"
    )
    return JournalOp("status", op.branch_name, op.turn_id, status=FAILED, detail=detail)


def _in_place(op: FlowOp, size: int, bound: int) -> FlowOp | None:
    """The event written instead of ``op``, a refused event of ``size`` bytes (made by
    its ``refused``, from the reason), or None: it has none, it failed (logged), or it
    is over ``bound`` too."""
    if op.kind != "event" or op.refused is None:
        return None
    reason = (
        f"its journal event {op.seq} was refused at its commit (at least {size:,} bytes, "
        f"more than max_row_bytes ({bound:,}))"
    )
    try:
        data = op.refused(reason)
    except Exception:  # its producer promises never to raise: say so loudly if it did
        log.exception(
            "the event replacing event %d of flow %s could not be made", op.seq, op.flow_id
        )
        return None
    if oversize(bound, data):
        log.error(
            "the event replacing event %d of flow %s is over the bound too", op.seq, op.flow_id
        )
        return None
    return attrs.evolve(op, data=data, refused=None)


def materialised(op: JournalOp) -> JournalOp:
    if not callable(op.data):
        return op
    try:
        return attrs.evolve(op, data=op.data())
    except Exception:  # its producer promises never to raise: say so loudly if it did
        log.exception("journal row of turn %s could not be made; stored as null", op.turn_id)
        return attrs.evolve(op, data="null")


def _text(data: Text | None) -> str | None:
    """Made JSON (`materialised`): text, or None."""
    return data if isinstance(data, str) else None


def _journal_columns(op: JournalOp) -> tuple[str | None, ...]:
    """The text columns of the row ``op`` writes, as the read side measures that row
    (`pride.store.journal.load_turns`): a turn's entry with its ids and status, a
    step by its text alone. A status change is measured by what it writes (the
    entry's command, written by its begin, is not known here): its begin was
    measured with room for it (`pride.store.journal.status_room`), and its tag is
    held to `pride.store.journal.TAG_BYTES` at the door."""
    if op.kind == "step":
        return (_text(op.data),)
    if op.kind == "end":
        return ()
    status = "running" if op.kind == "begin" else op.status
    return (op.turn_id, op.branch_name, status, _text(op.data), op.tag, op.detail)


def _journal_row(op: JournalOp, room: int = 0) -> str:
    """What a journal operation's row is, for an error (``room``: the bytes a begun
    entry keeps for its status changes, counted in its size)."""
    turn = f"turn {op.turn_id} of branch {op.branch_name!r}"
    if op.kind == "step":
        return f"journal step {op.step} of {turn}"
    kept = f" (with the {room:,} bytes it keeps for its status changes)" if room else ""
    return f"the journal entry of {turn}{kept}"


def _flow_row(op: FlowOp) -> str:
    """What a flow-journal operation's row is, for an error."""
    return (
        f"event {op.seq} of flow {op.flow_id}"
        if op.kind == "event"
        else f"the plan of flow {op.flow_id}"
    )
