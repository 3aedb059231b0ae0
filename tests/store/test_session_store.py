"""A session with a store persists its members' conversations and restores them."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
import trio

from pride import (
    AuthenticationFailed,
    Branch,
    ChatAndRecord,
    Communicate,
    Instruction,
    ScriptedModel,
    Session,
    StoreError,
    System,
)
from pride.store import BranchStore
from tests.helpers import echo_model, last_user_text


def _rows(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
    finally:
        db.close()


async def test_each_turn_is_committed_before_its_caller_is_answered(tmp_path: Path) -> None:
    """When ask returns, the turn's messages are already in the file."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await session.ask("ada", ChatAndRecord("one"))
        assert _rows(path) == 2
        await branch.chat_and_record("two")
        assert _rows(path) == 4


async def test_a_new_process_continues_the_conversation(tmp_path: Path) -> None:
    """A branch spawned with the same name in a new session resumes its history."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        first = await session.spawn(Branch(name="ada", system="be kind", chat_model=echo_model()))
        await first.chat_and_record("remember me")
        original_id = first.id
    seen: list[list[str]] = []

    def reply(request: object) -> str:
        seen.append([m["content"] for m in request.messages])  # type: ignore[attr-defined]
        return f"re: {last_user_text(request)}"  # type: ignore[arg-type]

    async with Session(store=path) as session:
        second = await session.spawn(Branch(name="ada", chat_model=ScriptedModel(reply)))
        assert second.id == original_id
        assert [m.text for m in second.messages][1:] == ["remember me", "re: remember me"]
        await second.chat_and_record("and now?")
    assert seen[0] == ["be kind", "remember me", "re: remember me", "and now?"]
    async with BranchStore(path) as store:
        assert len(await store.load_messages("ada")) == 5


async def test_unnamed_branches_are_not_persisted(tmp_path: Path) -> None:
    """Branches with generated names change every run, so they are not stored."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(chat_model=echo_model()))
        await branch.chat_and_record("x")
    async with BranchStore(path) as store:
        assert await store.branches() == []


async def test_store_write_failure_fails_the_turn(tmp_path: Path) -> None:
    """If the commit at the end of a turn fails, the caller gets StoreError."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        _sabotage(path, HIDE)
        with pytest.raises(StoreError, match="no such table"):
            await branch.chat_and_record("lost")
        _sabotage(path, REPAIR)  # so the session closes cleanly


HIDE = "ALTER TABLE messages RENAME TO hidden"
REPAIR = "ALTER TABLE hidden RENAME TO messages"


def _sabotage(path: Path, statement: str) -> None:
    """Change the store behind its writer's back, as a damaged disk or a bad actor would."""
    db = sqlite3.connect(path)
    try:
        db.execute(statement)
        db.commit()
    finally:
        db.close()


async def test_issue14_a_failed_commit_fails_exactly_its_turns_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    """While commits fail, every turn of a branch with messages to store fails with
    StoreError (none is answered ok before its messages are on disk); a branch with
    nothing to store serves on; once the fault clears, the next commit writes
    everything, the failed turns' messages too, and turns succeed again."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        carl = await session.spawn(Branch(name="carl", chat_model=echo_model()))
        await ada.chat_and_record("kept")
        _sabotage(path, HIDE)
        outcomes: dict[str, BaseException | str] = {}

        async def turn(branch: Branch, text: str, record: bool = True) -> None:
            try:
                verb = branch.chat_and_record if record else branch.chat
                outcomes[text] = await verb(text)
            except StoreError as exc:
                outcomes[text] = exc

        async with trio.open_nursery() as nursery:  # their rows share one commit
            nursery.start_soon(turn, ada, "a1")
            nursery.start_soon(turn, bob, "b1")
            nursery.start_soon(turn, carl, "only asked", False)
        assert isinstance(outcomes["a1"], StoreError)
        assert isinstance(outcomes["b1"], StoreError)
        assert outcomes["only asked"] == "re: only asked"  # carl has nothing to store
        assert ada.running and bob.running
        _sabotage(path, REPAIR)
        assert await ada.chat_and_record("a2") == "re: a2"
    async with BranchStore(path) as store:
        stored = [m.text for m in await store.load_messages("ada")]
        assert stored == ["kept", "re: kept", "a1", "re: a1", "a2", "re: a2"]
        assert [m.text for m in await store.load_messages("bob")] == ["b1", "re: b1"]


async def test_session_refuses_a_foreign_database(tmp_path: Path) -> None:
    """A session pointed at another application's database fails at start."""
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="another application"):
        async with Session(store=path):
            pass


async def _restored(path: Path, name: str) -> list[str]:
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name=name, chat_model=echo_model()))
        return [m.text for m in branch.messages]


async def test_a_cleared_conversation_is_restored_cleared(tmp_path: Path) -> None:
    """communicate(clear_messages=True) rewrites the stored conversation in the same commit."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", system="be kind", chat_model=echo_model()))
        await branch.communicate("one")
        await session.ask("ada", Communicate("two", clear_messages=True))
        live = [m.text for m in branch.messages]
        assert live == ["be kind", "two", "re: two"]
        await branch.communicate("three")
        live = [m.text for m in branch.messages]
    assert await _restored(path, "ada") == live


async def test_history_edits_outside_turns_are_stored(tmp_path: Path) -> None:
    """Clearing the history or replacing the system message directly is persisted too."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", system="be kind", chat_model=echo_model()))
        await branch.chat_and_record("one")
        branch.messages.clear()
        branch.messages.set_system(System(system_message="be brief"))
        await branch.chat_and_record("two")
        live = [m.text for m in branch.messages]
        assert live == ["be brief", "two", "re: two"]
    assert await _restored(path, "ada") == live


async def test_issue14_a_direct_act_is_committed_before_its_caller_is_answered(
    tmp_path: Path,
) -> None:
    """An Act records its tool calls; like a turn, it is answered only once they are on
    disk (a kill -9 right after the answer must not lose them)."""
    path = tmp_path / "store.db"

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model(), tools=[add]))
        await branch.act({"function": "add", "arguments": {"a": 1, "b": 2}})
        assert _rows(path) == 2


class Unprintable:
    """A tool result with no text form at all."""

    def __str__(self) -> str:
        raise RuntimeError("no text form")

    __repr__ = __str__


async def test_issue14_what_json_cannot_carry_is_stored_as_text_and_the_unstorable_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool output with a datetime, a set or NaN is stored as the model saw it (text,
    null), one nested too deeply is cut at MAX_DEPTH, each with a warning; one that
    cannot even be shown (its str() raises) never reaches the history or the store: the
    call is an error response, stored like any other, and nothing goes missing."""
    import datetime

    path = tmp_path / "store.db"

    deep: object = "bottom"
    for _ in range(150):
        deep = [deep]

    def when() -> object:
        """When."""
        return {"at": datetime.date(2026, 1, 2), "tags": {"x"}, "mean": float("nan")}

    def nested() -> object:
        """Nested too deeply for JSON pride reads back."""
        return deep

    def broken() -> object:
        """Broken."""
        return Unprintable()

    async with Session(store=path) as session:
        branch = await session.spawn(
            Branch(name="ada", chat_model=echo_model(), tools=[when, broken, nested])
        )
        await branch.act({"function": "when", "arguments": {}})
        await branch.act({"function": "nested", "arguments": {}})
        [refused] = await branch.act({"function": "broken", "arguments": {}})
        assert refused.error is not None and "cannot be shown to the model" in refused.error
        await branch.act({"function": "when", "arguments": {}})  # the branch serves on
    assert "stored with the documented replacement" in caplog.text
    async with BranchStore(path) as store:
        stored = await store.load_messages("ada")
    assert stored[1].output == {"at": "2026-01-02", "tags": "{'x'}", "mean": None}
    assert "<nested deeper than 100 levels>" in repr(stored[3].output)
    request, response = "ActionRequest", "ActionResponse"
    kinds = [type(m).__name__ for m in stored]
    assert kinds == [request, response] * 4
    assert stored[5].error == refused.error and stored[5].output is None


async def test_issue14_a_turn_cut_short_by_a_hung_subscriber_is_still_committed_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A MessageAdded subscriber that hangs makes finalisation run out of its grace
    period before the commit: the turn is still committed before its caller is answered."""
    from pride import MessageAdded
    from pride.actors import lifecycle

    monkeypatch.setattr(lifecycle, "FINALIZE_GRACE", 0.2)  # real clock: the store uses threads
    path = tmp_path / "store.db"
    async with Session(store=path) as session:

        async def hang(signal: MessageAdded) -> None:
            await trio.sleep_forever()

        session.observe(MessageAdded, handler=hang)
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        assert await branch.chat_and_record("one") == "re: one"
        assert _rows(path) == 2


async def test_issue20_a_failed_first_turn_stores_no_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's example without a key: the turn fails, and the store keeps no
    empty branch for it; the next process's first successful turn stores it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        await session.spawn(Branch(name="writer", chat_model="openai/gpt-4.1-mini"))
        await session.spawn(Branch(name="editor", system="be terse", chat_model=echo_model()))
        with pytest.raises(AuthenticationFailed, match="OPENAI_API_KEY"):
            await session.ask("writer", ChatAndRecord("Draft a haiku"))
    async with BranchStore(path) as store:
        assert await store.branches() == []  # neither the failed one nor the idle one
    async with Session(store=path) as session:
        writer = await session.spawn(Branch(name="writer", chat_model=echo_model()))
        await session.ask("writer", ChatAndRecord("Draft a haiku"))
        assert _rows(path) == 2  # committed before the answer, the branch with it
    async with BranchStore(path) as store:
        assert [b.name for b in await store.branches()] == ["writer"]
        assert (await store.load("writer") or {})["id"] == writer.id_str
        assert [m.text for m in await store.load_messages("writer")] == [
            "Draft a haiku",
            "re: Draft a haiku",
        ]


async def test_issue20_a_new_branch_is_stored_by_a_message_recorded_between_turns(
    tmp_path: Path,
) -> None:
    """A message recorded by code (no turn) stores the new branch whole, system
    message included, when the session closes at the latest."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", system="be kind", chat_model=echo_model()))
        branch.add_message(Instruction(instruction="noted"))
    async with BranchStore(path) as store:
        assert [m.text for m in await store.load_messages("ada")] == ["be kind", "noted"]


async def test_a_commit_under_way_when_the_grace_runs_out_is_waited_for_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finalisation whose grace runs out during the store's commit (another connection
    holds SQLite's write lock) passes the commit again under a second grace: the rows
    the first attempt staged are not staged twice, and the turn is answered ok once
    they are durable. The lock is let go the moment the first grace is logged as run
    out, so no timing is guessed."""
    from pride import MessageAdded
    from pride.actors import lifecycle

    monkeypatch.setattr(lifecycle, "FINALIZE_GRACE", 2.0)  # real clock: the store uses threads
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        # An async subscriber of MessageAdded takes the turn through the shielded
        # finalisation (its deliveries are waited for), where the grace applies.
        async def seen(signal: MessageAdded) -> None:
            await trio.lowlevel.checkpoint()

        session.observe(MessageAdded, handler=seen)
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        assert await branch.chat_and_record("one") == "re: one"
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

        let_go: list[str] = []

        class LetGo(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if "did not finalise within" in record.getMessage() and holder.in_transaction:
                    holder.execute("ROLLBACK")
                    let_go.append(record.getMessage())

        handler = LetGo()
        logging.getLogger("pride.actor").addHandler(handler)
        try:
            assert await branch.chat_and_record("two") == "re: two"
        finally:
            logging.getLogger("pride.actor").removeHandler(handler)
            holder.close()
        assert len(let_go) == 1  # the first grace ran out with the commit waiting
        assert _rows(path) == 4  # the second turn's two messages, once each


async def test_a_stored_member_cannot_be_renamed_into_another_conversation(
    tmp_path: Path,
) -> None:
    """The store keeps a member's conversation under its name. Renamed while a member,
    its turns went on being queued under the new name while its commit waited on the
    old one: renamed to the name of a branch stored earlier in the process, its turns
    were appended to that other conversation (restored with it on the next run) and
    answered before they were committed; renamed to a name the store never held,
    every turn failed with "not registered". Renaming a stored member is refused with
    ValueError saying why, and the branch serves on under its name."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        bob = await session.spawn(Branch(name="bob", system="I am bob", chat_model=echo_model()))
        await bob.chat_and_record("bob's secret")
        await session.remove(bob)
        ada = await session.spawn(Branch(name="ada", system="I am ada", chat_model=echo_model()))
        await ada.chat_and_record("one")
        for name in ("bob", "eve"):
            with pytest.raises(ValueError, match=r"'ada'.*stored under its name"):
                ada.name = name
            assert ada.name == "ada" and session.get_branch("ada") is ada
        assert await ada.chat_and_record("two") == "re: two"
        assert _rows(path) == 3 + 5  # bob's three, ada's system and two turns
        await session.remove(ada)
        ada.name = "eve"  # no longer a member: nothing to refuse
    async with BranchStore(path, read_only=True) as store:
        assert [m.text for m in await store.load_messages("bob")] == [
            "I am bob",
            "bob's secret",
            "re: bob's secret",
        ]
        assert len(await store.load_messages("ada")) == 5


async def test_a_member_spawned_again_while_its_rows_wait_keeps_them(tmp_path: Path) -> None:
    """A message recorded between turns waits in the queue for the next commit. A
    member removed with such rows queued, and spawned again, was restored from what
    was committed and numbered from there: its queued message was missing from the
    conversation it came back with, and its next turn's rows took the queued rows'
    numbers, overwriting them in the file. Restoring commits what the branch has
    queued first, so the message is kept, in memory and in the store."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", system="I am ada", chat_model=echo_model()))
        await ada.chat_and_record("one")
        ada.add_message(Instruction(instruction="noted between turns"))
        await session.remove(ada)
        again = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        expected = ["I am ada", "one", "re: one", "noted between turns"]
        assert [m.text for m in again.messages] == expected
        await again.chat_and_record("two")
    async with BranchStore(path, read_only=True) as store:
        assert [m.text for m in await store.load_messages("ada")] == [*expected, "two", "re: two"]


async def test_two_sessions_on_one_store_never_share_a_stored_conversation(
    tmp_path: Path,
) -> None:
    """A BranchStore given to two sessions (a child session's, say) persists the
    members of both. Each session's names are its own, so both could have a member
    called "ada", and both appended to the one stored conversation of that name: the
    file held the two histories interleaved, neither branch's. The second is refused
    with StoreError naming the holder; once the first lets go of the name (removed,
    or its session ended), another session may take it."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        async with Session(name="one", store=store) as one, Session(name="two", store=store) as two:
            first = await one.spawn(Branch(name="ada", chat_model=echo_model()))
            await first.chat_and_record("from one")
            with pytest.raises(StoreError, match=r"'ada'.*session 'one'"):
                await two.spawn(Branch(name="ada", chat_model=echo_model()))
            assert await two.spawn(Branch(name="bob", chat_model=echo_model()))
            await first.chat_and_record("one again")
            await one.remove(first)
            second = await two.spawn(Branch(name="ada", chat_model=echo_model()))
            await second.chat_and_record("from two")
        async with Session(name="three", store=store) as three:
            await three.spawn(Branch(name="bob", chat_model=echo_model()))
        assert [m.text for m in await store.load_messages("ada")] == [
            "from one",
            "re: from one",
            "one again",
            "re: one again",
            "from two",
            "re: from two",
        ]
