"""Cancellation storms: callers giving up at every point leave every branch consistent."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Chat, ChatAndRecord, Detach, Session, Stop
from tests.helpers import Gate, echo_model
from tests.reliability.invariants import InvariantChecker


async def test_issue10_a_cancelled_priority_send_queues_nothing() -> None:
    """send() of a priority command that raises Cancelled has not queued it (trio's rule:
    a cancelled operation did not happen); it used to be applied anyway."""
    async with Session() as session:
        branch = await session.spawn(Branch(chat_model=echo_model()))
        with trio.CancelScope() as scope:
            scope.cancel()
            await pride.send(branch, Detach())
        await trio.testing.wait_all_tasks_blocked()
        assert branch.owner_id == session.id  # the Detach never arrived
        with trio.CancelScope() as scope:
            scope.cancel()
            await pride.send(branch, Stop())
        await trio.testing.wait_all_tasks_blocked()
        assert branch.running
        assert await branch.chat("still attached") == "re: still attached"


async def test_a_storm_of_cancelled_callers(autojump_clock: trio.testing.MockClock) -> None:
    """Forty callers, each cancelled at a different moment (queued, running, finalising):
    every turn that started ends once, nothing half-recorded, and the branch serves on."""
    checker = InvariantChecker()

    async def slow(request: pride.llm.ModelRequest) -> str:
        await trio.sleep(1)
        return "slow reply"

    with checker.envelopes():
        async with Branch(chat_model=pride.ScriptedModel(slow), observer=checker) as branch:
            checker.baseline(branch)
            async with trio.open_nursery() as nursery:
                for index in range(40):

                    async def caller(index: int = index) -> None:
                        with trio.move_on_after(index * 0.37):
                            await branch.chat_and_record(f"turn {index}")

                    nursery.start_soon(caller)
            assert await branch.chat_and_record("last") == "slow reply"
    checker.check(branch, quiescent=True)
    # Each recorded exchange is whole: an instruction followed by its reply.
    roles = [message.role for message in branch.messages]
    assert roles == ["user", "assistant"] * (len(roles) // 2)


async def test_callers_cancelled_while_the_mailbox_is_full(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Senders blocked on a full mailbox and cancelled queue nothing; the rest are served."""
    checker = InvariantChecker()
    gate = Gate()
    with checker.envelopes():
        async with Branch(chat_model=gate.model, observer=checker, mailbox_size=2) as branch:
            first = await pride.send(branch, Chat("first"))
            await gate.started.wait()
            queued = [await pride.send(branch, Chat(f"q{i}")) for i in range(2)]
            with trio.move_on_after(5) as blocked:
                await pride.send(branch, Chat("never queued"))
            assert blocked.cancelled_caught
            for text in ("first", "q0", "q1"):
                gate.release(text)
            assert [await r.result() for r in (first, *queued)] == [
                "reply to first",
                "reply to q0",
                "reply to q1",
            ]
    checker.check(branch, quiescent=True)
    assert [text for kind, text in gate.events if kind == "start"] == ["first", "q0", "q1"]


@pytest.mark.parametrize("when", ["queued", "running"])
async def test_a_cancelled_stream_consumer(
    when: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A stream consumer cancelled before or during its turn: the turn never starts or
    ends with RunFailed(cancelled); nothing of it is recorded."""
    checker = InvariantChecker()
    gate = Gate()
    with checker.envelopes():
        async with Branch(chat_model=gate.model, observer=checker) as branch:
            checker.baseline(branch)
            blocker = await pride.send(branch, Chat("blocker")) if when == "queued" else None
            with trio.move_on_after(3):
                async with pride.stream(branch, ChatAndRecord("streamed")) as items:
                    async for _ in items:
                        pass
            if blocker is not None:
                gate.release("blocker")
                await blocker.result()
            gate.release("after")
            assert await branch.chat("after") == "reply to after"
    checker.check(branch, quiescent=True)
    started = [text for kind, text in gate.events if kind == "start"]
    assert "streamed" not in started if when == "queued" else "streamed" in started
    assert len(branch.messages) == 0


async def test_issue14_the_shutdown_log_counts_only_the_envelopes_it_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Queued envelopes whose callers already gave up are not counted as answered
    with BranchClosed at shutdown; the ones still waiting are, and get it."""
    gate = Gate()
    async with Session() as session:
        branch = await session.spawn(Branch(name="busy", chat_model=gate.model))
        running = await pride.send(branch, Chat("running"))
        await gate.started.wait()
        queued = [await pride.send(branch, Chat(f"queued {n}")) for n in range(5)]
        for reply in queued[:3]:
            reply.cancel()
        with caplog.at_level("INFO", logger="pride"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.stop)
                await trio.testing.wait_all_tasks_blocked()
                gate.release("running")  # the turn ends, the actor takes the Stop
    assert await running.result() == "reply to running"
    counts = [r.getMessage() for r in caplog.records if "queued envelopes" in r.getMessage()]
    assert counts == ["branch 'busy': answered 2 queued envelopes with BranchClosed"]
    for reply in queued[3:]:
        with pytest.raises(pride.BranchClosed):
            await reply.result()
