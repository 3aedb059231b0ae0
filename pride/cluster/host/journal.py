"""The host's envelope journal: every envelope id it accepted, durable before it runs.

A host records the id of each envelope it is handed before the envelope can
reach a mailbox, and the turn id once the turn starts. An id seen before
(a replayed delivery, from this process or an earlier incarnation of the
host) is refused with `EnvelopeReplayed` instead of being run
twice. An envelope that was recorded but lost with a crashed host is refused
too: a turn may run at most once, never silently twice.

The turn journal (a durable branch's) does not take this one's place: it
records a turn when the turn starts, in the host's store, from the trio
thread. An envelope accepted while its branch's mailbox was busy and lost
with the host before its turn began would be missing from it, so a replayed
delivery would run; this journal holds the id before the envelope can reach
a mailbox, written by the glue thread that accepts it. The turn journal could
take its place only by recording envelopes on arrival, at that cost per
envelope rather than per turn.

One SQLite file per host, in WAL mode with ``synchronous=NORMAL``: a commit
survives the host process being killed (the failure this guards against),
and costs a write, not an fsync, on the envelope's path. The table is keyed
by the envelope id alone (no rowid), and a caller numbers its envelope ids
in order (`pride.cluster.caller.link.Link.new_envelope_id`), so a batch's ids land
on one page of the index rather than one page each. It is used from
the host's Ray glue thread only, never from the trio thread.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ...errors import StoreError

__all__ = ["EnvelopeJournal"]

log = logging.getLogger("pride.cluster")

_APPLICATION = "pride-envelope-journal"
_LOOKUP_CHUNK = 500  # ids per lookup statement (SQLite allows 32,766 parameters)
_INSERT = "INSERT OR IGNORE INTO envelopes(envelope_id, branch_name, received_at) VALUES (?,?,?)"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS envelopes (
    envelope_id TEXT PRIMARY KEY,
    branch_name TEXT NOT NULL,
    turn_id TEXT,
    received_at REAL NOT NULL
) WITHOUT ROWID;
"""


def _prepare(db: sqlite3.Connection) -> str:
    """Set the journal up (WAL, its tables, its owner row); return the owner it names."""
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)
    db.execute(
        "INSERT OR IGNORE INTO journal_meta(key, value) VALUES ('application', ?)",
        (_APPLICATION,),
    )
    (owner,) = db.execute("SELECT value FROM journal_meta WHERE key='application'").fetchone()
    return str(owner)


class EnvelopeJournal:
    """Envelope ids a host has accepted (see the module docstring).

    Raises (on creation):
        StoreError: the file cannot be opened, or belongs to something else.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the envelope journal {path}: {exc}") from exc
        # Every refusal closes the connection: one is freed by the garbage collector
        # only (it is in a cycle with its statement cache), so a refused file left
        # to it stays open until a collection.
        try:
            owner = _prepare(db)
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a damaged schema's text
            db.close()
            raise StoreError(f"cannot open the envelope journal {path}: {exc}") from exc
        except BaseException:
            db.close()
            raise
        if owner != _APPLICATION:
            db.close()
            raise StoreError(f"{path} belongs to {owner!r}, not a pride envelope journal")
        self._db = db

    def record(self, envelopes: Iterable[tuple[str, str]]) -> set[str]:
        """Record ``(envelope_id, branch_name)`` pairs; return the ids recorded before
        this call (an id twice in ``pairs`` is the caller's to notice).

        One transaction for the lot, never one per envelope (a busy caller's
        batch holds hundreds). The common case, nothing seen before, costs one
        statement: a lone envelope (one ask at a time) is inserted in
        autocommit, its own transaction; a batch is inserted whole and
        committed when every row was new. Only when some row was there already
        (a replay) is the insert rolled back and the batch done again with a
        lookup first, to say which. Ids already recorded are left as they were.
        """
        now = time.time()
        rows = [(envelope_id, branch_name, now) for envelope_id, branch_name in envelopes]
        if not rows:
            return set()
        db = self._db
        if len(rows) == 1:
            if db.execute(_INSERT, rows[0]).rowcount == 1:
                return set()
            return {rows[0][0]}
        db.execute("BEGIN")
        try:
            if db.executemany(_INSERT, rows).rowcount == len(rows):
                db.execute("COMMIT")
                return set()
        finally:
            if db.in_transaction:
                db.execute("ROLLBACK")
        return self._record_replayed(rows)

    def _record_replayed(self, rows: list[tuple[str, str, float]]) -> set[str]:
        """`record` for a batch that holds ids seen before: a lookup, then the insert."""
        seen: set[str] = set()
        db = self._db
        with db:
            db.execute("BEGIN")
            for start in range(0, len(rows), _LOOKUP_CHUNK):
                chunk = [row[0] for row in rows[start : start + _LOOKUP_CHUNK]]
                marks = ",".join("?" * len(chunk))
                seen.update(
                    row[0]
                    for row in db.execute(
                        f"SELECT envelope_id FROM envelopes WHERE envelope_id IN ({marks})", chunk
                    )
                )
            db.executemany(_INSERT, rows)
        return seen

    def note_turns(self, turns: Iterable[tuple[str, str]]) -> None:
        """Record the turn id each ``(envelope_id, turn_id)`` pair started."""
        pairs = [(turn_id, envelope_id) for envelope_id, turn_id in turns]
        if pairs:
            with self._db:
                self._db.executemany("UPDATE envelopes SET turn_id=? WHERE envelope_id=?", pairs)

    def turn_of(self, envelope_id: str) -> str | None:
        """The turn id recorded for an envelope, if its turn started."""
        row = self._db.execute(
            "SELECT turn_id FROM envelopes WHERE envelope_id=?", (envelope_id,)
        ).fetchone()
        return None if row is None else row[0]

    def close(self) -> None:
        self._db.close()
