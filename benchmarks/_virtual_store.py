"""A branch store of many ``user/<n>`` conversations, for ``bench_virtual``.

Building a million conversations through pride (a million turns) would take
hours, so the rows are written straight into a store pride created: one
conversation is recorded by pride (ten messages: five ``ChatAndRecord``
turns), read back, and its rows are copied under every name with fresh
branch and message ids. What a session then reads is exactly what pride
writes. Also a probe run in a fresh process (resident memory is only
meaningful in a process that did nothing else):
``python -m benchmarks._virtual_store probe STORE ACTIVE``.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

import trio

from benchmarks._rss import rss_bytes
from pride import Branch, RoledMessage, ScriptedModel, Session
from pride.messages import from_json, to_json

MESSAGES = 10
TEMPLATE = "template/0"


def name_of(index: int) -> str:
    return f"user/{index:07d}"


def model() -> ScriptedModel:
    return ScriptedModel(lambda request: "noted, thank you", keep_calls=0)


def factory(key: str) -> Branch:
    return Branch(chat_model=model())


async def _template(path: Path) -> None:
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name=TEMPLATE, chat_model=model()))
        for turn in range(MESSAGES // 2):
            await branch.chat_and_record(f"question {turn} about my order")


def build(path: Path, count: int) -> float:
    """Write ``count`` conversations of ten messages into a new store at ``path``;
    returns the seconds it took."""
    started = time.perf_counter()
    trio.run(_template, path)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=OFF")
        (branch_id, header) = db.execute(
            "SELECT branch_id, projection FROM branches WHERE name=?", (TEMPLATE,)
        ).fetchone()
        rows = db.execute(
            "SELECT seq, message_id, data FROM messages WHERE branch_name=? ORDER BY seq",
            (TEMPLATE,),
        ).fetchall()
        db.execute("BEGIN")
        db.execute("DELETE FROM messages WHERE branch_name=?", (TEMPLATE,))
        db.execute("DELETE FROM branches WHERE name=?", (TEMPLATE,))
        chunk = 10_000
        for start in range(0, count, chunk):
            branches = []
            messages = []
            for index in range(start, min(count, start + chunk)):
                name = name_of(index)
                new_id = f"{index:08x}-0000-4000-8000-000000000000"
                branches.append(
                    (name, new_id, header.replace(branch_id, new_id).replace(TEMPLATE, name), 0.0)
                )
                for seq, message_id, data in rows:
                    fresh = f"{index:08x}-{seq:04x}-4000-8000-000000000001"
                    messages.append((name, seq, fresh, data.replace(message_id, fresh)))
            db.executemany("INSERT INTO branches VALUES (?,?,?,?)", branches)
            db.executemany(
                "INSERT INTO messages(branch_name, seq, message_id, data) VALUES (?,?,?,?)",
                messages,
            )
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return time.perf_counter() - started


async def _probe(path: Path, active: int) -> None:
    """Print the RSS of a session over the store with ``active`` conversations live,
    then that of as many plain live branches with the same history (no store)."""
    before = rss_bytes()
    async with Session(store=path) as session:
        await session.virtual("user", factory, passivate_after=3600.0)
        for index in range(active):
            await session.activate(name_of(index))
        with_store = rss_bytes() - before
    print(with_store)


async def _plain(active: int) -> None:
    async with Session() as session:
        template = await session.spawn(Branch(name="t", chat_model=model()))
        for turn in range(MESSAGES // 2):
            await template.chat_and_record(f"question {turn} about my order")
        conversation = list(template.messages)
        await session.remove(template)
        del template
        before = rss_bytes()
        for index in range(active):  # each its own messages, strings too, as if restored
            history = [from_json(to_json(m), RoledMessage) for m in conversation]
            await session.spawn(Branch(name=name_of(index), chat_model=model(), messages=history))
        print(rss_bytes() - before)


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        trio.run(_probe, Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1] == "plain":
        trio.run(_plain, int(sys.argv[2]))
    else:
        raise SystemExit(f"unknown probe {sys.argv[1]!r}")
