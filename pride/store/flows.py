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

from .journal import numbered_texts

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
    """

    flow_id: str
    name: str | None
    plan: str | None
    started_at: float
    updated_at: float
    events: tuple[tuple[int, str], ...] = ()


@attrs.frozen
class FlowOp:
    """One queued flow-journal write."""

    kind: Literal["begin", "event", "end"]
    flow_id: str
    name: str | None = None  # begin
    data: Text | None = None  # begin: the plan; event: the event
    seq: int = 0  # event
    branch_name: str | None = None  # event: the branch whose turn's commit carries it

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


def load_flows(db: sqlite3.Connection, flow_id: str | None = None) -> list[StoredFlow]:
    """The unfinished flows (one, or all), oldest first, with their events.

    A store older than version 3 (read-only, not upgraded) has no flow journal.
    """
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "flows" not in tables:
        return []
    query = "SELECT flow_id, name, plan, started_at, updated_at FROM flows"
    rows = (
        db.execute(query + " ORDER BY started_at, flow_id")
        if flow_id is None
        else db.execute(query + " WHERE flow_id=?", (flow_id,))
    ).fetchall()
    found = []
    for identity, name, plan, started, updated in rows:
        events = numbered_texts(
            db, "SELECT seq, data FROM flow_events WHERE flow_id=? ORDER BY seq", identity
        )
        found.append(
            StoredFlow(
                str(identity),
                name if isinstance(name, str) else None,
                plan if isinstance(plan, str) else None,
                float(started) if isinstance(started, int | float) else 0.0,
                float(updated) if isinstance(updated, int | float) else 0.0,
                events,
            )
        )
    return found
