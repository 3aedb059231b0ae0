"""Opening a store file: one writer at a time, creation in one transaction, identity checks.

(A damaged schema can make SQLite's error text itself invalid UTF-8, which
Python's sqlite3 then raises as ``UnicodeDecodeError``: it is caught with
SQLite's own errors wherever a damaged file is read.)

Worker-thread code (blocking); [`BranchStore`][pride.store.BranchStore] calls it
through ``trio.to_thread``.

**One writer.** Two processes writing one store would each number a
branch's messages from their own memory and overwrite each other's rows
(``integrity_check`` still says ok), and each would hold a different
conversation under the same branch name, so merging writes could not make
that safe. SQLite's own locks last one transaction, so they cannot say "this
store is in use". The writer therefore holds ``flock(2)`` on the database
file for as long as the store is open: the kernel releases it when the
process ends, ``kill -9`` included, so there is never a stale lock to clean
up. A second writer fails at once with [`StoreLocked`][pride.StoreLocked], naming
the holder from the ``writer`` row the holder records in ``pride_meta``.
Readers (``pride inspect``) open the file read-only and take no lock; WAL
lets them read while the writer writes. (``flock`` is advisory and does not
mix with SQLite's ``fcntl`` locks on Linux or macOS; on network file systems
it may not hold, as SQLite's own locking may not.)

**Atomic creation.** A new store's schema, its ``pride_meta`` rows and its
``user_version`` and ``application_id`` are written in one ``BEGIN
IMMEDIATE`` transaction, so a crash at any instant leaves either an empty
database or a complete store. An empty database (no schema objects, both
header numbers zero: what a crash before that commit leaves, or a zero-byte
file) holds nothing to lose, so opening it creates the store. WAL mode is
set after the commit, on every open: it is idempotent, and a crash before it
only leaves a complete store in rollback-journal mode.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

from ..errors import StoreError, StoreLocked
from ._bounds import cut

_fcntl: Any
try:
    import fcntl as _fcntl
except ImportError:  # not POSIX: the lock is not enforced (say so, never silently)
    _fcntl = None

__all__ = [
    "APPLICATION",
    "APPLICATION_ID",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "open_reader",
    "open_writer",
]

SCHEMA_VERSION = 3
"""Version 2 added the turn journal (``turns``, ``steps``), version 3 the flow
journal (``flows``, ``flow_events``); an older store is upgraded in place, in
one transaction, when a writer opens it."""
READABLE_VERSIONS = frozenset({"1", "2", str(SCHEMA_VERSION)})
"""Schema versions a reader accepts (an older store simply has no journal)."""
APPLICATION = "pride-branch-store"
APPLICATION_ID = 0x70726964
"""``PRAGMA application_id`` of a pride store (the ASCII of ``prid``), SQLite's
own way to mark a file format."""

META_BYTES = 1000
"""The longest ``pride_meta`` value a store reads whole (pride writes under a hundred
characters: its application, its schema version, its writer): a longer one, in a
foreign or damaged file, reads as its first hundred characters and an ellipsis."""

BUSY_TIMEOUT = 5.0
"""Seconds SQLite waits for a lock held by a reader's checkpoint before failing."""

_SCHEMA = (
    "CREATE TABLE pride_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE branches ("
    "name TEXT PRIMARY KEY, branch_id TEXT NOT NULL, projection TEXT NOT NULL, "
    "updated_at REAL NOT NULL)",
    "CREATE TABLE messages ("
    "branch_name TEXT NOT NULL, seq INTEGER NOT NULL, message_id TEXT NOT NULL, "
    "data TEXT NOT NULL, PRIMARY KEY (branch_name, seq))",
)
# Version 2: the turn journal (`pride.store.journal`).
_JOURNAL_SCHEMA = (
    "CREATE TABLE turns ("
    "turn_id TEXT PRIMARY KEY, branch_name TEXT NOT NULL, status TEXT NOT NULL, "
    "command TEXT, tag TEXT, detail TEXT, started_at REAL NOT NULL, updated_at REAL NOT NULL)",
    "CREATE INDEX turns_by_branch ON turns(branch_name)",
    "CREATE TABLE steps ("
    "turn_id TEXT NOT NULL, step INTEGER NOT NULL, data TEXT NOT NULL, "
    "PRIMARY KEY (turn_id, step))",
)
# Version 3: the flow journal (`pride.store.flows`).
_FLOW_SCHEMA = (
    "CREATE TABLE flows ("
    "flow_id TEXT PRIMARY KEY, name TEXT, plan TEXT NOT NULL, started_at REAL NOT NULL, "
    "updated_at REAL NOT NULL)",
    "CREATE TABLE flow_events ("
    "flow_id TEXT NOT NULL, seq INTEGER NOT NULL, data TEXT NOT NULL, "
    "PRIMARY KEY (flow_id, seq))",
)


class Writer:
    """An open store for writing: the connection and the lock that makes it the only one."""

    def __init__(self, db: sqlite3.Connection, lock_fd: int | None) -> None:
        self.db = db
        self._lock_fd = lock_fd

    def close(self) -> None:
        """Forget the writer row, close the connection, release the lock."""
        try:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("DELETE FROM pride_meta WHERE key='writer'")
            self.db.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)  # closing the descriptor releases the flock
                self._lock_fd = None


def open_writer(path: Path) -> Writer:
    """Lock, open and (if empty) create the store at ``path``.

    Raises:
        StoreLocked: another process (or another open store) is writing it.
        StoreError: the file cannot be opened or created, is not a SQLite
            database, or is a database of another application or schema version.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as exc:
        raise StoreError(f"cannot open branch store {path}: {exc}") from exc
    try:
        _lock(lock_fd, path)
        try:
            db = sqlite3.connect(
                str(path), check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open branch store {path}: {exc}") from exc
        try:
            _prepare(db, path)
        except BaseException:
            db.close()
            raise
    except BaseException:
        os.close(lock_fd)
        raise
    return Writer(db, lock_fd)


def open_reader(path: Path) -> sqlite3.Connection:
    """Open an existing store read-only (no lock, no creation, nothing written).

    Raises:
        StoreError: no such file, not a SQLite database, or not a pride store.
    """
    if not path.is_file():
        raise StoreError(f"no branch store at {path}")
    try:
        db = sqlite3.connect(
            path.resolve().as_uri() + "?mode=ro",
            uri=True,
            check_same_thread=False,
            isolation_level=None,
            timeout=BUSY_TIMEOUT,
        )
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open branch store {path}: {exc}") from exc
    try:
        if _is_empty(db, path):
            raise StoreError(f"{path} is an empty database, not a pride branch store (yet)")
        _check_identity(db, path)
    except BaseException:
        db.close()
        raise
    return db


# ------------------------------------------------------------------ helpers


def _lock(fd: int, path: Path) -> None:
    if _fcntl is None:
        import logging

        logging.getLogger("pride.store").warning(
            "%s: this platform has no flock(); a second writer would not be refused", path
        )
        return
    try:
        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
    except BlockingIOError:
        raise StoreLocked(path, _holder(path)) from None
    except OSError as exc:
        raise StoreError(f"cannot lock branch store {path}: {exc}") from exc


def _holder(path: Path) -> str | None:
    """Who holds the store, as its ``writer`` row says (None if it cannot be read)."""
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        row = db.execute(
            f"SELECT {cut('value', META_BYTES)} FROM pride_meta WHERE key='writer'"
        ).fetchone()
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    finally:
        db.close()
    return str(row[0]) if row else None


def _prepare(db: sqlite3.Connection, path: Path) -> None:
    """Create the store if the database is empty, else check it is ours; record the writer."""
    writer = (
        f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%dT%H:%M:%S%z')}"
    )
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            if _is_empty(db, path):
                for statement in _SCHEMA + _JOURNAL_SCHEMA + _FLOW_SCHEMA:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO pride_meta(key, value) VALUES ('application', ?), ('schema', ?)",
                    (APPLICATION, str(SCHEMA_VERSION)),
                )
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            else:
                version = _check_identity(db, path)
                if version != str(SCHEMA_VERSION):
                    _upgrade(db, version)
            db.execute(
                "INSERT OR REPLACE INTO pride_meta(key, value) VALUES ('writer', ?)", (writer,)
            )
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
    except StoreError:
        raise
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise open_failure(path, exc) from exc


def open_failure(path: Path, exc: BaseException, otherwise: str | None = None) -> StoreError:
    """The `StoreError` for a SQLite error met while opening the store at ``path``.

    SQLite says what failed in its error code: a full disk (``SQLITE_FULL``), a
    failed read or write (``SQLITE_IOERR_*``: a failing disk, a file-size
    limit), a file it may not write (``SQLITE_READONLY``, ``SQLITE_CANTOPEN``,
    ``SQLITE_PERM``). Those are said as such, with what to do; anything else
    (``SQLITE_NOTADB``, ``SQLITE_CORRUPT``, bytes that do not decode) is a file
    that is not a usable store, which pride refuses to touch (``otherwise``
    says so, when given).
    """
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    where = f"cannot use branch store {path}"
    if name == "SQLITE_FULL":
        return StoreError(f"{where}: the disk is full ({exc}); free some space and start again")
    if name.startswith("SQLITE_IOERR"):
        return StoreError(
            f"{where}: reading or writing it failed ({exc}, {name}); the disk may be full "
            "or failing, or the file past a size limit (ulimit -f)"
        )
    if name in ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM"):
        return StoreError(
            f"{where}: it cannot be written ({exc}, {name}); check the permissions of the "
            "file, of its -wal and -shm files and of its directory"
        )
    if otherwise is not None:
        return StoreError(otherwise)
    return StoreError(
        f"{path} is not a SQLite database or not a usable pride branch store "
        f"(refusing to touch it): {exc}"
    )


def _is_empty(db: sqlite3.Connection, path: Path) -> bool:
    """True for a database with no schema objects and zero header numbers."""
    try:
        objects = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
        user_version = db.execute("PRAGMA user_version").fetchone()[0]
        application_id = db.execute("PRAGMA application_id").fetchone()[0]
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        not_one = f"{path} is not a SQLite database (refusing to touch it): {exc}"
        raise open_failure(path, exc, not_one) from exc
    return bool(objects == 0 and user_version == 0 and application_id == 0)


def _upgrade(db: sqlite3.Connection, version: str) -> None:
    """An older version to this one, inside the opening transaction: add the
    journal tables it lacks (version 1: both journals; version 2: the flows')."""
    for statement in (_JOURNAL_SCHEMA if version == "1" else ()) + _FLOW_SCHEMA:
        db.execute(statement)
    db.execute("UPDATE pride_meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION),))
    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _check_identity(db: sqlite3.Connection, path: Path) -> str:
    """Refuse what is not a pride store this pride reads; return its schema version."""
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "pride_meta" not in tables:
            raise StoreError(
                f"{path} is a database of another application (no pride_meta table); "
                "refusing to use or overwrite it"
            )
        meta = dict(
            db.execute(
                f"SELECT key, {cut('value', META_BYTES)} FROM pride_meta "
                "WHERE key IN ('application', 'schema')"
            ).fetchall()
        )
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        not_one = f"{path} is not a SQLite database (refusing to touch it): {exc}"
        raise open_failure(path, exc, not_one) from exc
    if meta.get("application") != APPLICATION:
        raise StoreError(f"{path} belongs to {meta.get('application')!r}, not pride")
    schema = meta.get("schema")
    if schema not in READABLE_VERSIONS:
        raise StoreError(
            f"{path} has pride store schema {schema}, this pride reads "
            f"{', '.join(sorted(READABLE_VERSIONS))}"
        )
    missing = {"branches", "messages"} - tables
    if schema != "1":
        missing |= {"turns", "steps"} - tables
    if schema == str(SCHEMA_VERSION):
        missing |= {"flows", "flow_events"} - tables
    if missing:
        raise StoreError(
            f"{path} is a damaged pride store: table(s) {', '.join(sorted(missing))} missing"
        )
    return str(schema)
