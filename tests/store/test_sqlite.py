"""BranchStore against a real SQLite file."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

import pytest

from pride import AssistantResponse, Instruction, StoreError, System
from pride.store import SCHEMA_VERSION, BranchStore


def _conversation() -> list:
    return [
        System(system_message="be brief"),
        Instruction(instruction="hi"),
        AssistantResponse(assistant_response="hello"),
    ]


async def test_save_load_round_trip(tmp_path: Path) -> None:
    """A saved branch loads back with its projection and messages in order."""
    messages = _conversation()
    async with BranchStore(tmp_path / "store.db") as store:
        await store.save_branch("ada", "id-1", {"name": "ada", "chat_model": {"x": 1}}, messages)
        loaded = await store.load("ada")
        assert await store.load_messages("ada") == messages
    assert loaded is not None
    assert loaded["name"] == "ada"
    assert loaded["chat_model"] == {"x": 1}
    assert [item["id"] for item in loaded["messages"]["collections"]] == [
        str(m.id) for m in messages
    ]
    assert loaded["messages"]["progression"]["order"] == [str(m.id) for m in messages]


async def test_appended_messages_survive_reopening(tmp_path: Path) -> None:
    """Messages appended and flushed are there after the file is reopened."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [])
        saved = store.commits
        first, second = Instruction(instruction="a"), AssistantResponse(assistant_response="b")
        store.append("ada", first)
        store.append("ada", second)
        await store.flush()
        assert store.commits == saved + 1  # both messages in one commit
    async with BranchStore(path) as store:
        assert await store.load_messages("ada") == [first, second]
        await store.register("ada")
        third = Instruction(instruction="c")
        store.append("ada", third)
    async with BranchStore(path) as store:
        assert await store.load_messages("ada") == [first, second, third]
        listed = await store.branches()
    assert [(b.name, b.message_count) for b in listed] == [("ada", 3)]


async def test_one_commit_covers_every_branch(tmp_path: Path) -> None:
    """Writes queued by several branches are committed together."""
    async with BranchStore(tmp_path / "store.db") as store:
        for name in ("a", "b", "c"):
            await store.save_branch(name, name, {}, [])
        before = store.commits
        for name in ("a", "b", "c"):
            store.append(name, Instruction(instruction=name))
        await store.flush()
        assert store.commits == before + 1


async def test_append_to_unknown_branch_is_refused(tmp_path: Path) -> None:
    """Appending for a branch the store does not know raises StoreError."""
    async with BranchStore(tmp_path / "store.db") as store:
        with pytest.raises(StoreError, match="not registered"):
            store.append("ghost", Instruction(instruction="x"))


async def test_corrupt_file_is_refused_and_not_overwritten(tmp_path: Path) -> None:
    """A file that is not SQLite is refused with a clear error and left as it was."""
    path = tmp_path / "garbage.db"
    content = b"this is not a database at all" * 100
    path.write_bytes(content)
    with pytest.raises(StoreError, match=r"not a SQLite database|not a usable"):
        async with BranchStore(path):
            pass
    assert path.read_bytes() == content


async def test_foreign_database_is_refused(tmp_path: Path) -> None:
    """Another application's SQLite database is refused, never modified."""
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance REAL)")
    db.execute("INSERT INTO accounts VALUES (1, 10.0)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="another application"):
        async with BranchStore(path):
            pass
    db = sqlite3.connect(path)
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert tables == {"accounts"}


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    """A store written by another schema version is refused."""
    path = tmp_path / "store.db"
    async with BranchStore(path):
        pass
    db = sqlite3.connect(path)
    db.execute("UPDATE pride_meta SET value=? WHERE key='schema'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="schema"):
        async with BranchStore(path):
            pass


async def test_unopenable_path_fails_loudly(tmp_path: Path) -> None:
    """A path that cannot be a database file raises StoreError at open."""
    with pytest.raises(StoreError):
        async with BranchStore(tmp_path):  # a directory
            pass


async def test_a_failed_write_raises_at_the_flush_and_is_retried(tmp_path: Path) -> None:
    """A commit that fails raises StoreError at every flush that waits on its rows;
    the rows stay queued and are written by the first commit that succeeds."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id", {}, [])
        saboteur = sqlite3.connect(path)
        saboteur.execute("ALTER TABLE messages RENAME TO hidden")
        saboteur.commit()
        store.append("ada", Instruction(instruction="not lost"))
        with pytest.raises(StoreError, match="writing"):
            await store.flush()
        with pytest.raises(StoreError, match="writing"):
            await store.flush("ada")
        await store.flush("bob")  # nothing of bob's is queued: nothing to fail
        saboteur.execute("ALTER TABLE hidden RENAME TO messages")
        saboteur.commit()
        saboteur.close()
        store.append("ada", Instruction(instruction="next"))
        await store.flush()
        assert [m.text for m in await store.load_messages("ada")] == ["not lost", "next"]


async def test_using_a_closed_store_says_how_to_open_it(tmp_path: Path) -> None:
    """Calls on a store that is not open raise StoreError with the fix."""
    store = BranchStore(tmp_path / "x.db")
    with pytest.raises(StoreError, match="async with BranchStore"):
        await store.branches()


async def test_flush_waits_for_a_commit_that_took_its_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush whose messages were taken by a commit under way returns only once that
    commit is done: its caller must never be answered before its messages are on disk."""
    import threading

    import trio
    import trio.testing

    from pride.store import sqlite as store_module

    release = threading.Event()
    real_write = store_module.write_batch

    def held_write(db: sqlite3.Connection, batch: list, *journals: list) -> None:
        release.wait(10)
        real_write(db, batch, *journals)

    async with BranchStore(tmp_path / "store.db") as store:
        for name in ("a", "b"):
            await store.save_branch(name, name, {}, [])
        saved = store.commits
        monkeypatch.setattr(store_module, "write_batch", held_write)
        store.append("a", Instruction(instruction="from a"))
        store.append("b", Instruction(instruction="from b"))
        flushed: list[str] = []

        async def flush(name: str) -> None:
            await store.flush()
            flushed.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flush, "a")  # takes both messages into its commit
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(flush, "b")
            await trio.testing.wait_all_tasks_blocked()
            assert flushed == []  # b's message is not committed yet
            release.set()
        assert sorted(flushed) == ["a", "b"]
        assert store.commits == saved + 1


async def test_a_flush_cancelled_while_its_commit_starts_still_writes_the_batch(
    tmp_path: Path,
) -> None:
    """Once a commit took the queued rows, they are written (or kept queued) even if
    the task that started it is cancelled before the write began: another branch
    waiting on that commit must never be answered ok for rows that were dropped.
    (The worker threads are all busy, so the commit waits for one, and the task
    that started it is cancelled meanwhile.)"""
    import threading

    import trio
    import trio.testing

    path = tmp_path / "store.db"
    limiter = trio.to_thread.current_default_thread_limiter()
    tokens = limiter.total_tokens
    busy = threading.Event()
    async with BranchStore(path) as store:
        for name in ("a", "b"):
            await store.save_branch(name, name, {}, [])
        store.append("a", Instruction(instruction="from a"))
        store.append("b", Instruction(instruction="from b"))
        limiter.total_tokens = 1
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, busy.wait, 10)
                await trio.testing.wait_all_tasks_blocked()
                cancelled = trio.CancelScope()

                async def flush_a() -> None:
                    with cancelled:
                        await store.flush("a")

                nursery.start_soon(flush_a)  # takes both rows; waits for a thread
                await trio.testing.wait_all_tasks_blocked()
                flushed_b = trio.Event()

                async def flush_b() -> None:
                    await store.flush("b")  # waits on the commit that holds its row
                    flushed_b.set()

                nursery.start_soon(flush_b)
                await trio.testing.wait_all_tasks_blocked()
                cancelled.cancel()
                await trio.testing.wait_all_tasks_blocked()
                busy.set()
                await flushed_b.wait()
        finally:
            limiter.total_tokens = tokens
            busy.set()
    async with BranchStore(path, read_only=True) as reader:
        assert [m.text for m in await reader.load_messages("b")] == ["from b"]
        assert [m.text for m in await reader.load_messages("a")] == ["from a"]


async def test_rows_queued_during_a_commit_share_one_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit across branches: while a commit is under way, the rows of every
    branch that queues meanwhile wait for it and then go in one commit together
    (one more fsync, not one per branch), and every flush returns only after it."""
    import threading

    import trio
    import trio.testing

    from pride.store import sqlite as store_module

    release = threading.Event()
    real_write = store_module.write_batch

    def held_write(db: sqlite3.Connection, batch: list, *journals: list) -> None:
        release.wait(10)
        real_write(db, batch, *journals)

    names = [f"b{index}" for index in range(10)]
    async with BranchStore(tmp_path / "store.db") as store:
        for name in names:
            await store.save_branch(name, name, {}, [])
        before = store.commits
        monkeypatch.setattr(store_module, "write_batch", held_write)
        flushed: list[str] = []

        async def turn(name: str) -> None:
            store.append(name, Instruction(instruction=name))
            await store.flush(name)
            flushed.append(name)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn, names[0])  # its commit is held
            await trio.testing.wait_all_tasks_blocked()
            for name in names[1:]:
                nursery.start_soon(turn, name)
            await trio.testing.wait_all_tasks_blocked()
            assert flushed == []
            release.set()
        assert sorted(flushed) == sorted(names)
        assert store.commits == before + 2
        for name in names:
            assert [m.text for m in await store.load_messages(name)] == [name]


async def test_issue19_updated_at_is_rewritten_once_it_is_a_grain_old(tmp_path: Path) -> None:
    """A commit of a branch's rows moves its ``updated_at`` once the stored time is
    older than UPDATED_AT_GRAIN, and leaves a younger one alone (so a busy branch
    does not rewrite its row, projection and all, in every commit)."""
    from pride.store._tables import UPDATED_AT_GRAIN

    path = tmp_path / "store.db"

    def stamp(value: float | None = None) -> float:
        # beside the writer, as a test may: committed by `db`, then closed
        with contextlib.closing(sqlite3.connect(path)) as db, db:
            if value is not None:
                db.execute("UPDATE branches SET updated_at=? WHERE name='ada'", (value,))
            return float(db.execute("SELECT updated_at FROM branches").fetchone()[0])

    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [])
        old = stamp(time.time() - 10 * UPDATED_AT_GRAIN)
        store.append("ada", Instruction(instruction="a"))
        await store.flush()
        moved = stamp()
        assert moved > old + 5 * UPDATED_AT_GRAIN  # rewritten: it was old
        young = stamp(moved - UPDATED_AT_GRAIN / 10)
        store.append("ada", Instruction(instruction="b"))
        await store.flush()
        assert stamp() == young  # left alone: younger than the grain
        listed = await store.branches()
    assert listed[0].message_count == 2


async def test_issue19_append_all_stores_the_storable_and_fails_the_flush_for_the_rest(
    tmp_path: Path,
) -> None:
    """One call queues a turn's messages in order; a message that cannot be made a
    row is left out (the others keep consecutive numbers) and the branch's next
    flush fails with a StoreError naming it, so its turn is not answered ok."""

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

        __repr__ = __str__

    path = tmp_path / "store.db"
    first, second = Instruction(instruction="a"), AssistantResponse(assistant_response="b")
    bad = Instruction(instruction="c", metadata={"x": Unprintable()})
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [])
        store.append_all("ada", [first, bad, second])
        with pytest.raises(StoreError, match=str(bad.id)):
            await store.flush("ada")
        assert await store.load_messages("ada") == [first, second]
        third = Instruction(instruction="d")
        store.append_all("ada", [third])
        await store.flush("ada")  # the refusal was that batch's: this one is clean
        assert await store.load_messages("ada") == [first, second, third]


async def test_a_message_its_row_could_not_read_back_is_refused(tmp_path: Path) -> None:
    """A lone surrogate in text is stored with the documented replacement (U+FFFD), but
    in a field whose values are fixed (an image's detail) the replacement is no value at
    all: the row would never read back. It is refused at the flush, nothing of it is
    written, and the branch's other rows still load."""
    path = tmp_path / "store.db"
    kept = Instruction(instruction="first")
    # Only code builds this (a decoded one is refused by its type): trusted, and wrong.
    image = "https://example.org/a.png"
    lone = chr(0xD800)  # a lone surrogate (never a literal in a source file)
    bad = Instruction(instruction="look", images=(image,), image_detail=lone)
    replaced = AssistantResponse(assistant_response=f"a{lone}b")  # text: replaced when built
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [])
        store.append_all("ada", [kept, bad, replaced])
        with pytest.raises(StoreError, match=r"cannot be stored.*image_detail"):
            await store.flush("ada")
    async with BranchStore(path) as store:
        loaded = await store.load_messages("ada")
    assert [m.id for m in loaded] == [kept.id, replaced.id]
    assert loaded[1].assistant_response == "a\ufffdb"
