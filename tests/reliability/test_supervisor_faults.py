"""Supervisor faults: crash storms, crashes during streams, and failing child sessions."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchRestarted,
    Call,
    ChatAndRecord,
    Escalate,
    Run,
    Session,
    SessionFailed,
    SupervisorFailed,
    TurnCancelled,
)
from pride.llm import ToolCall
from tests.helpers import echo_model
from tests.reliability.invariants import InvariantChecker


async def crash(branch: Branch, reason: str = "corrupt") -> None:
    raise Escalate(reason)


def watched(checker: InvariantChecker, **options: object) -> Session:
    session = Session(**options)  # type: ignore[arg-type]
    session.register_operation("crash", crash)
    session.observe(handler=checker.dispatch)
    return session


async def test_crashes_up_to_the_intensity_limit_restart_and_keep_the_conversation(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """max_restarts crashes within the period: each caller gets Escalate, the branch comes
    back every time with its history and queued work; spread out, crashes never fail."""
    checker = InvariantChecker()
    with checker.envelopes():
        async with watched(checker, max_restarts=3, period=5.0) as session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            for round_ in range(3):
                for index in range(3):
                    await branch.chat_and_record(f"{round_}.{index}")
                    queued = await pride.send(branch, ChatAndRecord(f"queued {round_}.{index}"))
                    with pytest.raises(Escalate):
                        await pride.ask(branch, Call("crash"))  # served after `queued`
                    assert await queued.result() == f"re: queued {round_}.{index}"
                await trio.sleep(6)  # the window slides: the count starts again
            assert session.statistics().restarts == 9
    checker.check(branch, quiescent=True)
    assert len(checker.signals) > 0 and not [
        s for s in checker.signals if isinstance(s, SessionFailed)
    ]
    assert len(branch.messages) == 36


async def test_one_crash_past_the_limit_fails_the_session(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The crash after max_restarts fails the session: SessionFailed, every caller
    answered, SupervisorFailed from `async with` caused by the last crash."""
    checker = InvariantChecker()
    with checker.envelopes():
        with pytest.raises(SupervisorFailed) as failed:
            async with watched(checker, max_restarts=2, period=60.0) as session:
                branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
                other = await session.spawn(Branch(name="b", chat_model=echo_model()))
                for index in range(3):
                    with pytest.raises(Escalate):
                        await session.ask("a", Call("crash", reason=f"crash {index}"))
                    await trio.testing.wait_all_tasks_blocked()
                await trio.sleep_forever()  # the failure cancels the block
    assert isinstance(failed.value.__cause__, Escalate)
    assert str(failed.value.__cause__) == "crash 2"
    checker.check(branch, other, quiescent=True)
    assert [s.cause for s in checker.signals if isinstance(s, SessionFailed)] == [
        "Escalate: crash 2"
    ]
    assert not branch.running and not other.running


def tool_that_escalates() -> object:
    async def explode() -> str:
        """Say the branch's state is not to be trusted."""
        raise Escalate("tool lost its footing")

    return explode


async def test_a_crash_during_a_stream_reaches_the_consumer_and_the_branch_restarts() -> None:
    """A tool escalating mid-stream: the consumer's loop raises Escalate after the items
    produced so far; the supervisor restarts the branch, which serves the next turn."""
    checker = InvariantChecker()
    model = pride.ScriptedModel(
        lambda request: ToolCall("explode", {}) if request.messages[-1]["content"] == "go" else "ok"
    )
    with checker.envelopes():
        async with watched(checker) as session:
            branch = await session.spawn(
                Branch(name="a", chat_model=model, tools=[tool_that_escalates()])
            )
            seen = []
            with pytest.raises(Escalate, match="footing"):
                async with pride.stream(branch, Run("go")) as items:
                    async for item in items:
                        seen.append(type(item).__name__)
            assert seen == ["Instruction", "ActionRequest"]
            assert await branch.chat_and_record("after") == "ok"
            assert [s.branch_name for s in checker.signals if isinstance(s, BranchRestarted)] == [
                "a"
            ]
    checker.check(branch, quiescent=True)


async def test_a_sibling_streaming_through_a_one_for_all_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """one_for_all: a sibling's running stream ends with TurnCancelled('restart'); its
    queued work survives the restart and is served after it."""
    checker = InvariantChecker()

    async def slow(request: pride.llm.ModelRequest) -> str:
        await trio.sleep(100)
        return "slow"

    with checker.envelopes():
        async with watched(checker, strategy="one_for_all") as session:
            crasher = await session.spawn(Branch(name="crasher", chat_model=echo_model()))
            sibling = await session.spawn(
                Branch(name="sibling", chat_model=pride.ScriptedModel(slow, chunk_size=2))
            )
            outcome: list[BaseException] = []

            async def consume() -> None:
                try:
                    async with pride.stream(sibling, ChatAndRecord("streaming")) as items:
                        async for _ in items:
                            pass
                except TurnCancelled as exc:
                    outcome.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await trio.testing.wait_all_tasks_blocked()
                queued = await pride.send(sibling, ChatAndRecord("queued"))
                with pytest.raises(Escalate):
                    await pride.ask(crasher, Call("crash"))
            assert [exc.reason for exc in outcome] == ["restart"]
            assert await queued.result() == "slow"
    checker.check(crasher, sibling, quiescent=True)
    assert [m.text for m in sibling.messages] == ["queued", "slow"]


async def test_a_child_session_failing_is_restarted_by_its_parent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A child session past its intensity fails; the parent restarts it with its branches
    and their conversations; failing again past the parent's limit fails the parent."""
    checker = InvariantChecker()
    with checker.envelopes():
        with pytest.raises(SupervisorFailed) as failed:
            async with watched(checker, name="parent", max_restarts=1, period=60.0) as parent:
                child = await parent.spawn_session("child", max_restarts=0)
                child.register_operation("crash", crash)
                branch = await child.spawn(Branch(name="a", chat_model=echo_model()))
                await branch.chat_and_record("before")
                for expected_restarts in (1, 2):
                    with pytest.raises(Escalate):
                        await pride.ask(branch, Call("crash"))
                    await trio.testing.wait_all_tasks_blocked()
                    if expected_restarts == 1:  # the parent brought the child back
                        assert await branch.chat_and_record("after") == "re: after"
                await trio.sleep_forever()
    assert isinstance(failed.value.__cause__, SupervisorFailed)  # the child's failure
    checker.check(branch, quiescent=True)
    assert [m.text for m in branch.messages] == ["before", "re: before", "after", "re: after"]
    assert [s.session_name for s in checker.signals if isinstance(s, SessionFailed)] == [
        "child",
        "child",
        "parent",
    ]
