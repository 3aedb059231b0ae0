"""Direct use of a BranchStore: a save or a delete while rows of the same branch are queued.

`save_branch` and `delete` are awaited: while one is on its way to the disk the
event loop runs on, and whatever a branch queues meanwhile (`append`) must land
in the order the calls were made, never under a number the save just reused.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from pride import AssistantResponse, Instruction, StoreError
from pride.store import BranchStore


def _stored_rows(path: Path, name: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(
            "SELECT seq, message_id FROM messages WHERE branch_name=? ORDER BY seq", (name,)
        ).fetchall()
    finally:
        db.close()


async def test_a_message_appended_during_a_save_follows_the_saved_conversation(
    tmp_path: Path,
) -> None:
    """A message appended while `save_branch` was writing took the number the stored
    conversation had next before the save (1 here), and was committed after the save
    under it: it replaced the saved conversation's second message (lost), and the
    next message appended took the number after the save (3), landing after it.
    Now the save is committed in order with what is queued around it: the file holds
    the saved conversation, then the messages appended after, in order."""
    path = tmp_path / "store.db"
    first = Instruction(instruction="first")
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [first])
        saved = [Instruction(instruction="a"), AssistantResponse(assistant_response="b")]
        saved.append(Instruction(instruction="c"))
        during, after = Instruction(instruction="during"), Instruction(instruction="after")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.save_branch, "ada", "id-1", {}, saved)
            await trio.testing.wait_all_tasks_blocked()  # the save is under way
            store.append("ada", during)
        store.append("ada", after)
        await store.flush()
        assert await store.load_messages("ada") == [*saved, during, after]
    assert [row[0] for row in _stored_rows(path, "ada")] == [0, 1, 2, 3, 4]


async def test_a_message_appended_during_a_delete_is_refused_not_orphaned(
    tmp_path: Path,
) -> None:
    """A message appended while `delete` was writing was committed after the delete:
    a message row of a branch the store no longer had (listed nowhere, read by no
    load), and `register` of the name numbered its next messages after it. Now the
    branch is gone from the moment `delete` is called: an append after it is a
    StoreError saying the branch is not registered, and nothing of it is left."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {}, [Instruction(instruction="one")])
        store.append("ada", Instruction(instruction="queued before"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.delete, "ada")
            await trio.testing.wait_all_tasks_blocked()  # the delete is under way
            with pytest.raises(StoreError, match="'ada' is not registered"):
                store.append("ada", Instruction(instruction="during"))
        await store.flush()
        assert await store.load("ada") is None
        assert await store.branches() == []
    assert _stored_rows(path, "ada") == []
