"""An error pride raises is not held by the frames it was raised through.

A frame's locals live as long as the frame, and an exception's traceback
holds every frame it passed: a frame still holding the exception (in a
local, a list, an attribute) makes a reference cycle, so the exception, its
frames and all they reach (a flow run, a turn, a branch's objects) wait for
a garbage collection instead of going with their last reference. Each test
takes an error through the public API and looks at its traceback's frames;
tests/actors/test_garbage.py proves the same of asks with the collector.
"""

from __future__ import annotations

import gc
import sqlite3
import weakref
from pathlib import Path

import pytest
import trio
import trio.testing

from pride import (
    Branch,
    Call,
    Chat,
    Escalate,
    Flow,
    FlowNodeError,
    ScriptedModel,
    ServerError,
    Session,
    StoreError,
    ask,
)
from pride.llm import RetryPolicy
from pride.messages import ActionCall
from pride.tools import ActionManager
from tests.flows.support import team
from tests.helpers import frames_holding, is_pride_source


def _rename(path: Path, old: str, new: str) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(f"ALTER TABLE {old} RENAME TO {new}")
        db.commit()
    finally:
        db.close()


async def test_the_check_reads_pride_s_frames_and_only_those(tmp_path: Path) -> None:
    """Which frames are pride's is told by the imported package's directory, not by
    the path's words: in a checkout named ``pride`` every test file's path holds a
    ``/pride/`` too, and a test's frame holding the error (as pytest's rewritten
    asserts do) must not count as pride's."""
    clone = tmp_path / "pride"
    (clone / "tests").mkdir(parents=True)
    (clone / "tests" / "test_x.py").write_text("")
    assert not is_pride_source(clone / "tests" / "test_x.py")
    assert not is_pride_source(__file__)
    scripted = Branch(chat_model=ScriptedModel(lambda request: RuntimeError("scripted")))
    async with scripted:
        with pytest.raises(RuntimeError, match="scripted") as raised:
            await ask(scripted, Chat("hi"))
    held = raised.value  # this test's own frame holds the error: not pride's
    assert any(is_pride_source(entry.path) for entry in raised.traceback)
    assert frames_holding(held) == []


async def test_a_flow_stream_ending_on_the_runner_s_error(tmp_path: Path) -> None:
    """The runner's own error (a durable run whose plan cannot be committed), raised
    by the ``async for`` after the last event."""
    path = tmp_path / "store.db"
    async with team("a", store=path) as (session, _):
        flow = Flow("doomed")
        flow.add("a", Chat("one"), name="one")
        assert (await session.flow(flow)).ok  # the flow tables exist
        _rename(path, "flows", "hidden")
        with pytest.raises(StoreError) as raised:
            async with session.flow_stream(flow) as events:
                async for _ in events:
                    pass
        _rename(path, "hidden", "flows")
        assert "__anext__" in [entry.name for entry in raised.traceback]
        assert frames_holding(raised.value) == []


async def test_a_failed_node_s_result_and_raise_for_failure() -> None:
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Chat("fine"), name="fine")
        flow.add("a", Chat("never"), depends_on="fine", when=lambda up: 1 / 0, name="bad")
        result = await session.flow(flow)
    assert result.outcomes["bad"] == "failed"
    with pytest.raises(FlowNodeError) as read:
        result["bad"]
    assert frames_holding(read.value) == []
    with pytest.raises(ZeroDivisionError) as raised:
        result.raise_for_failure()
    assert frames_holding(raised.value) == []


async def test_a_scripted_error_and_a_provider_error_after_retries() -> None:
    fast = RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0)
    scripted = Branch(chat_model=ScriptedModel(lambda request: RuntimeError("scripted")))
    retried = Branch(
        chat_model=ScriptedModel(lambda request: ServerError("busy", status=503), retry=fast)
    )
    async with scripted, retried:
        with pytest.raises(RuntimeError, match="scripted") as first:
            await ask(scripted, Chat("hi"))
        with pytest.raises(ServerError, match="busy") as second:
            await ask(retried, Chat("hi"))
    assert frames_holding(first.value) == []
    assert frames_holding(second.value) == []


async def test_a_tool_batch_that_escalates() -> None:
    """Two concurrent calls, one escalating: ``execute`` raises that one, not a group."""

    async def fine() -> str:
        return "fine"

    async def breaks() -> str:
        raise Escalate("state is gone")

    manager = ActionManager()
    manager.register([fine, breaks])
    with pytest.raises(Escalate) as raised:
        await manager.execute([ActionCall("fine"), ActionCall("breaks")], strategy="concurrent")
    assert frames_holding(raised.value) == []


class _Scripted(RuntimeError):
    """A model's error that a weak reference can watch (a RuntimeError cannot be)."""


async def test_an_error_goes_with_its_last_reference() -> None:
    """What the frames' check stands for: without the collector, the error is freed."""
    branch = Branch(chat_model=ScriptedModel(lambda request: _Scripted("scripted")))
    async with branch:
        gc.collect()
        gc.disable()
        try:
            try:
                await ask(branch, Chat("hi"))
            except _Scripted as exc:
                caught = weakref.ref(exc)
            assert caught() is None
        finally:
            gc.enable()


class _Raised(Exception):
    """An error of the ``async with`` block itself."""


async def test_an_error_leaving_a_session_or_a_branch_block() -> None:
    """The block's own error goes through the object's ``__aexit__`` and its private
    nursery, which reduce the nursery's group to it: none of them keeps it."""
    with pytest.raises(_Raised) as session_block:
        async with Session():
            raise _Raised("in the session's block")
    assert frames_holding(session_block.value) == []
    with pytest.raises(_Raised) as branch_block:
        async with Branch(chat_model=ScriptedModel(["unused"])):
            raise _Raised("in the branch's block")
    assert frames_holding(branch_block.value) == []


async def test_an_error_leaving_a_flow_stream_block() -> None:
    async with team("a") as (session, _):
        flow = Flow()
        flow.add("a", Chat("one"), name="one")
        with pytest.raises(_Raised) as raised:
            async with session.flow_stream(flow) as events:
                async for _ in events:
                    raise _Raised("in the stream's block")
    assert frames_holding(raised.value) == []


async def test_a_member_s_crash() -> None:
    """An Escalate crashes the member's actor (re-raised there for its supervisor) and
    is its caller's answer: the actor's frames let go of it."""

    async def escalates(branch: Branch) -> None:
        raise Escalate("state is gone")

    async with Session() as session:
        session.register_operation("escalates", escalates)
        member = await session.spawn(Branch(chat_model=ScriptedModel(["unused"])))
        with pytest.raises(Escalate) as raised:
            await ask(member, Call("escalates"))
        await trio.testing.wait_all_tasks_blocked()  # restarted meanwhile
    assert frames_holding(raised.value) == []
