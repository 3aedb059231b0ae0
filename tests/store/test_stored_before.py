"""A store written before the store's rows went through the codec (issue 32) reads
the same, and today's rows read as the rows written then.

The fixture (``data/store_before_issue32.json``, made by ``stored_before.py`` on
17fd5c9) holds the old store file as SQL and what the reader made of it then.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from pride import Instruction
from pride.messages import unstructure
from pride.messages.codec import parse_json
from pride.store import BranchStore

from .stored_before import BRANCH, BRANCH_ID, FIXTURE, PROJECTION, conversation

_FIXTURE: dict[str, Any] = json.loads(FIXTURE.read_text())

#: Fields added to a message class since the fixture was made, with what a row
#: written before them reads as (Reasoning.origin: unknown, so sent to no endpoint).
_ADDED: dict[str, dict[str, Any]] = {"Reasoning": {"origin": None}}


def _today(data: Any) -> Any:
    """A message's plain data as the fixture holds it, with the fields added since."""
    if isinstance(data, dict) and data.get("type") in _ADDED:
        return {**data, **_ADDED[data["type"]]}
    return data


_MESSAGES = [_today(message) for message in _FIXTURE["messages"]]
# What a store written today loads: its rows hold the added fields.
_LOAD = {
    **_FIXTURE["load"],
    "messages": {
        **_FIXTURE["load"]["messages"],
        "collections": [_today(m) for m in _FIXTURE["load"]["messages"]["collections"]],
    },
}


def _old_store(path: Path) -> Path:
    db = sqlite3.connect(path)
    try:
        db.executescript("\n".join(_FIXTURE["sql"]))
    finally:
        db.close()
    return path


def _rows(path: Path) -> list[tuple[str, Any]]:
    db = sqlite3.connect(path)
    try:
        return [
            (message_id, parse_json(data))
            for message_id, data in db.execute(
                "SELECT message_id, data FROM messages WHERE branch_name = ? ORDER BY seq",
                (BRANCH,),
            )
        ]
    finally:
        db.close()


async def test_a_store_written_before_issue32_opens_and_reads_the_same(tmp_path: Path) -> None:
    """Every message kind, the documented replacements included, and the projection."""
    path = _old_store(tmp_path / "old.db")
    async with BranchStore(path) as store:
        assert await store.load(BRANCH) == _FIXTURE["load"]
        messages = await store.load_messages(BRANCH)
        assert [unstructure(message) for message in messages] == _MESSAGES
        branch_id, restored, turns = await store.restore(BRANCH)
        assert (branch_id, restored, turns) == (BRANCH_ID, messages, [])
        # and it takes new rows after the old ones (a new message: ids are distinct)
        store.append(BRANCH, Instruction(instruction="new"))
        await store.flush()
        assert len(await store.load_messages(BRANCH)) == len(messages) + 1


async def test_the_rows_written_today_read_as_the_rows_written_before(tmp_path: Path) -> None:
    """The same conversation, stored today the way it was then (a save, then appends):
    row by row the same data (key order and number forms apart), and the same reading."""
    path = tmp_path / "new.db"
    async with BranchStore(path) as store:
        await store.save_branch(BRANCH, BRANCH_ID, PROJECTION, conversation()[:3])
        store.append_all(BRANCH, conversation()[3:])
        await store.flush()
        loaded = await store.load(BRANCH)
        messages = await store.load_messages(BRANCH)
    old = [
        (message_id, _today(data)) for message_id, data in _rows(_old_store(tmp_path / "old.db"))
    ]
    assert _rows(path) == old
    assert loaded == _LOAD
    assert [unstructure(message) for message in messages] == _MESSAGES
