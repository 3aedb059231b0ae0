"""A store's bound on the size of one row (``BranchStore(max_row_bytes=...)``).

Without one, a runaway tool result (hundreds of megabytes) was written as a row,
and every later load of the branch read it whole: the process that restored the
branch took the row's size several times over, and a row too big for memory ended
the load in a MemoryError instead of an error naming the row.
"""

from __future__ import annotations

import re
import sqlite3
import tracemalloc
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from pride import (
    Branch,
    Call,
    Chat,
    Flow,
    Operate,
    ScriptedModel,
    Session,
    StoreError,
    TurnAbandoned,
)
from pride.durable.records import StepRecord
from pride.llm import ModelResponse, ScriptedReply, ToolCall
from pride.messages import to_json
from pride.store import BranchStore
from tests.helpers import echo_model

BOUND = 4096


async def test_a_message_over_max_row_bytes_fails_its_turn_and_is_not_stored(
    tmp_path: Path,
) -> None:
    """A tool result of 10,000 characters under max_row_bytes=4096: the act fails with
    StoreError naming the row's size, the bound and the fix; the branch serves on, and
    the store holds every row but that one."""
    path = tmp_path / "store.db"

    def dump() -> str:
        """A runaway result."""
        return "x" * 10_000

    def small() -> str:
        """A small result."""
        return "ok"

    async with BranchStore(path, max_row_bytes=BOUND) as bounded, Session(store=bounded) as session:
        branch = await session.spawn(
            Branch(name="ada", chat_model=echo_model(), tools=[dump, small])
        )
        with pytest.raises(StoreError) as caught:
            await branch.act({"function": "dump", "arguments": {}})
        text = str(caught.value)
        assert "max_row_bytes (4,096)" in text and re.search(r"10,\d{3} bytes", text), text
        await branch.act({"function": "small", "arguments": {}})  # serves on
    async with BranchStore(path) as store:
        stored = await store.load_messages("ada")
    assert [getattr(m, "output", None) for m in stored] == [None, None, "ok"]


async def test_a_stored_row_over_max_row_bytes_is_refused_where_it_is_read(
    tmp_path: Path,
) -> None:
    """A row of 10,000 bytes in the file (written by a store with a larger bound, or by
    hand) is refused by a store opened with max_row_bytes=4096: load, load_messages and
    spawn's restore raise StoreError naming the row, its size and the fix, and the
    row is never read into the process. With the default bound it loads."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("y" * 10_000)
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        for read in (store.load, store.load_messages):
            with pytest.raises(
                StoreError, match=r"message row 0 of branch 'ada' holds 10,\d+ bytes"
            ):
                await read("ada")
    async with BranchStore(path, max_row_bytes=BOUND) as bounded, Session(store=bounded) as session:
        with pytest.raises(StoreError, match="max_row_bytes"):
            await session.spawn(Branch(name="ada", chat_model=echo_model()))
    async with BranchStore(path) as store:
        assert len(await store.load_messages("ada")) == 2


def test_max_row_bytes_must_be_a_positive_int(tmp_path: Path) -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_row_bytes"):
            BranchStore(tmp_path / "s.db", max_row_bytes=bad)  # type: ignore[arg-type]


# ------------------------------------------------- the turn journal and the flow journal

MIB = 1024 * 1024


def _file_bytes(path: Path) -> int:
    """What the store takes on disk, its write-ahead log included."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def test_a_tool_result_over_max_row_bytes_fails_its_journal_commit_unwritten(
    tmp_path: Path,
) -> None:
    """A tool returning 16 MB of text in a journaled turn, under max_row_bytes of 1 MiB
    (80 MB did the same, slower): its journal step was written whole (twice its size
    in the file, for the turn's end to delete). Now the commit that would carry it
    fails the turn with StoreError naming the step, its size and the bound; nothing
    of that size reaches the file, and the branch serves on."""
    path = tmp_path / "store.db"

    def dump() -> str:
        """A runaway result."""
        return "x" * 16_000_000

    calls = (ToolCall("dump", {}, id="c1"),)
    model = ScriptedModel([ScriptedReply(tool_calls=calls), "fine"])
    async with BranchStore(path, max_row_bytes=MIB) as bounded, Session(store=bounded) as session:
        branch = await session.spawn(Branch(name="ada", chat_model=model, tools=[dump]))
        with pytest.raises(StoreError) as caught:
            await session.ask("ada", Operate("dump it", actions=True))
        text = str(caught.value)
        assert _file_bytes(path) < 4 * MIB, _file_bytes(path)
        assert "journal step 1 of turn" in text and "max_row_bytes (1,048,576)" in text, text
        assert re.search(r"16,000,\d{3} bytes", text), text
        assert await branch.chat_and_record("still there?") == "fine"
        assert await bounded.unfinished_turns() == []
    assert _file_bytes(path) < 4 * MIB


async def _stored_turn(path: Path, status: str = "running") -> str:
    """A branch "ada" with one exchange, and an unfinished turn of it with one step, as a
    crashed process leaves them (or, ``"suspended"``, waiting for approval); returns the
    turn's id."""
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("hi")
    turn_id = str(uuid4())
    async with BranchStore(path) as store:
        await store.register("ada")
        store.journal_begin("ada", turn_id, to_json(Chat("again")), tag='"r7"')
        store.journal_step("ada", turn_id, 0, StepRecord("model", ModelResponse("re")).to_text())
        if status != "running":
            store.journal_status("ada", turn_id, status, detail="waits for approval")
        await store.flush()
    return turn_id


def _overwrite(path: Path, query: str, *args: object) -> None:
    """Change the file as a hostile hand would: through SQLite, not through pride."""
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(query, args)
    finally:
        db.close()


HUGE = 8_000_000  # bytes of a hostile row: eight times the bound


@pytest.mark.parametrize(
    ("query", "row", "status"),
    [
        ("UPDATE steps SET data=? WHERE turn_id=?", "journal step 0 of turn {}", "running"),
        ("UPDATE steps SET data=? WHERE turn_id=?", "journal step 0 of turn {}", "suspended"),
        ("UPDATE turns SET command=? WHERE turn_id=?", "the journal entry of turn {}", "running"),
        ("UPDATE turns SET detail=? WHERE turn_id=?", "the journal entry of turn {}", "suspended"),
    ],
)
async def test_a_journal_row_over_max_row_bytes_on_disk_is_abandoned_unread(
    tmp_path: Path, query: str, row: str, status: str
) -> None:
    """A turn-journal row of 8 MB in the file, under max_row_bytes of 1 MiB: it was read
    whole into the process (by `unfinished_turns`, by `pride inspect`, by every restore of
    its branch). Now SQLite measures it and it is never read: the turn reads back with a
    problem naming the row, its size and the bound, the branch is restored and its
    turn abandoned with TurnAbandoned saying so (one waiting for approval too: no
    decision could resume it), and the branch serves on."""
    path = tmp_path / "store.db"
    turn_id = await _stored_turn(path, status)
    _overwrite(path, query, "x" * HUGE, turn_id)
    expected = re.escape(row.format(turn_id)) + r" holds 8,000,\d{3} bytes, more than "
    expected += re.escape("max_row_bytes (1,048,576): it is not read")
    async with BranchStore(path, max_row_bytes=MIB) as bounded:
        tracemalloc.start()
        try:
            [turn] = await bounded.unfinished_turns()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < HUGE // 4, peak  # the row's text never reached the process
        assert re.search(expected, turn.problem or ""), turn.problem
        async with Session(store=bounded) as session:
            resumed: list[Any] = []
            session.on_resume(resumed.append)
            ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
            [reply] = resumed
            with pytest.raises(TurnAbandoned, match=expected):
                await reply.result()
            assert await ada.chat_and_record("there?") == "re: there?"
            assert len(ada.messages) == 4
        assert await bounded.unfinished_turns() == []


async def test_a_flow_result_over_max_row_bytes_fails_its_node_unwritten(tmp_path: Path) -> None:
    """A flow node whose result is 8 MB, under max_row_bytes of 1 MiB: its journal event
    (the outcome a resumed run keeps) was written whole. Now it is refused at its
    commit: the node fails with StoreError naming the event, its size and the bound,
    nothing of that size reaches the file, and the session runs the next flow."""
    path = tmp_path / "store.db"

    async def dump(branch: Branch, size: int) -> str:
        return "x" * size

    async with BranchStore(path, max_row_bytes=MIB) as bounded, Session(store=bounded) as session:
        session.register_operation("dump", dump)
        await session.spawn(Branch(name="ada", chat_model=echo_model()))
        flow = Flow("big")
        flow.add("ada", Call("dump", size=HUGE), name="big")
        result = await session.flow(flow)
        assert result.outcomes == {"big": "failed"}
        error = result.errors["big"]
        assert isinstance(error, StoreError), error
        assert re.search(r"event 0 of flow \S+ is at least 8,000,\d{3} bytes", str(error)), error
        assert "max_row_bytes (1,048,576)" in str(error)
        small = Flow("small")
        small.add("ada", Call("dump", size=10), name="small")
        assert (await session.flow(small))["small"] == "x" * 10
        assert await bounded.unfinished_flows() == []
    assert _file_bytes(path) < 4 * MIB


@pytest.mark.parametrize(
    ("query", "row"),
    [
        ("UPDATE flows SET plan=? WHERE flow_id=?", "the plan of flow {}"),
        ("UPDATE flow_events SET data=? WHERE flow_id=?", "event 0 of flow {}"),
    ],
)
async def test_a_flow_journal_row_over_max_row_bytes_on_disk_is_refused_unread(
    tmp_path: Path, query: str, row: str
) -> None:
    """A flow-journal row of 8 MB in the file, under max_row_bytes of 1 MiB, was read
    whole by every listing of the unfinished flows. Now it is never read: resuming the
    flow raises StoreError naming the row, its size and the bound; the session lists
    the other flows, abandoning this one works, and the store serves on."""
    path = tmp_path / "store.db"
    flow_id = str(uuid4())
    async with BranchStore(path) as store:
        store.flow_begin(flow_id, "big", "{}")
        store.flow_event(flow_id, 0, "{}")
        await store.flush()
    _overwrite(path, query, "x" * HUGE, flow_id)
    expected = re.escape(row.format(flow_id)) + r" holds 8,000,\d{3} bytes, more than "
    expected += re.escape("max_row_bytes (1,048,576): it is not read")
    async with BranchStore(path, max_row_bytes=MIB) as bounded:
        tracemalloc.start()
        try:
            [stored] = await bounded.unfinished_flows()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < HUGE // 4, peak  # the row's text never reached the process
        assert re.search(expected, stored.problem or ""), stored.problem
        async with Session(store=bounded) as session:
            assert await session.unfinished_flows() == []  # unreadable: logged, not listed
            with pytest.raises(StoreError, match=expected):
                await session.resume_flow(flow_id)
            await session.abandon_flow(flow_id)
        assert await bounded.unfinished_flows() == []


async def test_a_projection_over_max_row_bytes_fails_its_save_unwritten(tmp_path: Path) -> None:
    """A branch whose projection (its metadata, say) is 2 MB, under max_row_bytes of
    1 MiB: its projection row was written whole, and read whole by every load. Now its
    save fails with StoreError naming the projection, its size and the bound: a new
    member's first turn, its next turns (not "not registered": the save is what
    failed), and ``store.save``; nothing of it is stored, and the session serves on."""
    path = tmp_path / "store.db"
    blob = {"blob": "x" * 2_000_000}
    async with BranchStore(path, max_row_bytes=MIB) as bounded, Session(store=bounded) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model(), metadata=blob))
        for _ in range(2):
            with pytest.raises(StoreError, match=r"the projection of branch 'ada' is at least 2,0"):
                await ada.chat_and_record("hi")
        with pytest.raises(StoreError, match=re.escape("max_row_bytes (1,048,576)")):
            await bounded.save(ada)
        bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
        assert await bob.chat_and_record("hi") == "re: hi"
        assert [b.name for b in await bounded.branches()] == ["bob"]
    assert _file_bytes(path) < MIB


async def test_a_projection_over_max_row_bytes_on_disk_is_refused_unread(tmp_path: Path) -> None:
    """An 8 MB projection in the file, under max_row_bytes of 1 MiB: ``load`` raises
    StoreError naming it, without reading it; ``load_messages`` and restoring the
    branch (neither of which needs it) read on. An id longer than any pride writes is
    refused unread, as an id that is not a UUID."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("hi")
    _overwrite(path, "UPDATE branches SET projection=? WHERE name=?", "x" * HUGE, "ada")
    async with BranchStore(path, max_row_bytes=MIB) as bounded:
        tracemalloc.start()
        try:
            with pytest.raises(
                StoreError, match=r"the projection of branch 'ada' holds 8,000,\d{3} bytes"
            ):
                await bounded.load("ada")
            assert len(await bounded.load_messages("ada")) == 2
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < HUGE // 4, peak
        async with Session(store=bounded) as session:
            ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
            assert len(ada.messages) == 2
    _overwrite(path, "UPDATE branches SET branch_id=? WHERE name=?", "x" * HUGE, "ada")
    async with BranchStore(path, max_row_bytes=MIB) as bounded, Session(store=bounded) as session:
        with pytest.raises(StoreError, match="the id of branch 'ada' is not a UUID"):
            await session.spawn(Branch(name="ada", chat_model=echo_model()))


@pytest.mark.parametrize("key", ["application", "schema"])
async def test_a_huge_value_in_pride_meta_is_refused_at_open_unread(
    tmp_path: Path, key: str
) -> None:
    """A file whose ``pride_meta`` row holds 8 MB (not a pride store, or a damaged one)
    was read whole at open, and its value quoted whole in the StoreError refusing it.
    Now SQLite cuts it: the error shows its first hundred characters, and the value
    never reaches the process."""
    path = tmp_path / "store.db"
    async with BranchStore(path):
        pass
    _overwrite(path, "UPDATE pride_meta SET value=? WHERE key=?", "x" * HUGE, key)
    tracemalloc.start()
    try:
        with pytest.raises(StoreError) as caught:
            async with BranchStore(path):
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(str(caught.value)) < 1000, len(str(caught.value))
    assert "x" * 100 in str(caught.value)
    assert peak < HUGE // 4, peak
