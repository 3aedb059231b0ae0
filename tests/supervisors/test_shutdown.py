"""Graceful shutdown: reverse start order, one grace deadline, then cancellation."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchStopped,
    Chat,
    RunEnd,
    RunFailed,
    ScriptedModel,
    Session,
    TurnCancelled,
)
from tests.helpers import Gate, Recorder, echo_model


def slow(seconds: float) -> ScriptedModel:
    """A model that takes ``seconds`` (virtual time) per reply."""
    return ScriptedModel(lambda request: "done", delay=seconds)


def observed(**options: Any) -> tuple[Session, Recorder]:
    session = Session(**options)
    recorder = Recorder()
    session.observe(handler=recorder.dispatch)
    return session, recorder


async def test_running_turns_finish_within_the_grace_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A turn that ends before the deadline completes normally; shutdown waits for it."""
    session, recorder = observed(grace=5.0)
    async with session:
        branch = await session.spawn(Branch(name="a", chat_model=slow(3)))
        reply = await pride.send(branch, Chat("x"))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
    assert trio.current_time() - started == pytest.approx(3.0)
    assert await reply.result() == "done"
    assert recorder.kinds()[-2:] == ["RunEnd", "BranchStopped"]


async def test_turns_past_the_deadline_are_cancelled_with_shutdown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At the deadline the turn is cancelled: RunFailed sent, caller gets TurnCancelled."""
    session, recorder = observed(grace=5.0)
    async with session:
        branch = await session.spawn(Branch(name="a", chat_model=slow(100)))
        reply = await pride.send(branch, Chat("x"))
        queued = await pride.send(branch, Chat("queued"))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
    assert trio.current_time() - started == pytest.approx(5.0)
    with pytest.raises(TurnCancelled) as info:
        await reply.result()
    assert info.value.reason == "shutdown"
    with pytest.raises(pride.BranchClosed):
        await queued.result()
    failed = recorder.of(RunFailed)
    assert len(failed) == 1 and failed[0].cancelled
    assert recorder.of(BranchStopped)[0].reason == "shutdown"


async def test_children_share_one_deadline(autojump_clock: trio.testing.MockClock) -> None:
    """Two members with endless turns stop within one grace period, last started first."""
    session, recorder = observed(grace=5.0)
    async with session:
        for name in ("first", "second"):
            branch = await session.spawn(Branch(name=name, chat_model=slow(100)))
            await pride.send(branch, Chat("x"))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
    assert trio.current_time() - started == pytest.approx(5.0)
    assert [s.branch_name for s in recorder.of(BranchStopped)] == ["second", "first"]
    assert [s.cancelled for s in recorder.of(RunFailed)] == [True, True]


async def test_stop_is_idempotent_and_a_shorter_grace_brings_the_deadline_forward(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A second stop(grace=0) while a long stop is waiting ends it at once."""
    session, _ = observed()
    async with session:
        branch = await session.spawn(Branch(chat_model=slow(100)))
        reply = await pride.send(branch, Chat("x"))
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.stop, 60.0)
            await trio.sleep(1)
            await session.stop(grace=0)
        assert trio.current_time() - started == pytest.approx(1.0)
        await session.stop()
        assert not session.running
    with pytest.raises(TurnCancelled):
        await reply.result()


async def test_leaving_with_an_exception_stops_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A failing block does not wait for the grace period; its exception comes out bare."""
    session, recorder = observed(grace=30.0)
    with pytest.raises(KeyError):
        async with session:
            branch = await session.spawn(Branch(chat_model=slow(100)))
            reply = await pride.send(branch, Chat("x"))
            await trio.testing.wait_all_tasks_blocked()
            started = trio.current_time()
            raise KeyError("user bug")
    assert trio.current_time() == pytest.approx(started)
    with pytest.raises(TurnCancelled):
        await reply.result()
    assert recorder.kinds()[-1] == "BranchStopped"


async def test_stop_called_from_a_members_turn_completes() -> None:
    """An operation stopping its own session: the shutdown goes on without it."""
    async with Session(grace=0.0) as session:

        async def quit_all(branch: Branch) -> None:
            await session.stop()

        session.register_operation("quit_all", quit_all)
        await session.spawn(Branch(name="a", chat_model=echo_model()))
        other = await session.spawn(Branch(name="b", chat_model=echo_model()))
        with pytest.raises(TurnCancelled):
            await session.run_operation("quit_all")
        await trio.testing.wait_all_tasks_blocked()
        assert not session.running and not other.running


async def test_cancelling_the_session_answers_everything() -> None:
    """An outer cancel scope: the running turn ends with RunFailed, queued work BranchClosed."""
    gate = Gate()
    session, recorder = observed()
    with trio.CancelScope() as outer:
        async with session:
            branch = await session.spawn(Branch(chat_model=gate.model))
            reply = await pride.send(branch, Chat("busy"))
            queued = await pride.send(branch, Chat("queued"))
            await gate.started.wait()
            outer.cancel()
            await trio.sleep_forever()
    with pytest.raises(TurnCancelled):
        await reply.result()
    with pytest.raises(pride.BranchClosed):
        await queued.result()
    assert recorder.of(RunFailed)[0].cancelled
    assert not recorder.of(RunEnd)


async def test_a_spawn_while_the_session_stops_is_refused(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A member spawned while a shutdown is under way is refused with RuntimeError,
    not started into a nursery about to be cancelled (then killed with no shutdown)."""
    session, recorder = observed(grace=5.0)
    async with session:
        busy = await session.spawn(Branch(name="busy", chat_model=slow(3)))
        await pride.send(busy, Chat("x"))
        await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.stop)
            await trio.testing.wait_all_tasks_blocked()  # the shutdown waits on busy's turn
            with pytest.raises(RuntimeError, match="stopping"):
                await session.spawn(Branch(name="late", chat_model=echo_model()))
            with pytest.raises(RuntimeError, match="not running"):  # the shutdown is over
                await session.spawn_session("late-session")
    assert [s.branch_name for s in recorder.of(BranchStopped)] == ["busy"]
    assert "without a shutdown" not in caplog.text


@pytest.mark.parametrize("where", ["hook", "subscriber", "child subscriber"])
async def test_stop_called_from_a_lifecycle_handler_does_not_wait_on_itself(
    where: str, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A lifecycle hook or subscriber (of this session or one below it) stopping the
    session: the stop is asked and the handler goes on; it no longer waits for a stop
    that waits for the handler, until FINALIZE_GRACE cancelled it (10 s, logged)."""
    session, recorder = observed()
    returned = trio.Event()

    async def stop_it(_: Any) -> None:
        await session.stop()
        returned.set()

    async with session:
        target = session
        if where == "child subscriber":
            target = await session.spawn_session("child")
        if where == "hook":
            target.hooks.on("branch_start", stop_it)
        else:
            target.observe(pride.BranchStarted, handler=stop_it)
        started = trio.current_time()
        await target.spawn(Branch(name="a", chat_model=echo_model()))
        with trio.fail_after(60):  # the handler's stop returns (it was cancelled at 10 s)
            await returned.wait()
    assert trio.current_time() == pytest.approx(started)
    assert "took over" not in caplog.text
    assert not session.running
    assert [s.reason for s in recorder.of(BranchStopped) if s.branch_name == "a"] == ["shutdown"]


async def test_including_a_standalone_branch_while_the_session_stops_leaves_it_serving(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """``include`` of a running standalone branch during a shutdown is refused before
    the takeover: the branch goes on serving standalone. It was suspended first and
    then refused (or started into the dying nursery): nobody served it, and every
    send to it waited for good."""
    session = Session(grace=5.0)
    async with Branch(name="solo", chat_model=echo_model()) as solo:
        async with session:
            busy = await session.spawn(Branch(name="busy", chat_model=slow(3)))
            await pride.send(busy, Chat("x"))
            await trio.testing.wait_all_tasks_blocked()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.stop)
                await trio.testing.wait_all_tasks_blocked()  # the shutdown waits on busy
                with pytest.raises(RuntimeError, match="stopping"):
                    await session.include(solo)
        with trio.fail_after(60):
            assert await solo.chat_and_record("still there") == "re: still there"


@pytest.mark.parametrize("where", ["grandchild subscriber", "grandchild hook", "root subscriber"])
async def test_stop_of_a_session_two_levels_up_from_a_lifecycle_handler_returns_at_once(
    where: str, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A lifecycle handler of a grandchild session (or the root's, seeing the
    grandchild's signal) that stops the root: the stop is asked and the handler goes
    on at once, as one level up did already; the whole tree stops."""
    session, recorder = observed()
    returned = trio.Event()

    async def stop_it(_: Any) -> None:
        await session.stop()
        returned.set()

    async with session:
        child = await session.spawn_session("child")
        grandchild = await child.spawn_session("grandchild")
        target = session if where == "root subscriber" else grandchild
        if where == "grandchild hook":
            target.hooks.on("branch_start", stop_it)
        else:
            target.observe(pride.BranchStarted, handler=stop_it)
        started = trio.current_time()
        await grandchild.spawn(Branch(name="a", chat_model=echo_model()))
        with trio.fail_after(60):
            await returned.wait()
        assert trio.current_time() == pytest.approx(started)
    assert "took over" not in caplog.text
    assert not session.running and not child.running and not grandchild.running
    assert [s.reason for s in recorder.of(BranchStopped) if s.branch_name == "a"] == ["shutdown"]
