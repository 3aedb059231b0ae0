"""The turn journal's rows: unfinished turns and their completed steps, in the store file.

A turn of a branch with a store journals each step it completes (a model
reply with its usage, a tool call's result, an approval decision) so that a
process that dies mid-turn can resume the turn without repeating them. This
module is the storage half: the rows and the SQL. What a step means, and
how a turn is replayed from its steps, is `pride.durable.journal`'s business
(the store never imports actors); here a step is JSON text under a number.

Schema (part of the store's version 2):

```text
turns(turn_id PRIMARY KEY, branch_name, status, command JSON, tag JSON, detail,
      started_at, updated_at)
steps(turn_id, step, data JSON, PRIMARY KEY (turn_id, step))
```

``status`` is ``"running"`` (the turn was in flight: after a crash it is
resumed or abandoned), ``"suspended"`` (it waits for a person's approval) or
``"failed"``: a row of it was refused by the store's bound (``detail`` says
which), which failed the turn; written in the commit that refused the row and
never changed after, it makes a restart abandon the turn should the process
stop before the turn's end is committed.
A turn that ends is deleted with its steps, in the same transaction as its
messages: the journal holds only turns that still have work to do.

Writes go through the store's one writer path: every journal operation is
queued in the store's pending batch beside the message rows and committed
by the same [`flush`][pride.store.BranchStore.flush], one transaction, one fsync
for every branch. Two things keep the journal cheap:

* a turn's rows are queued lazily (its ``begin`` with its first completed
  step), and their JSON is made at commit time, from a function;
* a turn that begins and ends within one batch writes nothing at all: its
  rows would be deleted by the same transaction that inserts them.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from ._bounds import bounded, size_of, unread

__all__ = [
    "DETAIL_BYTES",
    "FAILED",
    "TAG_BYTES",
    "JournalOp",
    "StoredTurn",
    "Text",
    "TurnStatus",
    "delete_branch_turns",
    "load_turns",
    "status_room",
    "write_journal",
]

TurnStatus = Literal["running", "suspended", "failed"]

FAILED = "failed"
"""The status of a turn a refused row failed: kept once set, abandoned on restart."""

Text = str | Callable[[], str]
"""JSON text, or a function returning it (called when the row is committed)."""


@attrs.frozen
class StoredTurn:
    """An unfinished turn as the store holds it (JSON still as text).

    Attributes:
        turn_id: the turn's id (text).
        branch_name: the branch it belongs to.
        status: ``"running"``, ``"suspended"`` or ``"failed"`` (see above).
        command: the work command that started it, as JSON text (None when
            it could not be journaled; ``detail`` says why).
        tag: the sender's tag of the envelope that started (or last resumed)
            it, as JSON text (``pride run`` tags with its request id).
        detail: a note (why the command is missing, why it was suspended).
        started_at, updated_at: wall-clock times.
        steps: ``(step, data)`` pairs in step order, data as JSON text.
        problem: why the turn cannot be replayed as it is stored, if it cannot: a
            row of it is over the reader's ``max_row_bytes`` and was not read
            (a restored branch abandons such a turn, saying this).
    """

    turn_id: str
    branch_name: str
    status: str
    command: str | None
    tag: str | None
    detail: str | None
    started_at: float
    updated_at: float
    steps: tuple[tuple[int, str], ...] = ()
    problem: str | None = None


@attrs.frozen
class JournalOp:
    """One queued journal write (see `write_journal` for what each kind does)."""

    kind: Literal["begin", "step", "status", "end"]
    branch_name: str
    turn_id: str
    step: int = 0
    data: Text | None = None  # begin: the command; step: the step
    tag: str | None = None  # begin, status: the tag (status: None keeps it)
    status: str = "running"  # status
    detail: str | None = None  # begin, status


def _text(value: Text | None) -> str | None:
    return value() if callable(value) else value


def write_journal(db: sqlite3.Connection, ops: Iterable[JournalOp]) -> None:
    """Apply ``ops`` in order inside the caller's transaction (worker-thread code).

    A turn with both its ``begin`` and its ``end`` among ``ops`` is skipped
    entirely: nothing of it ever needs to be on disk.
    """
    ops = list(ops)
    begun = {op.turn_id for op in ops if op.kind == "begin"}
    ended = {op.turn_id for op in ops if op.kind == "end"}
    skipped = begun & ended
    now = time.time()
    for op in ops:
        if op.turn_id in skipped:
            continue
        if op.kind == "begin":
            db.execute(
                "INSERT OR REPLACE INTO turns(turn_id, branch_name, status, command, tag, detail, "
                "started_at, updated_at) VALUES (?,?,'running',?,?,?,?,?)",
                (op.turn_id, op.branch_name, _text(op.data), op.tag, op.detail, now, now),
            )
        elif op.kind == "step":
            db.execute(
                "INSERT OR REPLACE INTO steps(turn_id, step, data) VALUES (?,?,?)",
                (op.turn_id, op.step, _text(op.data)),
            )
        elif op.kind == "status":
            # A failed turn stays failed: a later change (its suspension) must not
            # make it look resumable again.
            db.execute(
                "UPDATE turns SET status=?, detail=?, tag=COALESCE(?, tag), updated_at=? "
                "WHERE turn_id=? AND status != 'failed'",
                (op.status, op.detail, op.tag, now, op.turn_id),
            )
        else:
            db.execute("DELETE FROM steps WHERE turn_id=?", (op.turn_id,))
            db.execute("DELETE FROM turns WHERE turn_id=?", (op.turn_id,))


def delete_branch_turns(db: sqlite3.Connection, branch_name: str) -> None:
    """Forget every journaled turn of ``branch_name`` (inside the caller's transaction)."""
    db.execute(
        "DELETE FROM steps WHERE turn_id IN (SELECT turn_id FROM turns WHERE branch_name=?)",
        (branch_name,),
    )
    db.execute("DELETE FROM turns WHERE branch_name=?", (branch_name,))


def load_turns(
    db: sqlite3.Connection, branch_name: str | None, max_row_bytes: int
) -> list[StoredTurn]:
    """The unfinished turns (of one branch, or of all), oldest first, with their steps.

    A row over ``max_row_bytes`` (the store's one bound on a row) is measured by
    SQLite and not read: a turn's row over it reads with its text columns None, a step over
    it is left out, and the turn's ``problem`` says which row, so that it is
    abandoned, never replayed without it.

    A version-1 store (read-only, not upgraded) has no journal: nothing is unfinished.
    """
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "turns" not in tables:
        return []
    texts = ("branch_name", "status", "command", "tag", "detail")
    size = " + ".join(size_of(column) for column in ("turn_id", *texts))
    where = "" if branch_name is None else " WHERE branch_name=?"
    query = (
        f"SELECT {bounded('turn_id', bound=str(ID_BYTES))}, "
        + ", ".join(bounded(column, "size") for column in texts)
        + f", started_at, updated_at, size FROM (SELECT *, {size} AS size FROM turns{where}) "
        "ORDER BY started_at, turn_id"
    )
    bounds = (max_row_bytes,) * len(texts)
    rows = db.execute(query, bounds if branch_name is None else (*bounds, branch_name))
    turns = []
    for turn_id, name, status, command, tag, detail, started, updated, row_size in rows.fetchall():
        turn = f"turn {turn_id}"
        problem = None
        if isinstance(row_size, int) and row_size > max_row_bytes:
            problem = unread(f"the journal entry of {turn}", row_size, max_row_bytes)
        steps, over = numbered_texts(
            db, turn_id, max_row_bytes, table="steps", key_column="turn_id", number="step"
        )
        if over is not None and problem is None:
            problem = unread(f"journal step {over[0]} of {turn}", over[1], max_row_bytes)
        turns.append(
            StoredTurn(
                str(turn_id),
                str(branch_name if name is None and branch_name is not None else name),
                str(status),
                _text_or_none(command),
                _text_or_none(tag),
                _text_or_none(detail),
                _number(started),
                _number(updated),
                steps,
                problem,
            )
        )
    return turns


TAG_BYTES = 256
"""The longest tag (JSON text, in bytes) a status change may give a journaled turn
(a resume's request id): every entry keeps room for one (`status_room`), and the
turn journal refuses a longer one at the door (`pride.durable.journal`)."""

DETAIL_BYTES = 200
"""The longest detail a status change of pride's writes ("waits for approval", why
a turn failed): every entry keeps room for one."""


def status_room(tag: str | None, detail: str | None) -> int:
    """The bytes a journal entry begun with ``tag`` and ``detail`` keeps free for its
    status changes, which rewrite its status, its detail and (a resume) its tag: its
    row is measured with them against the bound, so that no change of it can take the
    row past the bound after it was written (and have it abandoned unread)."""
    room = len("suspended") - len("running")
    for text, most in ((tag, TAG_BYTES), (detail, DETAIL_BYTES)):
        if text is None:
            room += most
        elif len(text) < most:  # short: measured exactly, cheaply
            room += max(0, most - len(text.encode("utf-8", errors="surrogatepass")))
    return room


ID_BYTES = 100
"""The longest turn or flow id a reader reads (pride writes 36 characters): a longer
one, in a damaged file, reads as None (no valid id), whatever the row's bound."""


# A damaged file may hold anything in any column: what is not of the column's
# type reads as missing, and whoever replays the turn says what is missing.


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def numbered_texts(
    db: sqlite3.Connection, key: object, bound: int, *, table: str, key_column: str, number: str
) -> tuple[tuple[tuple[int, str], ...], tuple[int, int] | None]:
    """The ``(number, data)`` rows of ``table`` for ``key``, in order, as read from a file
    that may be damaged: a row whose number is not an int is left out, and data that is
    not text becomes ``""`` (it then fails to parse where it is read, naming the row).

    A row whose data is over ``bound`` bytes is left out too, never read (SQLite
    measures it): the second value is the first such row's ``(number, size)``, or None.
    """
    texts = []
    over: tuple[int, int] | None = None
    query = (
        f"SELECT {number}, {size_of('data')}, {bounded('data')} FROM {table} "
        f"WHERE {key_column}=? ORDER BY {number}"
    )
    for seq, size, data in db.execute(query, (bound, key)):
        if not isinstance(seq, int):
            continue
        if isinstance(size, int) and size > bound:
            over = over or (seq, size)
            continue
        texts.append((seq, data if isinstance(data, str) else ""))
    return tuple(texts), over
