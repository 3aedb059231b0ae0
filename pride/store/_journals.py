"""What a store keeps besides conversations: the turn journal and the flow journal.

`BranchStore` queues their operations through the same write queue as the
messages (so a turn's steps and its messages go in the same commits, in
order) and reads them back on restart. The formats are in
`pride.store.journal` and `pride.store.flows`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ._queue import WriteQueue
from .flows import FlowOp, StoredFlow, flow_key, load_flows
from .journal import JournalOp, StoredTurn, Text, load_turns

__all__ = ["Journals"]


class Journals:
    """The journal half of [`BranchStore`][pride.store.BranchStore] (a base class)."""

    _queue: WriteQueue
    max_row_bytes: int

    def _require(self, *, write: bool = False) -> sqlite3.Connection:
        raise NotImplementedError

    async def _read(self, what: str, function: Any, *args: Any) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------- journal

    def journal_begin(
        self,
        branch_name: str,
        turn_id: str,
        command: Text | None,
        *,
        tag: str | None = None,
        detail: str | None = None,
    ) -> None:
        """Queue the journal entry of a turn of ``branch_name`` (status ``"running"``):
        the command that started it (JSON text, or a function returning it, called
        at commit time) and its sender's tag (JSON text). See `pride.store.journal`."""
        self._queue_journal(
            JournalOp("begin", branch_name, turn_id, data=command, tag=tag, detail=detail)
        )

    def journal_step(self, branch_name: str, turn_id: str, step: int, data: Text) -> None:
        """Queue step ``step`` of a journaled turn (replacing what that step held)."""
        self._queue_journal(JournalOp("step", branch_name, turn_id, step=step, data=data))

    def journal_status(
        self,
        branch_name: str,
        turn_id: str,
        status: str,
        *,
        detail: str | None = None,
        tag: str | None = None,
    ) -> None:
        """Queue a status change of a journaled turn (``"running"``, ``"suspended"``);
        ``tag`` None keeps its tag."""
        self._queue_journal(
            JournalOp("status", branch_name, turn_id, status=status, detail=detail, tag=tag)
        )

    def journal_end(self, branch_name: str, turn_id: str) -> None:
        """Queue forgetting a journaled turn that ended (with its steps).

        A turn whose begin is still queued (no commit took it yet) is simply
        taken out of the queue: nothing of it is ever written, and a flush
        of its branch has nothing to wait for.
        """
        self._require(write=True)
        if not self._queue.forget_unwritten_turn(branch_name, turn_id):
            self._queue_journal(JournalOp("end", branch_name, turn_id))

    def _queue_journal(self, op: JournalOp) -> None:
        self._require(write=True)
        self._queue.journal(op)

    # ------------------------------------------------------------ flow journal

    def flow_begin(self, flow_id: str, name: str | None, plan: Text) -> None:
        """Queue the journal entry of a flow run: its plan (JSON text, or a function
        returning it, called at commit time). See `pride.store.flows`; commit it
        with ``flush(flow_key(flow_id))``."""
        self._queue_flow(FlowOp("begin", flow_id, name=name, data=plan))

    def flow_event(
        self,
        flow_id: str,
        seq: int,
        data: Text,
        *,
        branch_name: str | None = None,
        refused: Callable[[str], str] | None = None,
    ) -> None:
        """Queue event ``seq`` of a journaled flow (a node ended, or was added); with
        ``branch_name`` it counts as that branch's too, so the branch's next
        flush (the commit of the turn that produced the outcome) commits it.

        ``refused(reason)`` makes the event written in its place, in the same
        commit, should this one be over the store's ``max_row_bytes`` (a node's
        failure instead of its runaway result); without it a refused event leaves
        nothing (and the flushes that carry it fail, either way)."""
        self._queue_flow(
            FlowOp("event", flow_id, data=data, seq=seq, branch_name=branch_name, refused=refused)
        )

    def flow_end(self, flow_id: str) -> None:
        """Queue forgetting a journaled flow that finished (with its events)."""
        self._queue_flow(FlowOp("end", flow_id))

    def _queue_flow(self, op: FlowOp) -> None:
        self._require(write=True)
        self._queue.flow(op, flow_key(op.flow_id), op.branch_name)

    async def unfinished_flows(self, flow_id: str | None = None) -> list[StoredFlow]:
        """The flow journal's unfinished flows (one, or all), oldest first, each with
        its events (see `pride.store.flows`)."""
        flows: list[StoredFlow] = await self._read(
            "reading the flow journal of", load_flows, flow_id, self.max_row_bytes
        )
        return flows

    async def unfinished_turns(self, branch_name: str | None = None) -> list[StoredTurn]:
        """The journal's unfinished turns (of ``branch_name``, or of every branch),
        oldest first, each with its steps (see `pride.store.journal`)."""
        what = (
            f"reading the turn journal of {branch_name!r} from"
            if branch_name
            else ("reading the turn journal of")
        )
        turns: list[StoredTurn] = await self._read(
            what, load_turns, branch_name, self.max_row_bytes
        )
        return turns
