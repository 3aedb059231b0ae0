"""The flow journal's rows: unfinished flows, their plans and their node events, in the store file.

A flow run by a session with a store journals its plan when it starts and
an event for each node that ends (and for each node a running flow grows
by), so that a process that dies mid-flow can resume it without rerunning
the nodes that finished (`pride.flows.journal` says what the plan and the
events hold, `pride.flows.resume` how a run continues from them; the store
never imports flows). Here a plan and an event are JSON text.

Schema (part of the store's version 3):

```text
flows(flow_id PRIMARY KEY, name, plan JSON, started_at, updated_at)
flow_events(flow_id, seq, data JSON, PRIMARY KEY (flow_id, seq))
```

A flow that returns its result is deleted with its events: like the turn
journal, the flow journal holds only flows that still have work to do.
Writes are queued in the store's pending batch beside the message rows and
the turn journal, and committed by the same
[`flush`][pride.store.BranchStore.flush]: one transaction, one fsync.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from ._bounds import bounded, size_of, unread
from .journal import ID_BYTES, numbered_texts

__all__ = ["FlowOp", "StoredFlow", "flow_key", "load_flows", "write_flows"]

Text = str | Callable[[], str]


def flow_key(flow_id: str) -> str:
    """The name a flow's rows are counted under in a batch (what ``flush`` waits on)."""
    return f"\x00flow {flow_id}"


@attrs.frozen
class StoredFlow:
    """An unfinished flow as the store holds it (JSON still as text).

    Attributes:
        flow_id: the run's id (text).
        name: the flow's name, or None.
        plan: its plan, as JSON text.
        started_at, updated_at: wall-clock times.
        events: ``(seq, data)`` pairs in order, data as JSON text.
        problem: why the flow cannot be resumed as it is stored, if it cannot: a
            row of it is over the reader's ``max_row_bytes`` and was not read.
    """

    flow_id: str
    name: str | None
    plan: str | None
    started_at: float
    updated_at: float
    events: tuple[tuple[int, str], ...] = ()
    problem: str | None = None


@attrs.frozen
class FlowOp:
    """One queued flow-journal write."""

    kind: Literal["begin", "event", "end"]
    flow_id: str
    name: str | None = None  # begin
    data: Text | None = None  # begin: the plan; event: the event
    seq: int = 0  # event
    branch_name: str | None = None  # event: the branch whose turn's commit carries it
    refused: Callable[[str], str] | None = None
    """An event: the event to write in its place, made from the reason, should the
    store refuse it (a row over its bound, `pride.store._batch`), so that the flow's
    journal says what became of the node instead of nothing."""

    def materialised(self) -> FlowOp:
        """The op with its JSON made (called at commit time, in the event loop's thread)."""
        return attrs.evolve(self, data=self.data()) if callable(self.data) else self


def write_flows(db: sqlite3.Connection, ops: Iterable[FlowOp]) -> None:
    """Apply ``ops`` in order inside the caller's transaction (worker-thread code).

    A flow with both its ``begin`` and its ``end`` among ``ops`` writes nothing.
    """
    ops = list(ops)
    begun = {op.flow_id for op in ops if op.kind == "begin"}
    skipped = begun & {op.flow_id for op in ops if op.kind == "end"}
    now = time.time()
    for op in ops:
        if op.flow_id in skipped:
            continue
        if op.kind == "begin":
            db.execute(
                "INSERT OR REPLACE INTO flows(flow_id, name, plan, started_at, updated_at) "
                "VALUES (?,?,?,?,?)",
                (op.flow_id, op.name, op.data, now, now),
            )
        elif op.kind == "event":
            db.execute(
                "INSERT OR REPLACE INTO flow_events(flow_id, seq, data) VALUES (?,?,?)",
                (op.flow_id, op.seq, op.data),
            )
            db.execute("UPDATE flows SET updated_at=? WHERE flow_id=?", (now, op.flow_id))
        else:
            db.execute("DELETE FROM flow_events WHERE flow_id=?", (op.flow_id,))
            db.execute("DELETE FROM flows WHERE flow_id=?", (op.flow_id,))


def load_flows(db: sqlite3.Connection, flow_id: str | None, max_row_bytes: int) -> list[StoredFlow]:
    """The unfinished flows (one, or all), oldest first, with their events.

    A row over ``max_row_bytes`` (the store's one bound on a row) is measured by
    SQLite and not read: a flow's row over it reads without its name and plan, an event over
    it is left out, and the flow's ``problem`` says which row.

    A store older than version 3 (read-only, not upgraded) has no flow journal.
    """
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "flows" not in tables:
        return []
    size = " + ".join(size_of(column) for column in ("flow_id", "name", "plan"))
    where = "" if flow_id is None else " WHERE flow_id=?"
    query = (
        f"SELECT {bounded('flow_id', bound=str(ID_BYTES))}, {bounded('name', 'size')}, "
        f"{bounded('plan', 'size')}, started_at, updated_at, size "
        f"FROM (SELECT *, {size} AS size FROM flows{where}) ORDER BY started_at, flow_id"
    )
    bounds = (max_row_bytes, max_row_bytes)
    rows = db.execute(query, bounds if flow_id is None else (*bounds, flow_id)).fetchall()
    found = []
    for identity, name, plan, started, updated, row_size in rows:
        problem = None
        if isinstance(row_size, int) and row_size > max_row_bytes:
            problem = unread(f"the plan of flow {identity}", row_size, max_row_bytes)
        events, over = numbered_texts(
            db, identity, max_row_bytes, table="flow_events", key_column="flow_id", number="seq"
        )
        if over is not None and problem is None:
            problem = unread(f"event {over[0]} of flow {identity}", over[1], max_row_bytes)
        found.append(
            StoredFlow(
                str(identity),
                name if isinstance(name, str) else None,
                plan if isinstance(plan, str) else None,
                float(started) if isinstance(started, int | float) else 0.0,
                float(updated) if isinstance(updated, int | float) else 0.0,
                events,
                problem,
            )
        )
    return found
