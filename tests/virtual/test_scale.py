"""Virtual branches at scale: memory stays bounded, mailbox order holds, the store
is read through its indexes."""

from __future__ import annotations

import gc
import sqlite3
import tracemalloc
from pathlib import Path

from pride import Branch, BranchActivated, BranchPassivated, ChatAndRecord, Session
from tests.helpers import echo_model


def user_branch(key: str) -> Branch:
    return Branch(chat_model=echo_model())


async def test_a_passivated_conversation_holds_at_most_a_kibibyte(tmp_path: Path) -> None:
    """tracemalloc: 100 conversations activated, used and passivated leave < 1 KiB each,
    and cycling one name 200 more times leaves no growth (python -m benchmarks virtual
    runs 100,000 cycles)."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", user_branch)
        # Warm every path once (imports, caches sized on first use, the store's statements).
        for key in range(20):
            await session.ask(f"user/warm{key}", ChatAndRecord("x"))
            await session.passivate(f"user/warm{key}")
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            count = 100
            for key in range(count):
                await session.ask(f"user/u{key}", ChatAndRecord("hello"))
                await session.passivate(f"user/u{key}")
            gc.collect()
            after = tracemalloc.take_snapshot()
            grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
            assert grown / count <= 1024, after.compare_to(before, "lineno")[:10]
            for _ in range(100):
                await session.ask("user/again", ChatAndRecord("hi"))
                await session.passivate("user/again")
            gc.collect()
            middle = tracemalloc.take_snapshot()
            for _ in range(100):
                await session.ask("user/again", ChatAndRecord("hi"))
                await session.passivate("user/again")
            gc.collect()
            final = tracemalloc.take_snapshot()
            cycled = sum(stat.size_diff for stat in final.compare_to(middle, "filename"))
            assert cycled <= 64 * 1024, final.compare_to(middle, "lineno")[:10]
        finally:
            tracemalloc.stop()
        assert session.statistics().virtual_active == 0


async def test_max_active_under_ten_thousand_names_keeps_each_mailbox_order(
    tmp_path: Path,
) -> None:
    """10,000 names, two messages each sent at once, max_active=64: every name's
    messages are served in the order they were sent, and memory stays bounded."""
    path = tmp_path / "s.db"
    names = [f"user/{index:05d}" for index in range(10_000)]
    live = peak = 0

    def count(signal: BranchActivated | BranchPassivated) -> None:
        nonlocal live, peak
        live += 1 if isinstance(signal, BranchActivated) else -1
        peak = max(peak, live)

    async with Session(store=path) as session:
        session.observe(BranchActivated, BranchPassivated, handler=count)
        await session.virtual("user", user_branch, max_active=64)
        replies = []
        for name in names:
            for text in ("a", "b"):
                replies.append(await session.send(name, ChatAndRecord(text)))
        for reply in replies:
            await reply.result()
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT branch_name, group_concat(json_extract(data, '$.instruction'), '') "
            "FROM (SELECT * FROM messages ORDER BY branch_name, seq) "
            "WHERE json_extract(data, '$.type') = 'Instruction' GROUP BY branch_name"
        ).fetchall()
    finally:
        db.close()
    assert len(rows) == len(names)
    assert {text for _, text in rows} == {"ab"}
    assert 0 < peak <= 64
