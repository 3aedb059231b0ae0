"""Rows of a store edited by hand: what pride reads back decides what it writes next,
so a value that would make it write the wrong thing is refused where it is read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pride import Branch, Session, StoreError
from pride.store import BranchStore
from tests.helpers import echo_model


async def _stored(path: Path) -> None:
    """A store holding ``ada`` (a system message and one turn) and ``bob`` (one turn)."""
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", system="be kind", chat_model=echo_model()))
        await ada.chat_and_record("one")
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        await bob.chat_and_record("hello")


def _renumber(path: Path, name: str, first: int) -> tuple[object, ...]:
    """Give the message rows of ``name`` the numbers ``first``, ``first + 1``, ...
    (in their order); return what the file holds of the branch, to compare with later."""
    db = sqlite3.connect(path)
    try:
        seqs = [
            row[0]
            for row in db.execute(
                "SELECT seq FROM messages WHERE branch_name=? ORDER BY seq", (name,)
            )
        ]
        for seq in seqs:  # out of the way first: the new numbers may overlap the old
            db.execute(
                "UPDATE messages SET seq=? WHERE branch_name=? AND seq=?",
                (-(10**6) - seq, name, seq),
            )
        for offset, seq in enumerate(seqs):
            db.execute(
                "UPDATE messages SET seq=? WHERE branch_name=? AND seq=?",
                (first + offset, name, -(10**6) - seq),
            )
        db.commit()
        return _held(db, name)
    finally:
        db.close()


def _held(db: sqlite3.Connection, name: str) -> tuple[object, ...]:
    return (
        db.execute("SELECT branch_id, projection FROM branches WHERE name=?", (name,)).fetchall(),
        db.execute(
            "SELECT seq, message_id, data FROM messages WHERE branch_name=? ORDER BY seq", (name,)
        ).fetchall(),
    )


@pytest.mark.parametrize(
    "first",
    [-5, -12, 2**63 - 3],
    ids=["next are -2 and -1", "reaching -2 and -1 later", "up to SQLite's largest integer"],
)
async def test_message_numbers_out_of_range_are_refused_where_they_are_read(
    tmp_path: Path, first: int
) -> None:
    """A branch's next message number is the largest stored one plus one. Numbered
    below zero by hand, its next messages took -2 and -1, which a commit reads as
    "store this projection" (the message's JSON became the branch's projection,
    its id the branch's id) and "delete the conversation"; numbered near SQLite's
    largest integer, the next number could not be written, and since one commit
    carries every branch's rows, every commit of the store failed for every branch.
    Now restoring (or registering) such a branch is a StoreError naming it and the
    row; the file is left as it was, and the other branches serve and commit."""
    path = tmp_path / "store.db"
    await _stored(path)
    before = _renumber(path, "ada", first)
    async with Session(store=path) as session:
        with pytest.raises(
            StoreError, match=r"message row -?\d+ of branch 'ada' has a number"
        ) as info:
            await session.spawn(Branch(name="ada", chat_model=echo_model()))
        assert str(path) in str(info.value)
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        assert await bob.chat_and_record("again") == "re: again"
    async with BranchStore(path) as store:
        with pytest.raises(StoreError, match=r"message row -?\d+ of branch 'ada' has a number"):
            await store.register("ada")
        assert len(await store.load_messages("bob")) == 4
    db = sqlite3.connect(path)
    try:
        assert _held(db, "ada") == before
    finally:
        db.close()


def _duplicate_row(path: Path, name: str, seq: int) -> tuple[object, ...]:
    """Append a copy of message row ``seq`` of ``name`` (its id and data) at the end of
    its conversation; return what the file holds of the branch."""
    db = sqlite3.connect(path)
    try:
        db.execute(
            "INSERT INTO messages(branch_name, seq, message_id, data) "
            "SELECT branch_name, (SELECT MAX(seq) + 1 FROM messages WHERE branch_name=?), "
            "message_id, data FROM messages WHERE branch_name=? AND seq=?",
            (name, name, seq),
        )
        db.commit()
        return _held(db, name)
    finally:
        db.close()


async def test_two_stored_messages_with_one_id_are_refused_where_they_are_read(
    tmp_path: Path,
) -> None:
    """A conversation is a sequence of distinct messages: ``Branch.from_dict`` refuses
    two with one id, and a tool result names its call by id. Restoring took them
    both: the branch served on with the message twice in its history (sent to the
    model twice), and its own projection no longer loaded (``from_dict`` of its
    ``to_dict``, of `load`, raised `InvalidMessage`), far from the damaged file.
    Now restoring, `load` and `load_messages` raise a StoreError naming the branch
    and both rows; the file is left as it was, and the other branches serve."""
    path = tmp_path / "store.db"
    await _stored(path)
    before = _duplicate_row(path, "ada", 1)
    refused = r"message rows 1 and 3 of branch 'ada' hold one message id"
    async with Session(store=path) as session:
        with pytest.raises(StoreError, match=refused) as info:
            await session.spawn(Branch(name="ada", chat_model=echo_model()))
        assert str(path) in str(info.value)
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        assert await bob.chat_and_record("again") == "re: again"
    async with BranchStore(path, read_only=True) as store:
        with pytest.raises(StoreError, match=refused):
            await store.load("ada")
        with pytest.raises(StoreError, match=refused):
            await store.load_messages("ada")
        assert len(await store.load_messages("bob")) == 4
    db = sqlite3.connect(path)
    try:
        assert _held(db, "ada") == before
    finally:
        db.close()
