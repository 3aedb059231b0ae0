"""BranchStore: branch projections and their messages, durable in one SQLite file.

Why SQLite: one file, transactional, in the standard library, and WAL mode lets
readers (``pride inspect``) look while a long-running process writes. Every
call runs in a worker thread (``trio.to_thread``) so the event loop never
blocks on disk.

Durability contract:

* messages are appended as they are recorded, and a history changed
  otherwise (cleared, system message replaced) is queued as a rewrite; writes
  from every branch are batched, in order, so one commit (one fsync) covers
  whatever is queued;
* [`BranchStore.flush`][pride.store.BranchStore.flush] waits until everything queued so far is
  committed; a turn awaits it once at its end, so a crash (even ``kill -9``)
  loses at most the turn in flight, never an earlier message;
* a file that is not a pride store (corrupt, or another application's
  database) is refused with [`StoreError`][pride.StoreError], never overwritten;
* a write that fails raises at the write (and every later flush), never
  silently.

Schema (version `SCHEMA_VERSION`, in ``PRAGMA user_version`` and the
``pride_meta`` table):

```text
pride_meta(key PRIMARY KEY, value)
branches(name PRIMARY KEY, branch_id, projection JSON, updated_at)
messages(branch_name, seq, message_id, data JSON, PRIMARY KEY (branch_name, seq))
```
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import attrs
import trio

from ..errors import StoreError
from ..messages import RoledMessage, structure, unstructure

__all__ = ["SCHEMA_VERSION", "BranchStore", "StoredBranch"]

log = logging.getLogger("pride.store")

SCHEMA_VERSION = 1
_APPLICATION = "pride-branch-store"

# In a queued batch, a row with this sequence number stands for "delete the
# branch's stored messages": the rows after it are its new conversation.
_REWRITE = -1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pride_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS branches (
    name TEXT PRIMARY KEY,
    branch_id TEXT NOT NULL,
    projection TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    branch_name TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (branch_name, seq)
);
"""


@attrs.frozen
class StoredBranch:
    """One stored branch as ``pride inspect`` lists it."""

    name: str
    branch_id: str
    message_count: int
    updated_at: float


class SavableBranch(Protocol):
    """What [`BranchStore.save`][pride.store.BranchStore.save] needs of a branch (the store never
    imports actors)."""

    @property
    def name(self) -> str: ...
    @property
    def id_str(self) -> str: ...
    @property
    def messages(self) -> Iterable[RoledMessage]: ...
    def to_dict(self, mode: Any = ...) -> Mapping[str, Any]: ...


class BranchStore:
    """A SQLite file of branch projections and messages.

    Use as ``async with BranchStore(path) as store:``; opening creates the file
    (and its schema) if it does not exist.

    Raises (on open):
        StoreError: the file cannot be opened or created, is not a SQLite
            database, or is a database of another application or schema version.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._pending: list[tuple[str, int, str, str]] = []
        self._next_seq: dict[str, int] = {}
        self._lock = trio.Lock()
        self._failure: StoreError | None = None
        self.commits = 0

    def __repr__(self) -> str:
        return f"<BranchStore {str(self.path)!r}>"

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open (or create) the store; see the class for errors."""
        self._db = await trio.to_thread.run_sync(_connect, self.path)

    async def aclose(self) -> None:
        """Commit what is queued and close the file."""
        if self._db is None:
            return
        try:
            with trio.CancelScope(shield=True):
                await self.flush()
        finally:
            db, self._db = self._db, None
            await trio.to_thread.run_sync(db.close)

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _require(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError(f"{self!r} is not open (use `async with BranchStore(path)`)")
        if self._failure is not None:
            raise self._failure
        return self._db

    # -------------------------------------------------------------- writing

    def append(self, branch_name: str, message: RoledMessage) -> None:
        """Queue ``message`` for durable storage (never blocks); see
        [`flush`][pride.store.BranchStore.flush]."""
        self._require()
        seq = self._registered_seq(branch_name)
        self._next_seq[branch_name] = seq + 1
        data = json.dumps(unstructure(message), ensure_ascii=False)
        self._pending.append((branch_name, seq, str(message.id), data))

    def rewrite(self, branch_name: str, messages: Iterable[RoledMessage]) -> None:
        """Queue replacing the stored conversation of ``branch_name`` with
        ``messages`` (never blocks). It is committed by the next
        [`flush`][pride.store.BranchStore.flush],
        in order with the appends queued before and after it."""
        self._require()
        self._registered_seq(branch_name)
        self._pending.append((branch_name, _REWRITE, "", ""))
        self._next_seq[branch_name] = 0
        for message in messages:
            self.append(branch_name, message)

    def _registered_seq(self, branch_name: str) -> int:
        seq = self._next_seq.get(branch_name)
        if seq is None:
            raise StoreError(
                f"branch {branch_name!r} is not registered in {self!r}: save_branch() it first"
            )
        return seq

    async def flush(self) -> None:
        """Commit everything queued so far (one transaction for all branches).

        Concurrent callers share commits: a caller whose messages were taken
        by a commit already under way waits for that one, then at most one more.

        Raises:
            StoreError: the write failed (the store then refuses further writes).
        """
        db = self._require()
        if not self._pending and not self._lock.locked():
            return  # nothing queued, and no commit under way that may hold our messages
        async with self._lock:
            batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                await trio.to_thread.run_sync(_insert_messages, db, batch)
            except sqlite3.Error as exc:
                self._failure = StoreError(f"writing to {self.path} failed: {exc}")
                log.error("%s", self._failure)
                raise self._failure from exc
            self.commits += 1

    async def save_branch(
        self,
        name: str,
        branch_id: str,
        projection: Mapping[str, Any],
        messages: Iterable[RoledMessage],
    ) -> None:
        """Store a branch's projection and replace its stored messages with ``messages``.

        ``projection`` is the branch's ``to_dict(mode="json")`` without its
        messages. Afterwards [`append`][pride.store.BranchStore.append] adds to this branch.
        """
        db = self._require()
        await self.flush()
        rows = [
            (name, seq, str(message.id), json.dumps(unstructure(message), ensure_ascii=False))
            for seq, message in enumerate(messages)
        ]
        header = json.dumps(dict(projection), ensure_ascii=False, default=str)
        async with self._lock:
            try:
                await trio.to_thread.run_sync(_replace_branch, db, name, branch_id, header, rows)
            except sqlite3.Error as exc:
                raise StoreError(f"saving branch {name!r} to {self.path} failed: {exc}") from exc
            self._next_seq[name] = len(rows)

    async def save(self, branch: SavableBranch) -> None:
        """Store ``branch`` whole: its projection (``to_dict(mode="json")``, messages
        apart) and its messages, replacing any stored copy of that name."""
        projection = dict(branch.to_dict(mode="json"))
        projection.pop("messages", None)
        await self.save_branch(branch.name, branch.id_str, projection, list(branch.messages))

    async def register(self, name: str) -> None:
        """Let [`append`][pride.store.BranchStore.append] add to a branch already stored (continuing
        its numbering)."""
        db = self._require()
        count = await trio.to_thread.run_sync(_message_count, db, name)
        self._next_seq[name] = count

    async def delete(self, name: str) -> None:
        """Forget a stored branch and its messages."""
        db = self._require()
        await self.flush()
        async with self._lock:
            await trio.to_thread.run_sync(_delete_branch, db, name)
        self._next_seq.pop(name, None)

    # -------------------------------------------------------------- reading

    async def branches(self) -> list[StoredBranch]:
        """Every stored branch, by name."""
        db = self._require()
        rows = await trio.to_thread.run_sync(_list_branches, db)
        return [StoredBranch(*row) for row in rows]

    async def load(self, name: str) -> dict[str, Any] | None:
        """The stored projection of ``name`` with its messages, or None.

        The result has the ``to_dict`` shape (``messages`` as collections and
        progression) and can be passed to ``Branch.from_dict``.
        """
        db = self._require()
        found = await trio.to_thread.run_sync(_load_branch, db, name)
        if found is None:
            return None
        header, rows = found
        projection: dict[str, Any] = json.loads(header)
        collections = [json.loads(data) for data in rows]
        projection["messages"] = {
            "collections": collections,
            "progression": {"order": [item["id"] for item in collections]},
        }
        return projection

    async def load_messages(self, name: str) -> list[RoledMessage]:
        """The stored messages of ``name``, in order (empty if unknown)."""
        db = self._require()
        found = await trio.to_thread.run_sync(_load_branch, db, name)
        if found is None:
            return []
        return [structure(json.loads(data), RoledMessage) for data in found[1]]


# ------------------------------------------------------- worker-thread code


def _connect(path: Path) -> sqlite3.Connection:
    existed = path.exists() and path.stat().st_size > 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open branch store {path}: {exc}") from exc
    try:
        if existed:
            _check_identity(db, path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        if not existed:
            db.executescript(_SCHEMA)
            db.execute(
                "INSERT INTO pride_meta(key, value) VALUES ('application', ?), ('schema', ?)",
                (_APPLICATION, str(SCHEMA_VERSION)),
            )
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    except StoreError:
        db.close()
        raise
    except sqlite3.Error as exc:
        db.close()
        raise StoreError(f"{path} is not a usable pride branch store: {exc}") from exc
    return db


def _check_identity(db: sqlite3.Connection, path: Path) -> None:
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a SQLite database (refusing to touch it): {exc}") from exc
    if "pride_meta" not in tables:
        raise StoreError(
            f"{path} is a database of another application (no pride_meta table); "
            "refusing to use or overwrite it"
        )
    meta = dict(db.execute("SELECT key, value FROM pride_meta").fetchall())
    if meta.get("application") != _APPLICATION:
        raise StoreError(f"{path} belongs to {meta.get('application')!r}, not pride")
    if meta.get("schema") != str(SCHEMA_VERSION):
        raise StoreError(
            f"{path} has pride store schema {meta.get('schema')}, this pride reads {SCHEMA_VERSION}"
        )


def _insert_messages(db: sqlite3.Connection, batch: list[tuple[str, int, str, str]]) -> None:
    insert = "INSERT OR REPLACE INTO messages(branch_name, seq, message_id, data) VALUES (?,?,?,?)"
    with db:
        db.execute("BEGIN")
        rows: list[tuple[str, int, str, str]] = []
        for row in batch:
            if row[1] == _REWRITE:
                db.executemany(insert, rows)
                rows = []
                db.execute("DELETE FROM messages WHERE branch_name=?", (row[0],))
            else:
                rows.append(row)
        db.executemany(insert, rows)
        names = {row[0] for row in batch}
        db.executemany(
            "UPDATE branches SET updated_at=? WHERE name=?", [(time.time(), n) for n in names]
        )


def _replace_branch(
    db: sqlite3.Connection,
    name: str,
    branch_id: str,
    header: str,
    rows: list[tuple[str, int, str, str]],
) -> None:
    with db:
        db.execute("BEGIN")
        db.execute(
            "INSERT OR REPLACE INTO branches(name, branch_id, projection, updated_at) "
            "VALUES (?,?,?,?)",
            (name, branch_id, header, time.time()),
        )
        db.execute("DELETE FROM messages WHERE branch_name=?", (name,))
        db.executemany(
            "INSERT INTO messages(branch_name, seq, message_id, data) VALUES (?,?,?,?)", rows
        )


def _delete_branch(db: sqlite3.Connection, name: str) -> None:
    with db:
        db.execute("BEGIN")
        db.execute("DELETE FROM messages WHERE branch_name=?", (name,))
        db.execute("DELETE FROM branches WHERE name=?", (name,))


def _message_count(db: sqlite3.Connection, name: str) -> int:
    row = db.execute(
        "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE branch_name=?", (name,)
    ).fetchone()
    return int(row[0])


def _list_branches(db: sqlite3.Connection) -> list[tuple[str, str, int, float]]:
    return [
        (name, branch_id, int(count), float(updated))
        for name, branch_id, count, updated in db.execute(
            "SELECT b.name, b.branch_id, COUNT(m.seq), b.updated_at FROM branches b "
            "LEFT JOIN messages m ON m.branch_name = b.name GROUP BY b.name ORDER BY b.name"
        )
    ]


def _load_branch(db: sqlite3.Connection, name: str) -> tuple[str, list[str]] | None:
    row = db.execute("SELECT projection FROM branches WHERE name=?", (name,)).fetchone()
    if row is None:
        return None
    rows = [
        data
        for (data,) in db.execute(
            "SELECT data FROM messages WHERE branch_name=? ORDER BY seq", (name,)
        )
    ]
    return row[0], rows
