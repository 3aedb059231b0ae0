"""What a session reads of a big store for virtual branches: nothing at start, one
branch's rows through indexes on activation, names a page at a time."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pride import Branch, ChatAndRecord, Session
from tests.helpers import echo_model


def user_branch(key: str) -> Branch:
    return Branch(chat_model=echo_model())


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQL statement the store's connections run (as SQLite expands it)."""
    seen: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = real_connect(*args, **kwargs)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield seen


async def _fill(path: Path, names: list[str]) -> None:
    async with Session(store=path) as session:
        for name in names:
            branch = await session.spawn(Branch(name=name, chat_model=echo_model()))
            await branch.chat_and_record("hello")
            await session.remove(branch)


def _plans(path: Path, queries: list[str]) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [
            " / ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + query))
            for query in queries
        ]
    finally:
        db.close()


async def test_activation_reads_through_indexes_and_start_reads_nothing(
    tmp_path: Path, statements: list[str]
) -> None:
    """EXPLAIN QUERY PLAN of every read an activation makes: index searches, no scan of
    a table; and opening the session and registering the kind read no branch."""
    path = tmp_path / "s.db"
    await _fill(path, [f"user/u{index:03d}" for index in range(50)])
    statements.clear()
    async with Session(store=path) as session:
        await session.virtual("user", user_branch)
        at_start = list(statements)
        statements.clear()
        await session.ask("user/u017", ChatAndRecord("again"))
        await session.passivate("user/u017")
        activation = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert not [s for s in at_start if "FROM branches" in s or "FROM messages" in s]
    assert any("FROM messages" in s for s in activation)
    plans = _plans(path, [s for s in activation if "sqlite_master" not in s])
    assert plans
    for query, plan in zip(activation, plans, strict=False):
        assert "SCAN" not in plan.replace("SCAN CONSTANT ROW", ""), (query, plan)


async def test_stored_names_come_a_page_at_a_time(tmp_path: Path, statements: list[str]) -> None:
    """session.stored pages one kind's names in order, never another kind's, each page
    one range search on the names' index."""
    path = tmp_path / "s.db"
    users = [f"user/u{index:03d}" for index in range(25)]
    await _fill(path, [*users, "user0/x", "use/x", "userz", "agent"])
    statements.clear()
    async with Session(store=path) as session:
        pages: list[list[str]] = []
        after = None
        while page := await session.stored("user", after=after, limit=10):
            pages.append(page)
            after = page[-1]
        assert [len(page) for page in pages] == [10, 10, 5]
        assert [name for page in pages for name in page] == users
        assert await session.stored("nobody") == []
        with pytest.raises(ValueError, match="limit"):
            await session.stored("user", limit=0)
    pages_read = [
        q for q in statements if q.lstrip().upper().startswith("SELECT NAME FROM BRANCHES")
    ]
    assert len(pages_read) == 5  # 3 pages, the empty end, "nobody"
    for plan in _plans(path, pages_read):
        assert "SEARCH branches USING" in plan and "SCAN" not in plan, plan
