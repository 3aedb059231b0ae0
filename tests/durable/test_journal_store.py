"""The turn journal in the store file: one writer path, group commit, cheap when turns
end quickly, an upgrade from version 1, and damaged rows that never crash a restore."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

import pride
from pride import ApprovalRequired, Approve, Branch, Operate, Session, StoreError, TurnAbandoned
from pride.durable.records import StepRecord
from pride.llm import ModelResponse, ToolCall
from pride.messages import to_json
from pride.store import BranchStore, sqlite as store_module
from pride.store._file import SCHEMA_VERSION
from tests.durable.test_approvals import EMAIL, LOOKUP, Mailer
from tests.helpers import echo_model


def _count(path: Path, table: str) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


async def test_a_turn_that_ends_in_the_commit_it_began_in_writes_no_journal_row(
    tmp_path: Path,
) -> None:
    """A one-step turn's journal rows never reach the file: begun and ended in one
    batch, they are dropped from the queue (and their JSON is never made)."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "ada", {}, [])
        saved = store.commits
        made: list[str] = []

        def command() -> str:
            made.append("command")
            return "{}"

        store.journal_begin("ada", "t1", command)
        store.journal_step("ada", "t1", 0, lambda: made.append("step") or "{}")  # type: ignore[func-returns-value]
        store.journal_end("ada", "t1")
        await store.flush("ada")  # nothing of ada's is queued: no commit at all
        assert store.commits == saved and made == []
    assert _count(path, "turns") == _count(path, "steps") == 0


async def test_a_turn_committed_mid_way_is_deleted_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "ada", {}, [])
        store.journal_begin("ada", "t1", '{"type": "Chat"}', tag='"r1"')
        store.journal_step("ada", "t1", 0, '{"kind": "model"}')
        await store.flush("ada")
        [turn] = await store.unfinished_turns("ada")
        assert (turn.turn_id, turn.status, turn.tag) == ("t1", "running", '"r1"')
        assert turn.steps == ((0, '{"kind": "model"}'),)
        store.journal_step("ada", "t1", 1, "{}")
        store.journal_status("ada", "t1", "suspended", detail="waits")
        await store.flush()
        [turn] = await store.unfinished_turns()
        assert turn.status == "suspended" and len(turn.steps) == 2
        store.journal_end("ada", "t1")
        await store.flush("ada")
        assert await store.unfinished_turns() == []
    assert _count(path, "steps") == 0


async def test_journal_rows_of_every_branch_share_one_commit(tmp_path: Path) -> None:
    async with BranchStore(tmp_path / "store.db") as store:
        for name in "abc":
            await store.save_branch(name, name, {}, [])
        saved = store.commits
        for name in "abc":
            store.journal_begin(name, f"turn-{name}", "{}")
        async with trio.open_nursery() as nursery:
            for name in "abc":
                nursery.start_soon(store.flush, name)
        assert store.commits == saved + 1
        assert {t.branch_name for t in await store.unfinished_turns()} == set("abc")


async def test_a_failed_commit_keeps_journal_rows_queued_in_order(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", "ada", {}, [])
        db = sqlite3.connect(path)
        db.execute("ALTER TABLE steps RENAME TO hidden")
        db.commit()
        store.journal_begin("ada", "t1", "{}")
        store.journal_step("ada", "t1", 0, "{}")
        with pytest.raises(pride.StoreError, match="steps"):
            await store.flush("ada")
        db.execute("ALTER TABLE hidden RENAME TO steps")
        db.commit()
        db.close()
        store.journal_step("ada", "t1", 1, "{}")
        await store.flush("ada")
        [turn] = await store.unfinished_turns()
        assert [step for step, _ in turn.steps] == [0, 1]


async def test_deleting_a_branch_forgets_its_turns(tmp_path: Path) -> None:
    async with BranchStore(tmp_path / "store.db") as store:
        await store.save_branch("ada", "ada", {}, [])
        store.journal_begin("ada", "t1", "{}")
        await store.flush()
        await store.delete("ada")
        assert await store.unfinished_turns() == []


def _version_1_store(path: Path) -> None:
    """A store as pride wrote them before the journal (schema version 1)."""
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE pride_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE branches (name TEXT PRIMARY KEY, branch_id TEXT NOT NULL, "
        "projection TEXT NOT NULL, updated_at REAL NOT NULL);"
        "CREATE TABLE messages (branch_name TEXT NOT NULL, seq INTEGER NOT NULL, "
        "message_id TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (branch_name, seq));"
        "INSERT INTO pride_meta VALUES ('application', 'pride-branch-store'), ('schema', '1');"
        "PRAGMA application_id=1886546276; PRAGMA user_version=1;"
    )
    db.commit()
    db.close()


async def test_a_version_1_store_reads_as_one_without_a_journal(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_1_store(path)
    async with BranchStore(path, read_only=True) as store:
        assert await store.unfinished_turns() == []
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # a reader changes nothing
    db.close()


async def test_a_writer_upgrades_a_version_1_store_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_1_store(path)
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await branch.chat_and_record("hi")
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        meta = dict(db.execute("SELECT key, value FROM pride_meta").fetchall())
        assert meta["schema"] == str(SCHEMA_VERSION)
    finally:
        db.close()
    async with BranchStore(path, read_only=True) as store:
        assert [m.text for m in await store.load_messages("ada")] == ["hi", "re: hi"]


# ------------------------------------------------------- journal rows read back


async def _journal_turn(path: Path, command: str, steps: list[str], status: str = "running") -> str:
    """Write an unfinished turn of branch "mailer" as a crashed process would leave it."""
    turn_id = str(pride.messages._ids.new_id())
    async with BranchStore(path) as store:
        await store.save(Mailer().branch())
        store.journal_begin("mailer", turn_id, command, tag='"r7"')
        for index, data in enumerate(steps):
            store.journal_step("mailer", turn_id, index, data)
        if status != "running":
            store.journal_status("mailer", turn_id, status)
        await store.flush()
    return turn_id


def _planned(*calls: ToolCall) -> str:
    return StepRecord("model", ModelResponse("", calls)).to_text()


def _pending(function: str, arguments: dict[str, Any], call_id: str) -> str:
    step = StepRecord(
        "tool", state="pending", function=function, arguments=arguments, call_id=call_id
    )
    return step.to_text()


# Issue 36: two calls waiting under one id; a decision could not say which one it means.
_ONE_ID_TWICE = [
    _planned(
        ToolCall("send_email", {"to": "bob"}, id="dup"),
        ToolCall("wire_money", {"amount": 9}, id="dup"),
    ),
    _pending("send_email", {"to": "bob"}, "dup"),
    _pending("wire_money", {"amount": 9}, "dup"),
]


@pytest.mark.parametrize(
    ("command", "steps", "problem"),
    [
        ("{not json", [], "does not read back"),
        ('{"type": "Shout"}', [], "unknown type tag"),
        ('{"type": "Chat", "chat_model": {"base_url": "http://evil"}}', [], "configuration"),
        ("null", [], "could not be journaled"),
        (to_json(Operate("x", actions=True)), ['{"kind": "model"}'], "step 0"),
        (to_json(Operate("x", actions=True)), ['{"kind": "tool", "state": "lost"}'], "step 0"),
        (to_json(Operate("x", actions=True)), ["[1, 2]"], "step 0"),
        (to_json(Operate("x", actions=True)), _ONE_ID_TWICE, "under the id 'dup'"),
    ],
)
async def test_a_damaged_journal_entry_is_abandoned_never_run(
    tmp_path: Path, command: str, steps: list[str], problem: str
) -> None:
    """Rows a process did not just write are hostile: one that does not read back
    abandons its turn with the reason (answered to the on_resume handler), the
    branch is restored and serves on."""
    path = tmp_path / "store.db"
    turn_id = await _journal_turn(path, command, steps)
    mailer = Mailer("hello")
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = await session.spawn(mailer.branch())
        [reply] = resumed
        assert reply.tag == "r7"
        with pytest.raises(TurnAbandoned, match=problem) as info:
            await reply.result()
        assert str(info.value.turn_id) == turn_id
        assert mailer.ran == [] and mailer.requests == []
        assert await branch.chat_and_record("hi") == "hello"
    async with BranchStore(path, read_only=True) as store:
        assert await store.unfinished_turns() == []


async def test_an_interrupted_call_asks_a_person_under_the_approve_policy(tmp_path: Path) -> None:
    """``Durability(interrupted="approve")``: a call that started before the crash
    (not idempotent) waits for a person; approved, it runs (once, in this process)."""
    path = tmp_path / "store.db"
    started = StepRecord(
        "tool", state="started", function="send_email", arguments={"to": "bob"},
        call_id="call_email",
    )  # fmt: skip
    await _journal_turn(
        path, to_json(Operate("email bob", actions=True)), [_planned(EMAIL), started.to_text()]
    )
    mailer = Mailer("emailed")
    async with Session(store=path, durability=pride.Durability(interrupted="approve")) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await resumed[0].result()
        [pending] = info.value.pending
        assert pending.call_id == "call_email"
        assert session.suspended_turns()[0].pending == info.value.pending
        result = await session.resolve(info.value.turn_id, {"call_email": Approve()})
        assert result.output == "emailed" and mailer.ran == ["email bob"]


async def test_an_interrupted_call_is_an_error_the_model_sees_by_default(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    started = StepRecord(
        "tool", state="started", function="send_email", arguments={"to": "bob"},
        call_id="call_email",
    )  # fmt: skip
    await _journal_turn(
        path, to_json(Operate("email bob", actions=True)), [_planned(EMAIL), started.to_text()]
    )
    mailer = Mailer("I could not tell whether it was sent")
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        await session.spawn(mailer.branch())
        await resumed[0].result()
        assert mailer.ran == []
        [result] = [m for m in mailer.requests[0].messages if m.get("role") == "tool"]
        assert "InterruptedCall" in json.dumps(result)


async def test_a_resumed_operation_that_strays_from_its_journal_fails(tmp_path: Path) -> None:
    """A journal whose step 1 is a model call, replayed by an operation that makes a
    tool call there: JournalMismatch, and the tool does not run."""
    path = tmp_path / "store.db"
    await _journal_turn(
        path, to_json(Operate("email bob", actions=True)), [_planned(EMAIL), _planned()]
    )
    mailer = Mailer()
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        await session.spawn(mailer.branch())
        with pytest.raises(pride.JournalMismatch, match="step 1"):
            await resumed[0].result()
        assert mailer.ran == []


async def test_more_interrupted_turns_than_the_mailbox_holds_are_each_resumed(
    tmp_path: Path,
) -> None:
    """Each interrupted turn the journal holds is queued as a Resume when its branch is
    spawned. Put in the mailbox without waiting, more of them than the mailbox holds
    (a journal written by hand, or a small ``mailbox_size``) made the spawn fail with
    MailboxFull, and the turns already queued were never handed to the ``on_resume``
    handlers, so their outcomes reached nobody. They wait in line for room now: the
    spawn returns, every turn is resumed, in journal order, and answered."""
    path = tmp_path / "store.db"
    async with BranchStore(path) as store:
        await store.save_branch("ada", str(pride.messages._ids.new_id()), {}, [])
        for index in range(5):
            store.journal_begin(
                "ada", str(pride.messages._ids.new_id()), to_json(pride.Chat(f"c{index}"))
            )
            await store.flush()  # one at a time: the journal keeps them in order of their start
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = await session.spawn(Branch(name="ada", chat_model=echo_model(), mailbox_size=2))
        assert [await reply.result() for reply in resumed] == [
            f"re: c{index}" for index in range(5)
        ]
        assert await branch.chat("next") == "re: next"
    async with BranchStore(path, read_only=True) as store:
        assert await store.unfinished_turns() == []


async def test_a_damaged_suspended_turn_is_abandoned_and_the_branch_takes_work(
    tmp_path: Path,
) -> None:
    """A turn waiting for approval whose journal entry does not read back can only be
    abandoned, and the log said it would be; but only interrupted turns were, so it
    stayed waiting: offered for approval (``suspended_turns``, ``pride chat``) though a
    decision could only abandon it, and its branch refused every other command with
    ApprovalPending until someone did. It is abandoned when the branch is restored, the
    reason answered to the ``on_resume`` handler, and the branch takes work."""
    path = tmp_path / "store.db"
    steps = [_planned(EMAIL), _pending("send_email", {"to": "bob"}, "call_email")]
    turn_id = await _journal_turn(path, "{not json", steps, status="suspended")
    mailer = Mailer("hello")
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = await session.spawn(mailer.branch())
        assert session.suspended_turns() == []
        [reply] = resumed
        with pytest.raises(TurnAbandoned, match="does not read back") as info:
            await reply.result()
        assert str(info.value.turn_id) == turn_id
        assert await branch.chat_and_record("hi") == "hello"
        assert mailer.ran == []
    async with BranchStore(path, read_only=True) as store:
        assert await store.unfinished_turns() == []


async def test_no_tool_runs_after_a_journal_commit_of_its_turn_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool that is not idempotent runs only once the journal says it started. When
    that commit failed for one call of a batch run in order, the call was refused and
    the turn failed with StoreError, but the next call went on, its own commit
    (retrying the failed rows) succeeded on a store that had recovered, and it ran,
    though its turn was already failing: the caller, told the turn failed, would ask
    again and have it run twice. Once a commit of the turn's journal failed, no
    later call of the batch runs."""
    path = tmp_path / "store.db"
    ran: list[str] = []

    def charge(card: str) -> str:
        """Charge a card."""
        ran.append(card)
        return f"charged {card}"

    calls = (ToolCall("charge", {"card": "a"}, id="c1"), ToolCall("charge", {"card": "b"}, id="c2"))
    model = pride.ScriptedModel([pride.llm.ScriptedReply(tool_calls=calls), "done"])
    async with Session(store=path) as session:
        branch = await session.spawn(Branch(name="shop", chat_model=model, tools=[charge]))
        write = store_module.write_batch
        failures = [sqlite3.OperationalError("database or disk is full")]  # once: then it has room

        def flaky(*args: Any) -> None:
            if failures:
                raise failures.pop()
            write(*args)

        monkeypatch.setattr(store_module, "write_batch", flaky)
        with pytest.raises(StoreError, match="disk is full"):
            await session.ask(
                "shop", Operate("charge both", actions=True, action_strategy="sequential")
            )
        assert ran == []
        assert branch.running


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -(10**9)},
        {"output_tokens": -1},
        {"cost_usd": -100.0},
        {"cached_tokens": 2**60},
        {"cost_usd": 1e300},
    ],
)
async def test_a_journaled_reply_with_impossible_usage_is_abandoned(
    tmp_path: Path, usage: dict[str, Any]
) -> None:
    """A resumed turn counts its journaled replies' usage in its own figures and its
    budget, as it counts a live reply's. A provider's reply claiming a negative (or
    absurd) count or cost is refused when it is read, since summed it would buy calls
    past a budget; a journaled one was taken as it was: a reply edited to
    -10**9 input tokens lifted the turn's ``max_input_tokens``, and it went on to
    call the model. Such a step does not read back: the turn is abandoned, and
    nothing runs."""
    path = tmp_path / "store.db"
    step = json.loads(_planned(LOOKUP))
    step["response"]["usage"].update(usage)
    await _journal_turn(path, to_json(Operate("find bob", actions=True)), [json.dumps(step)])
    mailer = Mailer("found bob")
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = mailer.branch()
        branch.budget = pride.Budget(max_input_tokens=5)
        await session.spawn(branch)
        [reply] = resumed
        with pytest.raises(TurnAbandoned, match="step 0"):
            await reply.result()
        assert mailer.ran == [] and mailer.requests == []
