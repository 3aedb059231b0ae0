"""What a turn leaves for the garbage collector: nothing.

A reference cycle in a turn's runtime objects (a meter listing itself among
the accounts it counts on did, issue 15) keeps every finished turn's objects
alive until a collection finds them: the collector then runs more often, and
with 1,000 branches each collection walks far more. A branch's call log keeps
up to 1,000 records, so a record the collector must keep tracking is one it
walks on every full collection.
"""

from __future__ import annotations

import gc
import logging
import traceback
import weakref
from collections import deque
from pathlib import Path

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    Budget,
    BudgetExceeded,
    Call,
    Chat,
    ChatAndRecord,
    Run,
    RunFailed,
    ScriptedModel,
    Session,
    ask,
    stream,
)
from tests.helpers import saving_garbage


def _pride_objects(objects: list[object]) -> list[str]:
    return sorted({type(o).__qualname__ for o in objects if type(o).__module__.startswith("pride")})


async def test_a_turn_leaves_no_reference_cycle() -> None:
    branch = Branch(chat_model=ScriptedModel(lambda request: "ok"))
    async with branch:
        await ask(branch, Chat("warm up"))
        with saving_garbage() as garbage:
            for _ in range(20):
                assert await ask(branch, Chat("hi")) == "ok"
    assert _pride_objects(garbage) == []


async def test_a_session_member_turn_leaves_no_reference_cycle() -> None:
    async with Session() as session:
        member = await session.spawn(Branch(chat_model=ScriptedModel(lambda request: "ok")))
        await ask(member, Chat("warm up"))
        with saving_garbage() as garbage:
            for _ in range(20):
                assert await ask(member, Chat("hi")) == "ok"
    assert _pride_objects(garbage) == []


async def test_a_nested_command_with_its_own_budget_leaves_no_reference_cycle() -> None:
    # A nested command's meter counts on the turn's meter and everything above it.
    branch = Branch(chat_model=ScriptedModel(lambda request: "outer"))
    inner = ScriptedModel(lambda request: "inner")

    async def asks_nested(request: object) -> str:
        nested = Chat("in", chat_model=inner, budget=Budget(max_model_calls=3))
        return str(await ask(branch, nested))

    branch.chat_model = ScriptedModel(asks_nested)
    async with branch:
        await ask(branch, Chat("warm up"))
        with saving_garbage() as garbage:
            for _ in range(5):
                assert await ask(branch, Chat("hi")) == "inner"
    assert _pride_objects(garbage) == []


async def test_call_log_records_are_not_tracked_once_collected() -> None:
    branch = Branch(chat_model=ScriptedModel(lambda request: "ok"))
    async with branch:
        for _ in range(3):
            await ask(branch, Chat("hi"))
    gc.collect()
    # What the log holds: a container of records, each a plain tuple.
    holders = [held for held in gc.get_referents(branch.logs) if isinstance(held, list | deque)]
    records = [record for holder in holders for record in holder]
    assert len(records) == 3
    assert not any(gc.is_tracked(record) for record in records)
    entries = list(branch.logs)
    assert [entry.turn_id is not None for entry in entries] == [True, True, True]
    assert all(entry.detail == {} for entry in entries)


def _fails(request: object) -> str:
    raise RuntimeError("model down")


async def test_an_ask_that_raises_leaves_no_reference_cycle() -> None:
    # The exception's traceback holds the frames it passed through (the caller's
    # ask and Reply.result among them); none of them may hold it back.
    branch = Branch(chat_model=ScriptedModel(_fails))
    async with branch:
        with pytest.raises(RuntimeError):
            await ask(branch, Chat("warm up"))
        with saving_garbage() as garbage:
            for _ in range(5):
                try:
                    await ask(branch, Chat("hi"))
                except RuntimeError as exc:
                    frames = [frame.name for frame in traceback.extract_tb(exc.__traceback__)]
                    assert "ask" in frames and "_fails" in frames  # the whole story, still
                    del exc
            with pytest.raises(RuntimeError):
                async with stream(branch, Run("hi")) as items:
                    async for _ in items:
                        pass
    assert _pride_objects(garbage) == []
    assert not any(isinstance(found, RuntimeError) for found in garbage)


async def test_a_nested_stream_that_raises_leaves_no_reference_cycle() -> None:
    branch = Branch(chat_model=ScriptedModel(_fails))

    async def streams_nested(of: Branch) -> str:
        try:
            async with stream(of, Run("inner")) as items:
                async for _ in items:
                    pass
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    branch.register_operation("streams_nested", streams_nested)
    async with branch:
        assert await ask(branch, Call("streams_nested")) == "model down"
        with saving_garbage() as garbage:
            for _ in range(5):
                assert await ask(branch, Call("streams_nested")) == "model down"
    assert _pride_objects(garbage) == []


async def test_a_failed_turn_of_a_stored_branch_leaves_no_reference_cycle(tmp_path: Path) -> None:
    # Ended by its commit (watched, so through a hand-over) or at once (recorded
    # nothing to commit): either way the failure lets go of the turn's frames.
    async with Session(store=tmp_path / "store.db") as session:
        watched: list[object] = []
        session.observe(RunFailed, handler=watched.append)
        member = await session.spawn(Branch(name="ada", chat_model=ScriptedModel(_fails)))
        with pytest.raises(RuntimeError):
            await ask(member, ChatAndRecord("warm up"))
        with saving_garbage() as garbage:
            for command in (ChatAndRecord("recorded"), Chat("not recorded")):
                for _ in range(3):
                    with pytest.raises(RuntimeError):
                        await ask(member, command)
        assert len(watched) == 7
        watched.clear()
    assert _pride_objects(garbage) == []


async def test_an_idle_actor_holds_no_finished_envelope() -> None:
    """Once a turn is served and answered, nothing of the actor keeps its envelope
    (nor, through it, its command and result) while it waits for the next one:
    an idle member holds only its own state."""
    async with Session() as session:
        member = await session.spawn(Branch(chat_model=ScriptedModel(lambda request: "ok")))
        command = Chat("hi")
        served = weakref.ref(command)
        assert await ask(member, command) == "ok"
        del command
        await trio.testing.wait_all_tasks_blocked()
        assert served() is None


async def test_an_ask_over_budget_leaves_no_reference_cycle() -> None:
    # The turn's meter keeps why it stopped, and the frames the BudgetExceeded
    # passed (the turn's, the meter's own) hold the meter.
    branch = Branch(chat_model=ScriptedModel(lambda request: "ok"))
    spent = Budget(max_model_calls=0)
    async with branch:
        with pytest.raises(BudgetExceeded):
            await ask(branch, Chat("warm up", budget=spent))
        with saving_garbage() as garbage:
            for _ in range(3):
                with pytest.raises(BudgetExceeded):
                    await ask(branch, Chat("hi", budget=spent))
    assert _pride_objects(garbage) == []


# A stopped branch's objects (its conversation, models, logs, 36 objects and up)
# must leave with the last reference to it: a cycle between the branch and its
# actor kept them until a full collection, which a process of many passivated
# branches runs rarely and pays for by walking everything still alive.


async def test_a_stopped_standalone_branch_is_freed_by_reference_counting() -> None:
    with saving_garbage():  # what a collection finds is kept: only counting frees
        branch = Branch(chat_model=ScriptedModel(lambda request: "ok"))
        async with branch:
            assert await ask(branch, Chat("hi")) == "ok"
        gone = weakref.ref(branch)
        del branch
        assert gone() is None


async def test_a_removed_member_is_freed_by_reference_counting(tmp_path: Path) -> None:
    async with Session(store=tmp_path / "store.db") as session:
        with saving_garbage():
            member = await session.spawn(Branch(chat_model=ScriptedModel(lambda r: "ok")))
            assert await ask(member, ChatAndRecord("hi")) == "ok"
            await session.remove(member)
            gone = weakref.ref(member)
            del member
            assert gone() is None


async def test_a_crashed_temporary_member_once_removed_is_freed_by_reference_counting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The crash is logged with the Escalate, whose frames hold the branch; pytest
    # keeps every record it captures (a handler that formats and drops them does not).
    caplog.set_level(logging.ERROR, logger="pride.session")

    def escalates(request: object) -> str:
        raise pride.Escalate("not to be trusted")

    async with Session() as session:
        with saving_garbage():
            member = await session.spawn(
                Branch(chat_model=ScriptedModel(escalates)), restart="temporary"
            )
            try:  # (pytest.raises would keep the error, whose frames hold the branch)
                await ask(member, Chat("hi"))
            except pride.Escalate:
                pass
            else:
                pytest.fail("the turn did not escalate")
            await trio.testing.wait_all_tasks_blocked()  # its actor has left, not restarted
            await session.remove(member)
            gone = weakref.ref(member)
            del member
            assert gone() is None
