"""A turn of a branch with a store is answered by the commit that makes it durable,
while its actor serves its next item (issue 19, pride.durable.commit).

The commits are held up by a second SQLite connection holding the write lock
(what a slow disk or a reader's checkpoint does): the store's write waits in its
worker thread until the test lets go.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import trio
import trio.testing

from pride import (
    Act,
    ActionCall,
    Branch,
    ChatAndRecord,
    Instruction,
    Reply,
    RunEnd,
    RunStart,
    Session,
    StoreError,
    send,
)
from pride.store import BranchStore
from tests.helpers import echo_model, holding_write_lock


def _stored_rows(path: Path, branch: str) -> int:
    db = sqlite3.connect(path)
    try:
        query = "SELECT COUNT(*) FROM messages WHERE branch_name=?"
        return int(db.execute(query, (branch,)).fetchone()[0])
    finally:
        db.close()


async def _texts(path: Path, branch: str) -> list[str]:
    async with BranchStore(path) as store:
        return [message.text for message in await store.load_messages(branch)]


async def test_issue19_a_turn_is_answered_by_its_commit_while_its_actor_serves_on(
    tmp_path: Path,
) -> None:
    """While the first turn's commit waits on the disk, the actor runs the second turn;
    neither caller is answered before its commit; a caller giving up meanwhile
    cancels nothing of what the actor does next; both are on disk once answered."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("kept")  # stored: the branch exists
        with holding_write_lock(path):
            first = await send(ada, ChatAndRecord("one"))
            await trio.testing.wait_all_tasks_blocked()  # its commit waits in the thread
            first.cancel()  # too late to cancel the turn: it is done, only not durable
            second = await send(ada, ChatAndRecord("two"))
            await trio.testing.wait_all_tasks_blocked()
            assert [m.text for m in ada.messages][-4:] == ["one", "re: one", "two", "re: two"]
            assert not first.done and not second.done  # nothing answered before its commit
            assert _stored_rows(path, "ada") == 2
        assert await second.result() == "re: two"  # not cancelled by the first's caller
        assert await first.result() == "re: one"
        assert _stored_rows(path, "ada") == 6
    assert await _texts(path, "ada") == ["kept", "re: kept", "one", "re: one", "two", "re: two"]


async def test_issue19_a_failed_commit_fails_its_turns_and_the_turns_built_on_them(
    tmp_path: Path,
) -> None:
    """A commit that fails fails the turn whose rows it held and the later turn of the
    same branch that ran meanwhile (its history holds the unwritten turn); another
    branch with nothing to store is served throughout; once the fault clears, the
    next commit writes every turn, and the next turn succeeds."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        await ada.chat_and_record("kept")
        with holding_write_lock(path) as db:
            first = await send(ada, ChatAndRecord("one"))
            await trio.testing.wait_all_tasks_blocked()
            second = await send(ada, ChatAndRecord("two"))
            await trio.testing.wait_all_tasks_blocked()
            assert await bob.chat("only asked") == "re: only asked"
            db.execute("ALTER TABLE messages RENAME TO hidden")  # the held write will fail
            db.execute("COMMIT")
        outcomes: list[Any] = []
        for reply in (first, second):
            try:
                outcomes.append(await reply.result())
            except StoreError as exc:
                outcomes.append(exc)
        assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes
        assert ada.running and bob.running
        repair = sqlite3.connect(path)
        repair.execute("ALTER TABLE hidden RENAME TO messages")
        repair.commit()
        repair.close()
        assert await ada.chat_and_record("three") == "re: three"
    stored = await _texts(path, "ada")
    assert stored == ["kept", "re: kept", "one", "re: one", "two", "re: two", "three", "re: three"]


async def test_issue19_a_watched_branch_keeps_its_signal_order_and_ends_turns_after_commit(
    tmp_path: Path,
) -> None:
    """With a subscriber on the terminals, each RunEnd comes once the turn is on disk
    and before the next turn's RunStart, even with turns queued back to back."""
    path = tmp_path / "store.db"
    seen: list[tuple[str, int]] = []
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("kept")

        def watch(signal: Any) -> None:
            seen.append((type(signal).__name__, _stored_rows(path, "ada")))

        session.observe(RunStart, RunEnd, handler=watch)
        replies = [await send(ada, ChatAndRecord(f"q{index}")) for index in range(3)]
        for reply in replies:
            await reply.result()
    assert seen == [
        ("RunStart", 2),
        ("RunEnd", 4),
        ("RunStart", 4),
        ("RunEnd", 6),
        ("RunStart", 6),
        ("RunEnd", 8),
    ]


async def test_issue19_an_async_terminal_subscriber_runs_before_the_caller_is_answered(
    tmp_path: Path,
) -> None:
    """A turn handed to its commit still waits for the async subscribers of its
    terminal before its caller is answered."""
    path = tmp_path / "store.db"
    called, gate = trio.Event(), trio.Event()
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))

        async def slow(signal: RunEnd) -> None:
            called.set()
            await gate.wait()

        session.observe(RunEnd, handler=slow)
        reply: Reply = await send(ada, ChatAndRecord("one"))
        await called.wait()
        assert _stored_rows(path, "ada") == 2  # committed, the terminal dispatched...
        await trio.testing.wait_all_tasks_blocked()
        assert not reply.done  # ...and its subscriber still running
        gate.set()
        assert await reply.result() == "re: one"


async def test_issue19_an_act_with_nothing_to_record_is_answered_without_a_commit(
    tmp_path: Path,
) -> None:
    """An Act with no calls records nothing: no commit, answered at once (its cost is the
    cluster host's per-message cost); one with a call is answered after its commit."""

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model(), tools=[add]))
        await ada.chat_and_record("kept")
        store = session.store
        assert store is not None
        commits = store.commits
        for _ in range(3):
            assert await session.ask(ada, Act(())) == []
        assert store.commits == commits
        await session.ask(ada, Act((ActionCall("add", {"a": 1, "b": 2}),)))
        assert store.commits == commits + 1
        assert _stored_rows(path, "ada") == 4


async def test_issue19_a_cancelled_flush_leaves_its_commit_to_finish(tmp_path: Path) -> None:
    """No task carries a commit: a flush cancelled while its commit waits on the disk
    only stops waiting; the commit goes on, and the next flush shares it."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {"name": "ada"}, [])
        saved = store.commits
        store.append("ada", Instruction(instruction="one"))
        with holding_write_lock(path):
            with trio.CancelScope() as scope:
                scope.cancel()
                await store.flush("ada")  # the commit starts, the wait is cancelled
            await trio.testing.wait_all_tasks_blocked()
            assert _stored_rows(path, "ada") == 0
        await store.flush("ada")  # waits for the commit under way: nothing is lost
        assert _stored_rows(path, "ada") == 1
        assert store.commits == saved + 1


async def test_issue19_a_large_batch_is_written_whole_and_in_order(tmp_path: Path) -> None:
    """A batch bigger than one INSERT statement takes (rows go in multi-row INSERTs of
    a bounded size) is written whole, in order, in one commit."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id-1", {"name": "ada"}, [])
        saved = store.commits
        for index in range(601):
            store.append("ada", Instruction(instruction=f"m{index}"))
        await store.flush()
        assert store.commits == saved + 1
        texts = [message.text for message in await store.load_messages("ada")]
    assert texts == [f"m{index}" for index in range(601)]
