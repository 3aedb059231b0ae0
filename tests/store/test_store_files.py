"""Files on disk that pride did not just write: a damaged store is a StoreError, never worse.

A real store is written, then damaged the ways disks and people damage files
(truncated, bytes flipped, pages zeroed, garbage in its WAL), and opened,
listed, loaded and written to again: each step either works or raises
``StoreError``, whatever the damage, and never another exception.
"""

from __future__ import annotations

import gc
import random
import shutil
import sqlite3
from pathlib import Path

import psutil
import pytest

from pride import AssistantResponse, Instruction, StoreError, System
from pride.store import BranchStore

SEEDS = range(40)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two branches of a few messages each, checkpointed into one file."""
    import trio

    path = tmp_path_factory.mktemp("store") / "pristine.db"

    async def fill() -> None:
        async with BranchStore(path) as store:
            for name in ("ada", "bob"):
                messages = [System(system_message=f"you are {name}")]
                for turn in range(20):
                    messages.append(Instruction(instruction=f"{name} asks {turn} " + "x" * 200))
                    messages.append(AssistantResponse(assistant_response=f"answer {turn}"))
                await store.save_branch(name, name, {"name": name}, messages)

    trio.run(fill)
    return path


def damage(source: Path, target: Path, seed: int) -> str:
    """Copy ``source`` to ``target`` and damage the copy one way; say which."""
    shutil.copy(source, target)
    rng = random.Random(seed)
    data = bytearray(target.read_bytes())
    how = rng.choice(["truncate", "flip", "zero page", "garbage wal", "header"])
    if how == "truncate":
        data = data[: rng.randrange(len(data))]
    elif how == "flip":
        for _ in range(rng.randint(1, 50)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "zero page":
        page = rng.randrange(len(data) // 4096)
        data[page * 4096 : (page + 1) * 4096] = bytes(4096)
    elif how == "header":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(100)] = rng.randrange(256)
    else:
        target.with_name(target.name + "-wal").write_bytes(rng.randbytes(rng.randint(1, 9000)))
    target.write_bytes(bytes(data))
    return how


async def exercise(path: Path) -> None:
    """Open, list, load and write; raise only StoreError."""
    async with BranchStore(path) as store:
        for stored in await store.branches():
            await store.load(stored.name)
            await store.load_messages(stored.name)
        await store.save_branch("carl", "carl", {}, [Instruction(instruction="new")])
        await store.register("ada")
        store.append("ada", Instruction(instruction="more"))
        await store.flush()
    async with BranchStore(path, read_only=True) as reader:
        await reader.branches()


@pytest.mark.parametrize("seed", SEEDS)
async def test_issue14_a_damaged_store_works_or_is_a_store_error(
    pristine: Path, tmp_path: Path, seed: int
) -> None:
    """Whatever the damage, every step works or raises StoreError naming the file, and
    the store leaves the file closed either way: not to the garbage collector (which
    frees a sqlite3 connection only in a collection, so the collector is held off here
    while the file's descriptors are counted)."""
    target = tmp_path / "damaged.db"
    how = damage(pristine, target, seed)
    gc.disable()
    try:
        try:
            await exercise(target)
        except StoreError as exc:
            assert str(target) in str(exc), (how, exc)
        opened = [f.path for f in psutil.Process().open_files() if f.path.startswith(str(target))]
    finally:
        gc.enable()
    assert opened == [], how


@pytest.mark.parametrize(
    "prepare",
    [
        "empty file",
        "directory",
        "same tables, no pride_meta",
        "pride_meta of another app",
        "a table missing",
        "newer schema",
        "rows of the wrong type",
        "schema text not UTF-8",
    ],
)
async def test_issue14_foreign_and_doctored_files_are_refused_with_store_error(
    pristine: Path, tmp_path: Path, prepare: str
) -> None:
    """Files that look like a store but are not one, or a store doctored by hand: a clear
    StoreError (an empty file is simply made a store)."""
    path = tmp_path / "store.db"
    if prepare == "directory":
        path.mkdir()
    elif prepare == "empty file":
        path.write_bytes(b"")
    elif prepare == "same tables, no pride_meta":
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE branches (name TEXT)")
        db.execute("CREATE TABLE messages (branch_name TEXT)")
        db.close()
    elif prepare == "schema text not UTF-8":
        # SQLite's error message then quotes bytes that are not UTF-8, which Python's
        # sqlite3 raised as a bare UnicodeDecodeError.
        data = bytearray(pristine.read_bytes())
        data[data.index(b"PRIMARY KEY (branch_name") + 20] = 0xEE
        path.write_bytes(bytes(data))
    else:
        shutil.copy(pristine, path)
        db = sqlite3.connect(path)
        statement = {
            "pride_meta of another app": "UPDATE pride_meta SET value='not-pride' "
            "WHERE key='application'",
            "a table missing": "DROP TABLE branches",
            "newer schema": "UPDATE pride_meta SET value='99' WHERE key='schema'",
            "rows of the wrong type": "UPDATE messages SET data=x'00ff' WHERE seq=3",
        }[prepare]
        db.execute(statement)
        db.commit()
        db.close()
    if prepare == "empty file":
        await exercise(path)
        return
    with pytest.raises(StoreError) as info:
        await exercise(path)
    assert str(path) in str(info.value)
