"""BranchStore: branch projections and their messages, durable in one SQLite file.

Why SQLite: one file, transactional, in the standard library, and WAL mode lets
readers (``pride inspect``) look while a long-running process writes. Every
call runs in a worker thread (``trio.to_thread``) so the event loop never
blocks on disk.

Reads (`load`, `load_messages`, `branches`, `register`, the journal readers)
go through a second, read-only connection that is opened and closed with the
store, never through the writer's: a commit runs in its own worker thread, and
on its connection a read in the middle of that commit's transaction would see
rows that commit may yet roll back. Each read is one read transaction (one
snapshot: a branch's projection and its messages come from the same commit);
reads take turns on that connection, one worker thread at a time, and WAL
means no read ever waits for a commit.

Durability contract:

* messages are appended as they are recorded, and a history changed
  otherwise (cleared, system message replaced) is queued as a rewrite; writes
  from every branch are batched, in order, so one commit (one fsync) covers
  whatever is queued;
* [`BranchStore.flush`][pride.store.BranchStore.flush] waits until what is
  queued so far (for one branch, or for all) is committed; a turn awaits it
  once at its end, so a crash (even ``kill -9``) loses at most the turn in
  flight, never an earlier message;
* a commit that fails, for any reason, fails exactly the flushes whose rows
  it held, each with [`StoreError`][pride.StoreError]: so a turn is answered ok
  only once its messages are on disk. The rows stay queued, ahead of newer
  ones, and go with the next commit: once the fault clears, the store catches
  up with the conversations in memory, and nothing else is refused meanwhile;
* one writer at a time: a second opener gets [`StoreLocked`][pride.StoreLocked]
  naming the holder; ``BranchStore(path, read_only=True)`` reads beside it;
* creating a store is one transaction, so a crash at any instant leaves no
  store or a whole one; a file that is not a pride store (corrupt, foreign,
  another schema) is refused with [`StoreError`][pride.StoreError], never
  overwritten;
* every row is strict JSON ([`dump_json`][pride.messages.codec.dump_json]); what
  strict JSON cannot carry is replaced, with a warning, never refused at
  write time: a non-finite float becomes null, an integer beyond 64 bits its
  decimal string (lone surrogates never get this far: messages replace them
  when they are built). A row that does not read back (a damaged file) is a
  [`StoreError`][pride.StoreError] naming the branch and the row.

* the turn journal (`pride.store.journal`) and the flow journal
  (`pride.store.flows`) are written through the same batches: a turn's
  steps and its messages are committed by the same flushes, in the order
  they were queued.

Schema (version `SCHEMA_VERSION`, in ``PRAGMA user_version`` and the
``pride_meta`` table; a version-1 store is upgraded when a writer opens it):

```text
pride_meta(key PRIMARY KEY, value)
branches(name PRIMARY KEY, branch_id, projection JSON, updated_at)
messages(branch_name, seq, message_id, data JSON, PRIMARY KEY (branch_name, seq))
turns(turn_id PRIMARY KEY, branch_name, status, command JSON, tag JSON, detail, ...)
steps(turn_id, step, data JSON, PRIMARY KEY (turn_id, step))
flows(flow_id PRIMARY KEY, name, plan JSON, started_at, updated_at)
flow_events(flow_id, seq, data JSON, PRIMARY KEY (flow_id, seq))
```
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self

import trio

from ..errors import InvalidMessage, StoreError
from ..messages import RoledMessage
from ..messages.codec import id_text, row_json
from ._batch import DELETE, HEADER, REWRITE, AfterCommit, Row
from ._bounds import oversize, refusal
from ._file import SCHEMA_VERSION, Writer, open_reader, open_writer
from ._journals import Journals
from ._queue import WriteQueue
from ._reads import Reads, StoredBranch
from ._rows import projection_text
from ._tables import MAX_ROW_BYTES, message_count, write_batch
from .flows import FlowOp, StoredFlow
from .journal import JournalOp, StoredTurn

__all__ = [
    "MAX_ROW_BYTES",
    "SCHEMA_VERSION",
    "BranchStore",
    "StoredBranch",
    "StoredFlow",
    "StoredTurn",
]

StoredBranch.__module__ = __name__  # its public home (it is defined beside the reads)

log = logging.getLogger("pride.store")


class SavableBranch(Protocol):
    """What [`BranchStore.save`][pride.store.BranchStore.save] needs of a branch (the
    store never imports actors)."""

    @property
    def name(self) -> str: ...
    @property
    def id_str(self) -> str: ...
    @property
    def messages(self) -> Iterable[RoledMessage]: ...
    def to_dict(self, mode: Any = ...) -> Mapping[str, Any]: ...


class BranchStore(Journals, Reads):
    """A SQLite file of branch projections and messages.

    Use as ``async with BranchStore(path) as store:``; opening creates the file
    (and its schema) if it does not exist, and makes this the store's one writer.

    Args:
        path: the store file.
        read_only: read a store (perhaps one another process is writing)
            without locking, creating or changing anything; writes raise.
        max_row_bytes: the largest row (its JSON, in UTF-8 bytes) written or read:
            a message, a branch's projection, a turn-journal entry or step, a
            flow's plan or event; default `MAX_ROW_BYTES`. A row over it (a
            runaway tool result) is not stored, and the next flush of whoever
            queued it fails with [`StoreError`][pride.StoreError] naming the row
            and its size, as for any message that cannot be stored; a stored row
            over it (from a store with a larger bound, or a damaged file) is
            refused where it is read, without being read into memory: a message
            or projection with [`StoreError`][pride.StoreError], a journaled turn
            or flow as one that does not read back (its ``problem`` says why).

    Raises:
        ValueError: ``max_row_bytes`` is not a positive int.

    Raises (on open):
        StoreLocked: another process (or open store) is writing the file.
        StoreError: the file cannot be opened or created, is not a SQLite
            database, or is a database of another application or schema version.
    """

    def __init__(
        self, path: str | Path, *, read_only: bool = False, max_row_bytes: int = MAX_ROW_BYTES
    ) -> None:
        is_int = isinstance(max_row_bytes, int) and not isinstance(max_row_bytes, bool)
        if not is_int or max_row_bytes < 1:
            raise ValueError(f"max_row_bytes must be a positive int, got {max_row_bytes!r}")
        self.path = Path(path)
        self.read_only = read_only
        self.max_row_bytes = max_row_bytes
        self._reader: sqlite3.Connection | None = None
        self._reading = trio.Lock()  # one read at a time on the read connection
        self._writer: Writer | None = None
        self._queue = WriteQueue(self.path, self._write_batch, max_row_bytes)
        self._next_seq: dict[str, int] = {}
        self._writers: dict[str, tuple[object, str]] = {}  # see `claim`
        self._unsaved: dict[str, StoreError] = {}  # see `_queue_branch`

    @property
    def commits(self) -> int:
        """Commits made so far that wrote something (each one transaction, one fsync)."""
        return self._queue.commits

    def __repr__(self) -> str:
        return f"<BranchStore {str(self.path)!r}{' read-only' if self.read_only else ''}>"

    # ------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Open (or create) the store; see the class for errors."""
        if not self.read_only:
            self._writer = await trio.to_thread.run_sync(open_writer, self.path)
        try:
            self._reader = await trio.to_thread.run_sync(open_reader, self.path)
        except BaseException:
            writer, self._writer = self._writer, None
            if writer is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(writer.close)
            raise

    async def aclose(self) -> None:
        """Commit what is queued and close the file (releasing it to the next writer).

        Rows that still cannot be committed are reported in the log (the
        turns that made them were already answered with the error)."""
        if self._reader is None:
            return
        try:
            with trio.CancelScope(shield=True):
                if self._queue.unwritten():
                    try:
                        await self.flush()
                    except StoreError as exc:
                        pending = self._queue.pending
                        log.error(
                            "closing %r: %d queued rows of %s were never written: %s",
                            self,
                            len(pending.rows) + len(pending.journal_ops()),
                            ", ".join(sorted(pending.branches)),
                            exc,
                        )
        finally:
            reader, self._reader = self._reader, None
            writer, self._writer = self._writer, None
            with trio.CancelScope(shield=True):
                async with self._reading:  # a read under way ends first
                    await trio.to_thread.run_sync(reader.close)
                if writer is not None:  # closed last: the last connection tidies the WAL
                    await trio.to_thread.run_sync(writer.close)

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

    def _require(self, *, write: bool = False) -> sqlite3.Connection:
        """The writer's connection (``write``), else the read connection."""
        if self._reader is None:
            raise StoreError(f"{self!r} is not open (use `async with BranchStore(path)`)")
        if not write:
            return self._reader
        if self._writer is None:
            raise StoreError(f"{self!r} was opened read-only; open it without read_only to write")
        return self._writer.db

    # -------------------------------------------------------------- writing

    def append(self, branch_name: str, message: RoledMessage) -> None:
        """Queue ``message`` for durable storage (never blocks); see
        [`flush`][pride.store.BranchStore.flush]."""
        self.append_all(branch_name, (message,))

    def append_all(self, branch_name: str, messages: Iterable[RoledMessage]) -> None:
        """Queue ``messages``, in order, as `append` would one by one (never blocks).

        A message that cannot be made a row is not stored; the next flush of
        ``branch_name`` fails with the [`StoreError`][pride.StoreError] saying so.
        """
        if self._writer is None or self._reader is None:
            self._require(write=True)  # raises: not open, or read-only
        seq = self._next_seq.get(branch_name)
        if seq is None:
            if self._refused_unsaved(branch_name):
                return
            seq = self._registered_seq(branch_name)  # raises: not registered
        rows: list[Row] = []
        for message in messages:
            try:
                data, replaced = row_json(message, RoledMessage)
            except Exception as exc:  # recorded in memory, not storable: said at the flush
                failed = StoreError(
                    f"message {message.id} of branch {branch_name!r} cannot be stored in "
                    f"{self.path}: {exc}"
                )
                log.error("%s", failed)
                self._queue.refuse(branch_name, failed)
                continue
            size = oversize(self.max_row_bytes, data)
            if size:
                what = f"message {message.id} of branch {branch_name!r}"
                error = refusal(self.path, what, size, self.max_row_bytes)
                log.error("%s", error)
                self._queue.refuse(branch_name, error)
                continue
            if replaced is not None:
                _stored_replaced(branch_name, message, replaced)
            rows.append((branch_name, seq, id_text(message.id), data))
            seq += 1
        self._next_seq[branch_name] = seq
        if rows:
            self._queue.rows(branch_name, rows)

    def rewrite(self, branch_name: str, messages: Iterable[RoledMessage]) -> None:
        """Queue replacing the stored conversation of ``branch_name`` with
        ``messages`` (never blocks). It is committed by the next
        [`flush`][pride.store.BranchStore.flush], in order with the appends queued
        before and after it."""
        self._require(write=True)
        if branch_name not in self._next_seq and self._refused_unsaved(branch_name):
            return
        self._registered_seq(branch_name)
        self._queue.row((branch_name, REWRITE, "", ""))
        self._next_seq[branch_name] = 0
        for message in messages:
            self.append(branch_name, message)

    def queue_save(self, branch: SavableBranch) -> None:
        """Queue storing ``branch`` whole (never blocks): its projection and its
        messages, replacing any stored copy of that name, committed by the next
        [`flush`][pride.store.BranchStore.flush] like any other row.

        The lazy form of [`save`][pride.store.BranchStore.save]: a session uses
        it for a new branch once it has something to store, so a branch whose
        first turn fails leaves no empty conversation behind.
        """
        self._require(write=True)
        projection = dict(branch.to_dict(mode="json"))
        projection.pop("messages", None)
        self._queue_branch(branch.name, branch.id_str, projection, list(branch.messages))

    def _queue_branch(
        self,
        name: str,
        branch_id: str,
        projection: Mapping[str, Any],
        messages: Iterable[RoledMessage],
    ) -> None:
        """Queue a branch's projection and its whole conversation, in order with
        every row queued before and after (the numbering restarts from 0 now).

        A projection over ``max_row_bytes`` queues nothing: the branch's next flush
        fails with the error naming it. A branch never stored then stays unstored,
        and what is appended to it is refused with the same error until a save
        of it fits (not "not registered": the save is what failed)."""
        header = projection_text(projection)
        size = oversize(self.max_row_bytes, header, branch_id)
        if size:  # nothing of the save is queued: the stored copy stays
            what = f"the projection of branch {name!r}"
            error = refusal(self.path, what, size, self.max_row_bytes)
            log.error("%s", error)
            self._queue.refuse(name, error)
            if name not in self._next_seq:  # never stored: its messages are refused too
                self._unsaved[name] = error
            return
        self._unsaved.pop(name, None)
        self._next_seq.setdefault(name, 0)
        self._queue.row((name, HEADER, branch_id, header))
        self.rewrite(name, messages)

    def _refused_unsaved(self, branch_name: str) -> bool:
        """Refuse a write to a branch whose save was refused (see `_queue_branch`)."""
        error = self._unsaved.get(branch_name)
        if error is None:
            return False
        self._queue.refuse(branch_name, error)
        return True

    def _registered_seq(self, branch_name: str) -> int:
        seq = self._next_seq.get(branch_name)
        if seq is None:
            raise StoreError(
                f"branch {branch_name!r} is not registered in {self!r}: save_branch() it first"
            )
        return seq

    async def flush(self, branch_name: str | None = None) -> None:
        """Commit what is queued so far: everything, or what ``branch_name`` queued
        (the commit takes every branch's rows anyway: one fsync for all).

        Concurrent callers share commits: a caller whose rows were taken by a
        commit already under way waits for that one, then at most one more.

        Raises:
            StoreError: a commit holding the caller's rows failed. The rows
                stay queued and are retried by the next commit.
        """
        self._require(write=True)
        await self._queue.flush(branch_name)

    def after_commit(self, branch_name: str, done: AfterCommit) -> bool:
        """The non-blocking form of ``flush(branch_name)``: call ``done(failure)``
        once what ``branch_name`` queued so far is committed (``failure`` None) or
        a commit holding it failed (the [`StoreError`][pride.StoreError]).

        Returns False, calling nothing, when nothing of ``branch_name`` is queued
        or being committed. Otherwise ``done`` is called exactly once, in the
        event loop's thread, when that commit ends (never from inside this
        call); the commit starts at once if no write is under way. No task
        waits for it, so no cancellation can stop it. ``done`` must not block
        (it is called synchronously, one waiter after another); one that
        raises is logged.

        A turn uses it to be answered by the commit that makes it durable, so
        its actor can serve its next item meanwhile (`pride.durable.commit`).
        """
        if self._writer is None or self._reader is None:
            self._require(write=True)  # raises: not open, or read-only
        return self._queue.after_commit(branch_name, done)

    def _write_batch(self, rows: list[Row], journal: list[JournalOp], flows: list[FlowOp]) -> None:
        write_batch(self._require(write=True), rows, journal, flows)

    async def save_branch(
        self,
        name: str,
        branch_id: str,
        projection: Mapping[str, Any],
        messages: Iterable[RoledMessage],
    ) -> None:
        """Store a branch's projection and replace its stored messages with ``messages``.

        ``projection`` is the branch's ``to_dict(mode="json")`` without its
        messages. Afterwards [`append`][pride.store.BranchStore.append] adds to this
        branch. The save is queued like any row, in order: what was queued of
        ``name`` before it is replaced, what is appended after it (even while
        this call waits for the commit) follows the saved messages.

        Raises:
            StoreError: the commit failed (the save stays queued and goes with
                the next commit, like every queued row), or a message cannot be
                made a row (it is not stored).
        """
        self._require(write=True)
        self._queue_branch(name, branch_id, projection, list(messages))
        await self.flush(name)

    async def save(self, branch: SavableBranch) -> None:
        """Store ``branch`` whole: its projection (``to_dict(mode="json")``, messages
        apart) and its messages, replacing any stored copy of that name."""
        projection = dict(branch.to_dict(mode="json"))
        projection.pop("messages", None)
        await self.save_branch(branch.name, branch.id_str, projection, list(branch.messages))

    async def register(self, name: str) -> None:
        """Let [`append`][pride.store.BranchStore.append] add to a branch already stored
        (continuing its numbering).

        What this store still has queued of ``name`` is committed first, so
        that the numbering continues after it.

        Raises:
            StoreError: its stored message numbers are out of range (a file
                altered by hand: appending to it would write the wrong rows),
                or the commit of what was queued of ``name`` failed.
        """
        await self.flush(name)
        count = await self._read(f"reading branch {name!r} from", message_count, self.path, name)
        self._next_seq[name] = count

    def claim(self, name: str, writer: object, label: str) -> None:
        """Make ``writer`` (a session's wiring, say) the one that persists the
        conversation ``name`` through this store, until it calls `release`.

        Two live branches writing one stored conversation would interleave their
        messages (the file holding neither's history), as two processes would;
        this refuses the second within a process, as the file's lock refuses it
        across processes. ``label`` names the writer in the error.

        Raises:
            StoreError: another writer holds ``name``, naming it.
        """
        holder = self._writers.get(name)
        if holder is not None and holder[0] is not writer:
            raise StoreError(
                f"branch {name!r} is already stored in {self.path} by {holder[1]}: a stored "
                "conversation has one writer; give this branch another name, or remove "
                "that one first"
            )
        self._writers[name] = (writer, label)

    def release(self, name: str, writer: object) -> None:
        """Let go of ``name`` (claimed by ``writer``; nothing happens otherwise)."""
        holder = self._writers.get(name)
        if holder is not None and holder[0] is writer:
            del self._writers[name]

    def holds(self, name: str) -> bool:
        """True while rows of ``name`` are queued or being committed."""
        return self._queue.holds(name)

    def forget(self, name: str) -> bool:
        """Let go of what this store object keeps in memory for ``name`` (its next
        message number), once nothing of it is queued: a passivated virtual
        branch leaves nothing behind. Its next use registers it again.

        Returns False, keeping it, while rows of ``name`` wait for a commit.
        """
        if self._queue.holds(name):
            return False
        self._next_seq.pop(name, None)
        self._unsaved.pop(name, None)
        return True

    async def delete(self, name: str) -> None:
        """Forget a stored branch, its messages and its journaled turns.

        The branch is unregistered at once: an [`append`][pride.store.BranchStore.append]
        to it after this call (even while it waits for the commit) is refused until
        it is saved again; what was queued of it before is deleted with it.

        Raises:
            StoreError: the commit failed (the deletion stays queued and goes
                with the next commit, like every queued row).
        """
        self._require(write=True)
        self._queue.row((name, DELETE, "", ""))
        self._next_seq.pop(name, None)
        self._unsaved.pop(name, None)
        await self.flush(name)

    async def _run(self, what: str, function: Any, *args: Any) -> Any:
        """``function(*args)`` in a worker thread; a failure of SQLite (or a row of
        the wrong type in a damaged file) becomes a StoreError saying what failed."""
        try:
            return await trio.to_thread.run_sync(function, *args)
        except (sqlite3.Error, ValueError, TypeError) as exc:
            raise StoreError(f"{what} {self.path} failed: {exc}") from exc

    async def _read(self, what: str, function: Any, *args: Any) -> Any:
        """``function(read connection, *args)`` in one read transaction, in a worker
        thread, after any read under way (see the module's docstring)."""
        self._require()
        async with self._reading:
            return await self._run(what, _snapshot, self._require(), function, *args)


def _snapshot(db: sqlite3.Connection, function: Any, *args: Any) -> Any:
    """``function(db, *args)`` inside one read transaction (worker thread)."""
    db.execute("BEGIN")
    try:
        return function(db, *args)
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")  # nothing to keep: it only read


def _stored_replaced(branch_name: str, message: RoledMessage, why: InvalidMessage) -> None:
    log.warning(
        "branch %r, message %s: %s; stored with the documented replacement",
        branch_name,
        message.id,
        why,
    )
