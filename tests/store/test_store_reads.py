"""A store's reads see what is committed, never a commit in the middle of its
transaction, and never wait for one (a real SQLite file in WAL mode).

The commit is held in the middle of its transaction by wrapping the connection
the store's writer hands to ``write_batch`` (the function every commit runs in
its worker thread): after the INSERT of the messages, before anything else.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pride import Instruction, StoreError
from pride.store import BranchStore, _reads as reads_module, sqlite as store_module


class HeldTransaction:
    """Stands in for the writer's connection: after the first INSERT into
    ``messages`` the commit stops (its rows written but not committed) until
    released, then fails like a disk would (``fail=True``) or goes on."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.release = threading.Event()
        self.fail = True

    def wrap(self, real_write: Any) -> Any:
        def held_write(db: sqlite3.Connection, *args: Any) -> None:
            real_write(_Connection(db, self), *args)

        return held_write


class _Connection:
    def __init__(self, db: sqlite3.Connection, hold: HeldTransaction) -> None:
        self._db, self._hold = db, hold

    def __enter__(self) -> Any:
        return self._db.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._db.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def execute(self, sql: str, *args: Any) -> Any:
        cursor = self._db.execute(sql, *args)
        if "INTO messages" in sql and not self._hold.holding.is_set():
            self._hold.holding.set()
            self._hold.release.wait(10)
            if self._hold.fail:
                raise sqlite3.OperationalError("disk I/O error")
        return cursor


async def _wait(event: threading.Event) -> None:
    assert await trio.to_thread.run_sync(event.wait, 10)


async def test_a_read_never_sees_the_rows_of_a_commit_that_then_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a commit is inside its transaction, ``load_messages``, ``load``,
    ``branches`` and the journal readers answer from what is committed; when that
    commit fails, nothing a reader was shown has to be taken back."""
    hold = HeldTransaction()
    async with BranchStore(tmp_path / "store.db") as store:
        await store.save_branch("ada", "id", {"name": "ada"}, [])
        monkeypatch.setattr(store_module, "write_batch", hold.wrap(store_module.write_batch))
        store.append("ada", Instruction(instruction="never committed"))
        async with trio.open_nursery() as nursery:
            failed = trio.Event()

            async def flush() -> None:
                with pytest.raises(StoreError, match="disk I/O error"):
                    await store.flush()
                failed.set()

            nursery.start_soon(flush)
            await _wait(hold.holding)
            with trio.fail_after(5):  # a read never waits for the commit
                assert await store.load_messages("ada") == []
                loaded = await store.load("ada")
                assert loaded is not None and loaded["messages"]["collections"] == []
                assert [(b.name, b.message_count) for b in await store.branches()] == [("ada", 0)]
                assert await store.unfinished_turns() == []
            hold.release.set()
            await failed.wait()
        assert await store.load_messages("ada") == []
        monkeypatch.undo()
        await store.flush()  # the fault cleared: the kept row is committed, and read
        assert [m.text for m in await store.load_messages("ada")] == ["never committed"]


async def test_a_read_after_a_commit_sees_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read side is a second connection: what a flush committed is what the
    next read returns, and a commit held open blocks no read, while the rows it
    holds appear only once it commits."""
    hold = HeldTransaction()
    hold.fail = False
    async with BranchStore(tmp_path / "store.db") as store:
        await store.save_branch("ada", "id", {}, [])
        monkeypatch.setattr(store_module, "write_batch", hold.wrap(store_module.write_batch))
        store.append("ada", Instruction(instruction="first"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.flush)
            await _wait(hold.holding)
            assert await store.load_messages("ada") == []
            hold.release.set()
        assert [m.text for m in await store.load_messages("ada")] == ["first"]


async def test_concurrent_reads_share_the_read_connection(tmp_path: Path) -> None:
    """Many reads at once (each its own worker thread) all answer, in full."""
    async with BranchStore(tmp_path / "store.db") as store:
        for index in range(4):
            name = f"b{index}"
            await store.save_branch(
                name, name, {}, [Instruction(instruction=str(n)) for n in range(index + 1)]
            )
        counts: dict[str, int] = {}

        async def read(name: str) -> None:
            counts[name] = len(await store.load_messages(name))

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                for index in range(4):
                    nursery.start_soon(read, f"b{index}")
        assert counts == {f"b{index}": index + 1 for index in range(4)}


async def test_a_load_is_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A branch replaced between the two queries of a load (its projection, then its
    messages) loads as it was before, whole: never the old projection with the
    new messages."""
    between = threading.Event()
    release = threading.Event()
    real_load = reads_module.load_branch

    class Paused:
        def __init__(self, db: sqlite3.Connection) -> None:
            self._db = db

        def execute(self, sql: str, *args: Any) -> Any:
            cursor = self._db.execute(sql, *args)
            if "FROM branches" in sql:
                between.set()
                release.wait(10)
            return cursor

    monkeypatch.setattr(reads_module, "load_branch", lambda db, *args: real_load(Paused(db), *args))
    async with BranchStore(tmp_path / "store.db") as store:
        await store.save_branch("ada", "id", {"v": 1}, [Instruction(instruction="old")])
        loaded: list[Any] = []

        async def load() -> None:
            loaded.append(await store.load("ada"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(load)
            await _wait(between)
            new = [Instruction(instruction="new"), Instruction(instruction="newer")]
            await store.save_branch("ada", "id", {"v": 2}, new)
            release.set()
        assert loaded[0]["v"] == 1
        assert [m["instruction"] for m in loaded[0]["messages"]["collections"]] == ["old"]
