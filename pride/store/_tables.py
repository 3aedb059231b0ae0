"""The SQL of the branch tables, run in a worker thread (``trio.to_thread``).

Each function takes the connection and commits its own transaction (or reads);
`pride.store.sqlite.BranchStore` calls them and turns their failures into
[`StoreError`][pride.StoreError].
"""

from __future__ import annotations

import sqlite3
import sys
import time
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import Any

from ..errors import StoreError
from ._batch import DELETE, HEADER, REWRITE, Row
from ._bounds import RowTooLarge, bounded, size_of
from .flows import FlowOp, write_flows
from .journal import ID_BYTES, JournalOp, StoredTurn, delete_branch_turns, load_turns, write_journal

__all__ = [
    "MAX_ROW_BYTES",
    "MAX_SEQ",
    "UPDATED_AT_GRAIN",
    "check_seq",
    "list_branches",
    "list_names",
    "load_branch",
    "load_conversation",
    "load_restore",
    "message_count",
    "turn_branch",
    "write_batch",
]


def write_batch(
    db: sqlite3.Connection, batch: list[Row], journal: list[JournalOp], flows: list[FlowOp]
) -> None:
    """Commit one batch in one transaction, in as few statements as it takes.

    Each statement is a trip out of Python and back, and back in means taking
    the GIL from the event loop's thread, which is busy running the next turns
    while this commit is on its way to the disk (`pride.store._queue`): a
    wait of up to the interpreter's switch interval each time. So the rows go
    in multi-row INSERTs (not an ``executemany``, which is one trip per row)
    and the branches' ``updated_at`` in one UPDATE, which rewrites only the
    rows older than `UPDATED_AT_GRAIN`.
    """
    with db:
        db.execute("BEGIN")
        if journal:
            write_journal(db, journal)
        if flows:
            write_flows(db, flows)
        if batch and min(map(_SEQ, batch)) >= 0:  # only messages (the common case)
            _insert(db, batch)
        else:
            _write_rows(db, batch)
        names = list(dict.fromkeys(map(_NAME, batch)))
        now = time.time()
        for start in range(0, len(names), _CHUNK * 4):
            chunk = names[start : start + _CHUNK * 4]
            db.execute(
                "UPDATE branches SET updated_at=? WHERE updated_at<? AND name IN "
                f"({','.join('?' * len(chunk))})",
                (now, now - UPDATED_AT_GRAIN, *chunk),
            )


_NAME = itemgetter(0)
_SEQ = itemgetter(1)


def _write_rows(db: sqlite3.Connection, batch: list[Row]) -> None:
    """Write ``batch`` in order: projections (`HEADER`), deletions of a conversation
    (`REWRITE`) or of a whole branch (`DELETE`), and the messages between them."""
    rows: list[Row] = []
    for row in batch:
        if row[1] == HEADER:
            db.execute(
                "INSERT OR REPLACE INTO branches(name, branch_id, projection, updated_at) "
                "VALUES (?,?,?,?)",
                (row[0], row[2], row[3], time.time()),
            )
        elif row[1] == REWRITE:
            _insert(db, rows)
            rows = []
            db.execute("DELETE FROM messages WHERE branch_name=?", (row[0],))
        elif row[1] == DELETE:
            _insert(db, rows)
            rows = []
            db.execute("DELETE FROM messages WHERE branch_name=?", (row[0],))
            db.execute("DELETE FROM branches WHERE name=?", (row[0],))
            delete_branch_turns(db, row[0])
        else:
            rows.append(row)
    _insert(db, rows)


# A branch's ``updated_at`` (what ``pride inspect`` lists, to the second) is
# rewritten by a commit of its rows only once it is this many seconds old. A
# rewritten row costs its page in the commit's write-ahead log (a branches row
# carries the branch's projection, a few hundred bytes): 100 branches answered
# by every commit dirtied a dozen pages per commit, about a quarter of its
# SQLite work, for a time nobody reads closer than to the second.
UPDATED_AT_GRAIN = 1.0


# Rows per INSERT: four parameters each, well within SQLite's limit on a
# statement's parameters (999 before SQLite 3.32, 32766 since).
_CHUNK = 240
_INSERT = "INSERT OR REPLACE INTO messages(branch_name, seq, message_id, data) VALUES "


def _insert(db: sqlite3.Connection, rows: list[Row]) -> None:
    """Insert (or replace) ``rows`` in order, ``_CHUNK`` rows per statement."""
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start : start + _CHUNK]
        db.execute(_INSERT + ",".join(["(?,?,?,?)"] * len(chunk)), list(chain(*chunk)))


MAX_ROW_BYTES = 64 * 1024 * 1024
"""The largest row (a message, a projection, a journal row) a store writes or reads by
default (64 MiB of JSON): twice what one provider reply may hold, far past what a
model can be sent, and a bound on what loading one row costs (`BranchStore`'s
``max_row_bytes``, one check for every row, written or read)."""

MAX_SEQ = 2**53
"""The largest number of a stored message (or flow event) a store reads back (the
least is 0). The next one is numbered from the largest stored plus one, so a number
edited into the file decides what is written next: below 0, a branch's next
messages would take the numbers a queued batch reserves for its markers
(`HEADER`, `REWRITE`: the message's JSON written as the branch's projection, its
conversation deleted); near SQLite's largest integer, the next number cannot be
written, and since one commit carries every branch's rows, every commit of the
store would fail. No store reaches it honestly (a message a microsecond for 285
years)."""


def check_seq(path: Path, name: str, seq: object) -> None:
    """Refuse a stored message number that is not an int from 0 to `MAX_SEQ`.

    Raises:
        StoreError: naming the store, the branch and the row.
    """
    if not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
        raise StoreError(
            f"{path}: message row {seq!r} of branch {name!r} has a number pride never "
            f"writes (0 to {MAX_SEQ}): the file was altered or damaged; save the branch "
            "again from a good copy, or delete it"
        )


def message_count(db: sqlite3.Connection, path: Path, name: str) -> int:
    """The next message number of ``name``: its largest stored one plus one (0: none).

    Raises:
        StoreError: its lowest or its largest stored number is out of range (`check_seq`).
    """
    query = "SELECT seq FROM messages WHERE branch_name=? ORDER BY seq {} LIMIT 1"
    lowest = db.execute(query.format("ASC"), (name,)).fetchone()
    if lowest is None:
        return 0
    highest = db.execute(query.format("DESC"), (name,)).fetchone()
    check_seq(path, name, lowest[0])  # SQLite orders NULL first, text and blobs last
    check_seq(path, name, highest[0])
    return int(highest[0]) + 1


def list_branches(db: sqlite3.Connection) -> list[tuple[str, str, int, float]]:
    return [
        (name, branch_id, int(count), float(updated))
        for name, branch_id, count, updated in db.execute(
            "SELECT b.name, b.branch_id, COUNT(m.seq), b.updated_at FROM branches b "
            "LEFT JOIN messages m ON m.branch_name = b.name GROUP BY b.name ORDER BY b.name"
        )
    ]


def list_names(
    db: sqlite3.Connection, prefix: str, low: str, exclusive: bool, limit: int
) -> list[str]:
    """Up to ``limit`` names starting with ``prefix``, from ``low`` (excluded when
    ``exclusive``), in order: a range on the primary key's index, never a scan.

    The range's end is the prefix with its last character incremented (every
    name with the prefix sorts below it: SQLite compares text by its UTF-8
    bytes, which orders as code points do).
    """
    above = ">" if exclusive else ">="
    end = _prefix_end(prefix)
    if end is None:
        query = f"SELECT name FROM branches WHERE name {above} ? ORDER BY name LIMIT ?"
        return [row[0] for row in db.execute(query, (low, limit))]
    query = f"SELECT name FROM branches WHERE name {above} ? AND name < ? ORDER BY name LIMIT ?"
    return [row[0] for row in db.execute(query, (low, end, limit))]


def _prefix_end(prefix: str) -> str | None:
    """The least text above every text starting with ``prefix`` (None: there is none)."""
    stem = prefix.rstrip(chr(sys.maxunicode))
    if not stem:
        return None
    return stem[:-1] + chr(ord(stem[-1]) + 1)


def turn_branch(db: sqlite3.Connection, turn_id: str, max_row_bytes: int) -> str | None:
    """The branch of the journaled turn ``turn_id`` (its primary key), if any (a name
    over ``max_row_bytes``, in a damaged file, is not read: none)."""
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "turns" not in tables:  # a version-1 store (read-only): no journal
        return None
    row = db.execute(
        f"SELECT {bounded('branch_name')} FROM turns WHERE turn_id=?", (max_row_bytes, turn_id)
    ).fetchone()
    return row[0] if row is not None and isinstance(row[0], str) else None  # NULL: over it


def load_restore(
    db: sqlite3.Connection, name: str, max_row_bytes: int
) -> tuple[Any, list[tuple[int, Any]], list[StoredTurn]]:
    """What restoring ``name`` reads, in one snapshot: its branch id (None when it is
    not stored), its message rows in order and its unfinished turns; each through
    an index (the primary keys, ``turns_by_branch``)."""
    row = db.execute(
        # An id longer than any pride writes reads as "" (not a UUID: refused), unread.
        f"SELECT CASE WHEN {size_of('branch_id')} > {ID_BYTES} THEN '' ELSE branch_id END "
        "FROM branches WHERE name=?",
        (name,),
    ).fetchone()
    rows = [] if row is None else _message_rows(db, name, max_row_bytes)
    return (None if row is None else row[0]), rows, load_turns(db, name, max_row_bytes)


def load_branch(
    db: sqlite3.Connection, name: str, max_row_bytes: int
) -> tuple[Any, list[tuple[int, Any]]] | None:
    row = db.execute(
        f"SELECT {size_of('projection')}, {bounded('projection')} FROM branches WHERE name=?",
        (max_row_bytes, name),
    ).fetchone()
    if row is None:
        return None
    if isinstance(row[0], int) and row[0] > max_row_bytes:
        raise RowTooLarge("the projection", row[0])
    return row[1], _message_rows(db, name, max_row_bytes)


def load_conversation(
    db: sqlite3.Connection, name: str, max_row_bytes: int
) -> tuple[None, list[tuple[int, Any]]] | None:
    """`load_branch` without the projection (not read at all): what ``load_messages`` needs."""
    if db.execute("SELECT 1 FROM branches WHERE name=?", (name,)).fetchone() is None:
        return None
    return None, _message_rows(db, name, max_row_bytes)


def _message_rows(db: sqlite3.Connection, name: str, max_row_bytes: int) -> list[tuple[int, Any]]:
    """The message rows of ``name`` in order; a row over ``max_row_bytes`` is measured
    by SQLite and never handed to Python (raises `RowTooLarge`)."""
    rows = []
    for seq, size, data in db.execute(
        f"SELECT seq, {size_of('data')}, {bounded('data')} "
        "FROM messages WHERE branch_name=? ORDER BY seq",
        (max_row_bytes, name),
    ):
        if isinstance(size, int) and size > max_row_bytes:
            raise RowTooLarge(f"message row {seq}", size)
        rows.append((seq, data))
    return rows
