"""The row bound at its edges: a row of exactly ``max_row_bytes``, one byte more,
multi-byte text spread over a row's columns, and a refused row sharing its commit
with good rows of other branches (a failed write retried too).

What the writer accepts must be what the reader reads back: a row the write side
measured under the bound but the read side (SQLite's ``length()`` of every column
of the row) measured over it was written, and then abandoned unread by the next
restore of its branch, though its turn had been served as durable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest
import trio

from pride import StoreError
from pride.store import BranchStore
from pride.store.journal import status_room

BOUND = 4096
STATUS = "running"  # what a begun turn's status column holds


def _turn_row_bytes(turn_id: str, branch: str, *texts: str) -> int:
    """The size of a turn-journal row as SQLite measures it where it is read."""
    return sum(len(text.encode()) for text in (turn_id, branch, STATUS, *texts))


@pytest.mark.parametrize("over", [0, 1])
async def test_a_journal_entry_at_the_bound_reads_back_and_one_byte_more_is_refused(
    tmp_path: Path, over: int
) -> None:
    """A turn's entry of exactly max_row_bytes (its ids and status counted, as the
    reader counts them, and the room it keeps for its status changes) is written and
    reads back whole; one byte more is refused at its commit. Before, the writer
    measured the command alone, so an entry up to the bound plus its ids was written
    and then read back as over the bound: the turn a restore would resume was
    abandoned instead."""
    path = tmp_path / "store.db"
    turn_id = str(uuid4())
    room = status_room(None, None)
    filler = BOUND - room - _turn_row_bytes(turn_id, "ada", '""') + over
    command = '"' + "x" * filler + '"'
    assert _turn_row_bytes(turn_id, "ada", command) + room == BOUND + over
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        await store.register("ada")
        store.journal_begin("ada", turn_id, command)
        if over:
            with pytest.raises(StoreError, match=r"the journal entry of turn .* 4,097 bytes"):
                await store.flush("ada")
            assert await store.unfinished_turns() == []
        else:
            await store.flush("ada")
            [turn] = await store.unfinished_turns()
            assert turn.problem is None
            assert turn.command == command


async def test_multi_byte_text_over_two_columns_is_measured_in_bytes(tmp_path: Path) -> None:
    """A turn's command and tag of 1,002 characters each, three UTF-8 bytes a character
    (6,000 bytes in all), under max_row_bytes=4096: each column alone was short enough
    to be taken at its length (4 bytes a character would still fit), so the row was
    measured at 2,000-odd and written, then read back over the bound. It is refused at
    its commit now, with its size in bytes (and the room it keeps for its status
    changes)."""
    path = tmp_path / "store.db"
    turn_id = str(uuid4())
    wide = '"' + "€" * 1000 + '"'
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        await store.register("ada")
        store.journal_begin("ada", turn_id, wide, tag=wide)
        with pytest.raises(StoreError, match=r"the journal entry of turn .* 6,\d{3} bytes"):
            await store.flush("ada")
        assert await store.unfinished_turns() == []


async def test_a_flow_plan_at_the_bound_reads_back_and_one_byte_more_is_refused(
    tmp_path: Path,
) -> None:
    """A flow's plan row counts its id, as the reader does: a plan that fits with its
    name but not with its id was written, then read back as over the bound."""
    path = tmp_path / "store.db"
    flow_id = str(uuid4())
    plan = '"' + "p" * (BOUND - len(flow_id) - len("f") - 2 + 1) + '"'
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        store.flow_begin(flow_id, "f", plan)
        with pytest.raises(StoreError, match=r"the plan of flow .* 4,097 bytes"):
            await store.flush()
        assert await store.unfinished_flows() == []


async def test_a_refused_row_fails_only_its_branch_and_a_failed_write_never_brings_it_back(
    tmp_path: Path,
) -> None:
    """One commit holds a refused journal entry of ada and good entries of bob and cy.
    bob's flush and cy's succeed while ada's fails naming her row. Then a write fails
    (a trigger refuses cy's next entry, a real SQLite error): its rows stay queued,
    and the retry, once the trigger is gone, commits them and never the refused row."""
    path = tmp_path / "store.db"
    huge = '"' + "x" * (2 * BOUND) + '"'
    ada, bob, cy, cy2 = (str(uuid4()) for _ in range(4))
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        for name in ("ada", "bob", "cy"):
            await store.register(name)
        store.journal_begin("ada", ada, huge)
        store.journal_begin("bob", bob, '"fine"')
        store.journal_begin("cy", cy, '"fine too"')
        await store.flush("bob")  # one commit takes all three
        await store.flush("cy")
        with pytest.raises(StoreError, match="the journal entry of turn"):
            await store.flush("ada")
        assert sorted(t.branch_name for t in await store.unfinished_turns()) == ["bob", "cy"]

        store.journal_begin("ada", str(uuid4()), huge)
        store.journal_begin("cy", cy2, '"later"')
        db = sqlite3.connect(path)
        try:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON turns WHEN NEW.command = '\"later\"' "
                "BEGIN SELECT RAISE(ABORT, 'the disk said no'); END"
            )
            db.commit()
            with pytest.raises(StoreError, match="the disk said no"):
                await store.flush("cy")
            db.execute("DROP TRIGGER refuse")
            db.commit()
        finally:
            db.close()
        await store.flush("cy")  # the retry: cy's entry, and never ada's refused one
        turns = await store.unfinished_turns()
        assert sorted(t.turn_id for t in turns) == sorted([bob, cy, cy2])
        assert all(t.problem is None for t in turns)


async def test_a_commit_waiter_hears_a_refusal_another_branch_s_flush_committed(
    tmp_path: Path,
) -> None:
    """A turn is answered by `after_commit` (its commit's outcome): when another
    branch's flush committed the batch holding the turn's refused entry first, the
    turn found nothing queued and was answered as durable. It is told the refusal."""
    path = tmp_path / "store.db"
    async with BranchStore(path, max_row_bytes=BOUND) as store:
        for name in ("ada", "bob"):
            await store.register(name)
        store.journal_begin("ada", str(uuid4()), '"' + "x" * (2 * BOUND) + '"')
        store.journal_begin("bob", str(uuid4()), '"fine"')
        await store.flush("bob")
        told: list[StoreError | None] = []
        answered = trio.Event()

        def done(failure: StoreError | None) -> None:
            told.append(failure)
            answered.set()

        assert store.after_commit("ada", done)
        assert told == []  # never from inside the call
        await answered.wait()
        [failure] = told
        assert isinstance(failure, StoreError)
        assert "the journal entry of turn" in str(failure)
        assert not store.after_commit("ada", done)  # told once
        await store.flush("ada")


async def test_a_refused_row_fails_the_turn_that_queued_it_not_the_next_one_in_its_batch(
    tmp_path: Path,
) -> None:
    """A turn handed to its commit lets its branch serve the next turn meanwhile, so two
    turns of one branch can share a batch. The first one's step over the bound fails
    the first turn's commit waiter; the second turn, whose rows were all written, was
    failed with the first one's error too (its caller would run it again). Each commit
    waiter now hears the refusals of what it waits for: the rows its branch queued
    since the waiter before it."""
    path = tmp_path / "store.db"
    first, second = str(uuid4()), str(uuid4())
    told: dict[str, StoreError | None] = {}
    both = trio.Event()

    def waiter(turn: str) -> Callable[[StoreError | None], None]:
        def done(failure: StoreError | None) -> None:
            told[turn] = failure
            if len(told) == 2:
                both.set()

        return done

    async with BranchStore(path, max_row_bytes=BOUND) as store:
        await store.register("ada")
        store.journal_begin("ada", first, '"one"')
        store.journal_step("ada", first, 0, '"' + "x" * (2 * BOUND) + '"')
        assert store.after_commit("ada", waiter("first"))
        store.journal_begin("ada", second, '"two"')  # the next turn, before the commit
        store.journal_step("ada", second, 0, '"small"')
        assert store.after_commit("ada", waiter("second"))
        await both.wait()
        assert isinstance(told["first"], StoreError), told
        assert "journal step 0 of turn" in str(told["first"])
        assert told["second"] is None, told["second"]
        assert sorted(t.turn_id for t in await store.unfinished_turns()) == sorted([first, second])
        await store.flush("ada")  # told already: nothing more to say
