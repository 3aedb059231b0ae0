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
from collections import deque

from pride import Branch, Budget, Chat, ScriptedModel, Session, ask
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
