"""A journal row the store's bound refused, and a crash before the turn's end; status
changes near the bound; and the restore path read by an attacker.

A refused row fails its turn in the process that queued it; the turn's end, queued
when the turn fails, deletes its entry. A process that stops in between left the
entry on disk without the refused row: a restart resumed the turn as if that step
had never been made, and ran it again, though its caller had been told it failed.
The same held for a flow node's refused outcome. A restore trusts no row: one lost
from the middle of a turn, or a status that does not match the steps, abandons or
fails the turn rather than run anything twice or hold the branch forever.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import attrs
import pytest
import trio

from pride import (
    ApprovalRequested,
    ApprovalRequired,
    Approve,
    Branch,
    Call,
    Chat,
    Flow,
    InvalidMessage,
    JournalMismatch,
    NodeFailed,
    Operate,
    Resume,
    ScriptedModel,
    Session,
    StoreError,
    TurnAbandoned,
)
from pride.durable.records import StepRecord, tool_step
from pride.llm import ModelResponse, ToolCall
from pride.messages import ActionCall, to_json
from pride.store import BranchStore
from pride.store.journal import TAG_BYTES
from tests.durable.test_approvals import EMAIL, Mailer
from tests.helpers import echo_model

BOUND = 4096


async def test_a_turn_whose_step_was_refused_is_abandoned_after_a_crash_never_run_again(
    tmp_path: Path,
) -> None:
    """A journaled turn planned a call of ``fetch``; the call started (committed), and
    its result, 10,000 bytes under max_row_bytes=4096, was refused at its commit, which
    failed the turn. The process stopped before the turn's end was committed. On
    restart the turn was resumed: the started call answered as interrupted, and the
    turn went on to an answer its caller never asked for again. Now the refusal marks
    the entry failed in the same commit, so the restart abandons the turn, saying which
    row was refused, and nothing of it runs."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("hi")
    turn_id = str(uuid4())
    call = ToolCall("fetch", {"url": "u"}, id="c1")
    action = ActionCall(function="fetch", arguments={"url": "u"})
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        # What a Session writes for the turn, up to the refused result.
        store.journal_begin("ada", turn_id, to_json(Operate("get it", actions=True)), tag='"r7"')
        planned = StepRecord("model", ModelResponse("", (call,)))
        store.journal_step("ada", turn_id, 0, planned.to_text())
        store.journal_step("ada", turn_id, 1, tool_step(action, "started", False, "c1").to_text())
        await store.flush("ada")
        done = attrs.evolve(tool_step(action, "done", False, "c1"), output="x" * 10_000)
        store.journal_step("ada", turn_id, 1, done.to_text())
        with pytest.raises(StoreError, match="journal step 1 of turn"):
            await store.flush("ada")
        # The process stops here: the turn's end is never queued.
    ran: list[str] = []

    def fetch(url: str) -> str:
        """Fetch a page."""
        ran.append(url)
        return "page"

    model = ScriptedModel(["the page says hi"])
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        [turn] = await store.unfinished_turns()
        assert turn.status == "failed", turn
        async with Session(store=store) as session:
            resumed: list[Any] = []
            session.on_resume(resumed.append)
            ada = await session.spawn(Branch(name="ada", chat_model=model, tools=[fetch]))
            [reply] = resumed
            with pytest.raises(TurnAbandoned, match=r"journal step 1 was refused") as info:
                await reply.result()
            assert str(info.value.turn_id) == turn_id
            assert ran == [] and model.calls == []
            assert len(ada.messages) == 2
        assert await store.unfinished_turns() == []


async def test_a_failed_turn_stays_failed_whatever_status_change_follows(tmp_path: Path) -> None:
    """A turn whose pending call's step was refused suspended in its process (it fails
    there now: `test_a_turn_whose_suspension_was_refused_fails_with_the_store_error`),
    and its suspension, committed next, set the entry back to ``"suspended"`` over the
    failure: a restart would have waited for a decision on a turn missing the step.
    Whatever status change follows a refusal, the failure is kept; the turn's end
    still deletes it."""
    path = tmp_path / "store.db"
    turn_id = str(uuid4())
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        await store.register("ada")
        store.journal_begin("ada", turn_id, to_json(Operate("x", actions=True)))
        store.journal_step("ada", turn_id, 0, '"' + "x" * (2 * BOUND) + '"')
        with pytest.raises(StoreError, match="journal step 0 of turn"):
            await store.flush("ada")
        store.journal_status("ada", turn_id, "suspended", detail="waits for approval")
        await store.flush("ada")
        [turn] = await store.unfinished_turns()
        assert turn.status == "failed", turn
        assert turn.detail is not None and "journal step 0 was refused" in turn.detail
        store.journal_end("ada", turn_id)
        await store.flush("ada")
        assert await store.unfinished_turns() == []


async def test_a_turn_whose_suspension_was_refused_fails_with_the_store_error(
    tmp_path: Path,
) -> None:
    """The model asks to send an email whose arguments (10,000 bytes) are over
    max_row_bytes=4096: the commit that would suspend the turn for approval refuses
    its rows. The turn still suspended in memory, and its caller was told
    ApprovalRequired, "approve this", for a turn a restart abandons as failed (its
    entry was marked failed by the refusal). Now the caller gets the StoreError, no
    ApprovalRequested is announced, nothing waits, the branch takes its next work,
    and the store keeps no entry of the turn."""
    path = tmp_path / "store.db"
    huge = ToolCall("send_email", {"to": "b" * 10_000}, id="call_email")
    mailer = Mailer(huge, "hello")
    requested: list[ApprovalRequested] = []
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        async with Session(store=store) as session:
            session.observe(ApprovalRequested, handler=requested.append)
            branch = await session.spawn(mailer.branch())
            with pytest.raises(StoreError, match="max_row_bytes"):
                await session.ask(branch, Operate("email bob", actions=True))
            assert session.suspended_turns() == []
            assert requested == []
            assert await branch.chat_and_record("hi") == "hello"  # no ApprovalPending
            assert mailer.ran == []
        assert await store.unfinished_turns() == []
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = await session.spawn(mailer.branch())
        assert resumed == [] and session.suspended_turns() == []
        assert branch.messages[-1].text == "hello"


# ------------------------------------------------------------------ the flow journal


async def test_a_flow_node_whose_event_was_refused_is_journaled_failed_never_run_again(
    tmp_path: Path,
) -> None:
    """A flow of two nodes: ``big``'s result, 10,000 bytes under max_row_bytes=4096, is
    refused at its commit (the node fails with StoreError), while ``slow`` still runs;
    the process stops before the flow ends. Its journal held nothing of ``big``, so
    the resumed run sent it again: a node its run had reported failed ran twice. Now
    the refused event is replaced, in the same commit, by ``big``'s failure with the
    reason, and the resumed run keeps that outcome."""
    path = tmp_path / "store.db"
    ran: list[int] = []
    hold = trio.Event()

    async def dump(branch: Branch, size: int) -> str:
        ran.append(size)
        return "x" * size

    async def slow(branch: Branch) -> str:
        await hold.wait()
        return "slow"

    def flow() -> Flow:
        built = Flow("two")
        built.add("ada", Call("dump", size=10_000), name="big")
        built.add("bob", Call("slow"), name="slow")
        return built

    async with BranchStore(path, max_row_bytes=BOUND) as store, Session(store=store) as session:
        session.register_operation("dump", dump)
        session.register_operation("slow", slow)
        await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await session.spawn(Branch(name="bob", chat_model=echo_model()))
        async with session.flow_stream(flow()) as events:
            async for event in events:
                if isinstance(event, NodeFailed) and event.node == "big":
                    break
        # Leaving the stream cuts the run short, as the process stopping would.
        [stored] = await session.unfinished_flows()
        assert stored.outcomes == {"big": "failed"}, stored
    assert ran == [10_000]
    hold.set()
    async with BranchStore(path, max_row_bytes=BOUND) as store, Session(store=store) as session:
        session.register_operation("dump", dump)
        session.register_operation("slow", slow)
        await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await session.spawn(Branch(name="bob", chat_model=echo_model()))
        result = await session.resume_flow(stored.flow_id, flow())
        assert result.outcomes == {"big": "failed", "slow": "completed"}
        assert "refused" in str(result.errors["big"]), result.errors
        assert ran == [10_000]
        assert await store.unfinished_flows() == []


# ------------------------------------------------- status changes and long request ids


@pytest.mark.parametrize("slack", [0, 60, 200, 1000])
async def test_a_status_change_never_grows_a_journal_entry_past_the_bound(
    tmp_path: Path, slack: int
) -> None:
    """A turn's entry ``slack`` bytes under max_row_bytes=4096, then suspended by a
    Resume tagged with a 200-character request id: the change was measured on its own
    (the entry's command is not in it), so it was written, and the entry on disk was
    over the bound: the next restore read the turn as unreadable and abandoned it. Now
    an entry keeps room for its status changes: it fits with them, or its begin is
    refused at once (its turn fails then, not after a person was asked)."""
    path = tmp_path / "store.db"
    turn_id = str(uuid4())
    tag = '"r1"'
    filler = BOUND - slack - sum(len(t) for t in (turn_id, "ada", "running", tag, '""'))
    command = '"' + "x" * filler + '"'
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        await store.register("ada")
        store.journal_begin("ada", turn_id, command, tag=tag)
        try:
            await store.flush("ada")
        except StoreError as exc:
            assert "the journal entry of turn" in str(exc), exc
            assert await store.unfinished_turns() == []
            return
        long_tag = '"' + "t" * 200 + '"'
        store.journal_status("ada", turn_id, "suspended", detail="waits for approval", tag=long_tag)
        await store.flush("ada")
        [turn] = await store.unfinished_turns()
        assert (turn.problem, turn.status, turn.tag) == (None, "suspended", long_tag)


async def test_a_resume_tagged_longer_than_the_journal_keeps_is_refused_and_the_turn_waits(
    tmp_path: Path,
) -> None:
    """A turn waiting for approval, resumed by a request whose id is 5,000 characters
    (max_row_bytes=4096): the status change carrying the id was refused at its commit,
    which failed the turn: the decision was lost to a bad id. Now the Resume is refused
    before anything changes, with InvalidMessage naming the tag and its size; the turn
    still waits, and a Resume with a short id runs it."""
    path = tmp_path / "store.db"
    mailer = Mailer([EMAIL], "emailed bob")
    async with BranchStore(path, max_row_bytes=BOUND) as store, Session(store=store) as session:
        await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await session.ask("mailer", Operate("email bob", actions=True))
        turn_id = info.value.turn_id
        decision = Resume(turn_id, {"call_email": Approve()})
        reply = await session.send("mailer", decision, tag="r" * 5000)
        with pytest.raises(InvalidMessage, match=r"tag.* 5,002 bytes") as refused:
            await reply.result()
        assert "r" * 200 not in str(refused.value)  # named, not quoted whole
        assert mailer.ran == []
        [turn] = await store.unfinished_turns()
        assert turn.status == "suspended"
        reply = await session.send("mailer", decision, tag="r2")
        assert (await reply.result()).output == "emailed bob"
        assert mailer.ran == ["email bob"]
        assert await store.unfinished_turns() == []


async def test_a_turn_begun_with_a_long_tag_is_resumed_on_that_tag_after_a_crash(
    tmp_path: Path,
) -> None:
    """The door on a Resume's tag is for a new tag only: a turn begun with a tag over
    `TAG_BYTES` (a flow node's, with a long node name) is resumed after a restart by
    a Resume carrying that same tag, which its entry holds already, and it resumes."""
    path = tmp_path / "store.db"
    long_tag = "n" * (TAG_BYTES + 100)
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("hi")
    turn_id = str(uuid4())
    async with BranchStore(path) as store:
        store.journal_begin("ada", turn_id, to_json(Chat("again")), tag=json.dumps(long_tag))
        store.journal_step("ada", turn_id, 0, StepRecord("model", ModelResponse("re")).to_text())
        await store.flush()
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        await session.spawn(Branch(name="ada", chat_model=echo_model()))
        [reply] = resumed
        assert reply.tag == long_tag
        assert await reply.result() == "re"


# ------------------------------------------------------------ the restore path, attacked


async def test_a_journal_missing_a_started_call_before_later_steps_fails_never_runs_it(
    tmp_path: Path,
) -> None:
    """A journal whose step 1, the call of a tool that is not idempotent, is gone (a row
    deleted by another process or by hand, or lost by an older pride's refused row)
    while the model's next reply, step 2, is there: the resumed turn ran the call live,
    though a turn only goes past a call of such a tool once its start is journaled, so
    it may have run already, then answered the rest from the journal. Now the turn
    fails with JournalMismatch naming the step, and the call does not run."""
    path = tmp_path / "store.db"
    ran: list[str] = []

    def charge(card: str) -> str:
        """Charge a card."""
        ran.append(card)
        return f"charged {card}"

    async with Session(store=path) as session:
        await session.spawn(Branch(name="shop", chat_model=echo_model(), tools=[charge]))
    turn_id = str(uuid4())
    planned = StepRecord("model", ModelResponse("", (ToolCall("charge", {"card": "a"}, id="c1"),)))
    async with BranchStore(path) as store:
        store.journal_begin("shop", turn_id, to_json(Operate("charge a", actions=True)))
        store.journal_step("shop", turn_id, 0, planned.to_text())
        store.journal_step("shop", turn_id, 2, StepRecord("model", ModelResponse("done")).to_text())
        await store.flush()
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        shop = await session.spawn(Branch(name="shop", chat_model=echo_model(), tools=[charge]))
        [reply] = resumed
        with pytest.raises(JournalMismatch, match=r"step 1, a call of .charge., is missing"):
            await reply.result()
        assert ran == []
        assert await shop.chat_and_record("hi") == "re: hi"
    async with BranchStore(path) as store:
        assert await store.unfinished_turns() == []


async def test_a_suspended_turn_with_no_call_waiting_is_abandoned_and_the_branch_works(
    tmp_path: Path,
) -> None:
    """A journal entry marked waiting for approval whose pending step is gone (a row
    deleted, or a status set by hand): nothing in it waits for a decision, yet the
    branch refused every request with ApprovalPending listing no call a person could
    decide on. Such an entry cannot be what pride wrote; it is abandoned on restore,
    saying so, and the branch takes work."""
    path = tmp_path / "store.db"
    mailer = Mailer("hello")
    async with Session(store=path) as session:
        await session.spawn(mailer.branch())
    turn_id = str(uuid4())
    planned = StepRecord("model", ModelResponse("", (EMAIL,)))
    async with BranchStore(path) as store:
        store.journal_begin("mailer", turn_id, to_json(Operate("email bob", actions=True)))
        store.journal_step("mailer", turn_id, 0, planned.to_text())
        store.journal_status("mailer", turn_id, "suspended", detail="waits for approval")
        await store.flush()
    async with Session(store=path) as session:
        resumed: list[Any] = []
        session.on_resume(resumed.append)
        branch = await session.spawn(mailer.branch())
        [reply] = resumed
        with pytest.raises(TurnAbandoned, match="holds no call waiting for a decision"):
            await reply.result()
        assert await branch.chat_and_record("hi") == "hello"
        assert mailer.ran == []
