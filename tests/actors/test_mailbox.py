"""The mailbox: backpressure, send_nowait, stopping, and bad input."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchClosed,
    BranchNotRunning,
    Chat,
    MailboxFull,
    RunStart,
    Stop,
)
from tests.helpers import Gate, Recorder, echo_model


async def test_verb_on_a_branch_that_never_started() -> None:
    """Using a branch whose actor is not running says how to start it."""
    branch = Branch(chat_model=echo_model())
    with pytest.raises(BranchNotRunning) as info:
        await branch.chat("hi")
    assert "async with" in str(info.value)
    assert "session.spawn" in str(info.value)
    with pytest.raises(BranchNotRunning):
        pride.send_nowait(branch, Chat("hi"))


async def test_send_nowait_raises_mailbox_full() -> None:
    """A full bounded mailbox makes send_nowait raise MailboxFull."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=2) as branch:
        running = pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        queued = [pride.send_nowait(branch, Chat(f"q{i}")) for i in range(2)]
        with pytest.raises(MailboxFull) as info:
            pride.send_nowait(branch, Chat("overflow"))
        assert info.value.capacity == 2
        for text in ("running", "q0", "q1"):
            gate.release(text)
        for reply in (running, *queued):
            await reply.result()


async def test_send_waits_for_room() -> None:
    """Plain send blocks while the mailbox is full and proceeds when room frees."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=1) as branch:
        await pride.send(branch, Chat("running"))
        await gate.started.wait()
        await pride.send(branch, Chat("queued"))
        sent = []

        async def third() -> None:
            sent.append(await pride.send(branch, Chat("third")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(third)
            await trio.testing.wait_all_tasks_blocked()
            assert sent == []  # backpressure: waiting for room
            gate.release("running")
            gate.release("queued")
            gate.release("third")
        assert await sent[0].result() == "reply to third"


async def test_queued_envelopes_get_branch_closed_on_stop() -> None:
    """Stopping answers every queued envelope with BranchClosed; none is dropped silently."""
    gate = Gate()
    recorder = Recorder()
    async with Branch(chat_model=gate.model, observer=recorder) as branch:
        running = await pride.send(branch, Chat("running"))
        await gate.started.wait()
        queued = [await pride.send(branch, Chat(f"q{i}")) for i in range(3)]
        stop = await pride.send(branch, Stop())
        gate.release("running")
        assert await running.result() == "reply to running"
        await stop.result()
        for reply in queued:
            with pytest.raises(BranchClosed):
                await reply.result()
        with pytest.raises(BranchClosed):
            await pride.send(branch, Chat("late"))
    assert len(recorder.of(RunStart)) == 1


async def test_leaving_the_block_closes_the_branch() -> None:
    """After `async with` exits, the branch refuses work with BranchClosed."""
    async with Branch(chat_model=echo_model()) as branch:
        assert await branch.chat("hi") == "re: hi"
    assert not branch.running
    with pytest.raises(BranchClosed):
        await branch.chat("again")


async def test_branch_can_be_started_again() -> None:
    """A stopped branch can run again with its conversation intact."""
    branch = Branch(chat_model=echo_model())
    async with branch:
        await branch.chat_and_record("one")
    async with branch:
        await branch.chat_and_record("two")
    assert len(branch.messages) == 4


async def test_wrong_command_type_is_rejected_and_actor_keeps_serving() -> None:
    """A non-command raises TypeError naming what was wrong; the branch still answers."""
    async with Branch(chat_model=echo_model()) as branch:
        with pytest.raises(TypeError, match="expected a pride command"):
            await pride.send(branch, "hello")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="expected a pride command"):
            await pride.ask(branch, {"type": "Chat"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="only work commands stream"):
            async with pride.stream(branch, Stop()):  # type: ignore[arg-type]
                pass
        assert await branch.chat("still here") == "re: still here"


async def test_reply_result_delivers_once() -> None:
    """Awaiting a reply's result a second time raises a clear RuntimeError."""
    async with Branch(chat_model=echo_model()) as branch:
        reply = await pride.send(branch, Chat("once"))
        assert await reply.result() == "re: once"
        with pytest.raises(RuntimeError, match="already delivered"):
            await reply.result()
        assert await branch.chat("next") == "re: next"


async def test_bad_target_and_timeout() -> None:
    """Unknown targets and bad timeouts raise clear errors."""
    async with Branch(chat_model=echo_model()) as branch:
        with pytest.raises(TypeError, match="send target"):
            await pride.send(42, Chat("x"))
        with pytest.raises(pride.UnknownBranch):
            await pride.ask("nobody", Chat("x"))
        with pytest.raises(ValueError, match="timeout"):
            await pride.ask(branch, Chat("x"), timeout=-1)
        assert await branch.chat("ok") == "re: ok"


async def test_branch_ref_resolves_a_running_branch() -> None:
    """A BranchRef addresses a running branch by id."""
    async with Branch(name="ref-me", chat_model=echo_model()) as branch:
        ref = pride.BranchRef(branch.id, branch.name)
        assert await pride.ask(ref, Chat("via ref")) == "re: via ref"
    with pytest.raises(pride.UnknownBranch):
        await pride.ask(ref, Chat("gone"))


async def test_mailbox_size_must_be_positive() -> None:
    """mailbox_size below 1 is refused at construction."""
    with pytest.raises(ValueError, match="mailbox_size"):
        Branch(mailbox_size=0)


async def test_mailbox_statistics() -> None:
    """statistics() reports queued work and capacity."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=4) as branch:
        await pride.send(branch, Chat("a"))
        await gate.started.wait()
        await pride.send(branch, Chat("b"))
        stats = branch.mailbox_statistics()
        assert stats is not None
        assert (stats.queued, stats.capacity, stats.closed) == (1, 4, False)
        gate.release("a")
        gate.release("b")


async def test_a_dropped_envelope_frees_its_room_at_once() -> None:
    """Cancelling a queued envelope gives its place back: the mailbox holds live work only."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=2) as branch:
        running = pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        given_up = [pride.send_nowait(branch, Chat(f"gone{i}")) for i in range(2)]
        for reply in given_up:
            reply.cancel()
        stats = branch.mailbox_statistics()
        assert stats is not None and stats.queued == 0
        kept = [pride.send_nowait(branch, Chat(f"kept{i}")) for i in range(2)]
        with pytest.raises(MailboxFull):
            pride.send_nowait(branch, Chat("overflow"))
        for text in ("running", "kept0", "kept1"):
            gate.release(text)
        assert [await reply.result() for reply in (running, *kept)] == [
            "reply to running",
            "reply to kept0",
            "reply to kept1",
        ]
        for reply in given_up:
            with pytest.raises(pride.TurnCancelled):
                await reply.result()


async def test_a_dropped_envelope_lets_a_waiting_sender_in() -> None:
    """A sender waiting for room is admitted as soon as a queued envelope is dropped."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=1) as branch:
        await pride.send(branch, Chat("running"))
        await gate.started.wait()
        queued = await pride.send(branch, Chat("queued"))
        sent: list[pride.Reply] = []

        async def waiting_sender() -> None:
            sent.append(await pride.send(branch, Chat("waiting")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting_sender)
            await trio.testing.wait_all_tasks_blocked()
            assert sent == []
            queued.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert len(sent) == 1  # admitted while the turn is still running
            gate.release("running")
            gate.release("waiting")
        assert await sent[0].result() == "reply to waiting"


async def test_callers_giving_up_on_a_busy_branch_do_not_pile_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Many asks timing out behind a long turn neither fill the mailbox nor stay queued."""
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=4) as branch:
        running = pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        for i in range(1_000):
            with pytest.raises(trio.TooSlowError):
                await pride.ask(branch, Chat(f"impatient{i}"), timeout=1.0)
        stats = branch.mailbox_statistics()
        assert stats is not None and stats.queued == 0
        answers = [pride.send_nowait(branch, Chat(f"later{i}")) for i in range(4)]
        gate.release("running")
        for i in range(4):
            gate.release(f"later{i}")
        assert await running.result() == "reply to running"
        assert [await reply.result() for reply in answers] == [
            f"reply to later{i}" for i in range(4)
        ]


async def test_a_busy_actor_yields_to_other_tasks_at_least_every_few_items() -> None:
    """A mailbox full of items that never yield by themselves (``Act`` without calls)
    is served in order, and the loop's other tasks run after at most
    ``YIELD_EVERY`` of them: the actor cannot starve its neighbours (or the loop's I/O)."""
    from pride.actors.mailbox import YIELD_EVERY

    async with Branch(chat_model=echo_model(), mailbox_size=200) as branch:
        replies = [pride.send_nowait(branch, pride.Act(())) for _ in range(5 * YIELD_EVERY)]
        served: list[int] = []
        while not all(reply.done for reply in replies):
            served.append(sum(reply.done for reply in replies))
            await trio.lowlevel.checkpoint()
        served.append(len(replies))
        steps = [after - before for before, after in itertools.pairwise(served)]
        # trio may run the actor last in one round and first in the next: two runs of
        # at most YIELD_EVERY items each between two of this task's turns.
        assert max(steps) <= 2 * YIELD_EVERY
        for reply in replies:
            await reply.result()  # each answered, none failed


async def _outcomes(replies: list[pride.Reply]) -> tuple[int, int]:
    """How many of ``replies`` were served, and how many answered BranchClosed."""
    served = closed = 0
    for reply in replies:
        try:
            await reply.result()
        except BranchClosed:
            closed += 1
        else:
            served += 1
    return served, closed


async def test_a_stop_is_taken_before_the_rest_of_a_full_mailbox_of_acts() -> None:
    """A Stop sent while the actor works through a run of items that never yield (it
    yields only every ``YIELD_EVERY`` of them) is taken right after the item in hand:
    at most one more is served, and every other queued envelope gets BranchClosed."""
    from pride.actors.mailbox import YIELD_EVERY

    async with Branch(chat_model=echo_model(), mailbox_size=200) as branch:
        acts = [pride.send_nowait(branch, pride.Act(())) for _ in range(5 * YIELD_EVERY)]
        await acts[0].wait_done()  # the actor is in the middle of its run
        before = sum(reply.done for reply in acts)
        assert 0 < before < len(acts)
        stop = pride.send_nowait(branch, Stop())
        assert await stop.result() is None
        served, closed = await _outcomes(acts)
        assert served - before <= 1
        assert served + closed == len(acts) and closed > 0
        with pytest.raises(BranchClosed):
            pride.send_nowait(branch, pride.Act(()))


async def test_removing_a_member_with_a_full_mailbox_of_acts_is_prompt() -> None:
    """``session.remove`` (Detach, then Stop) against a full mailbox of Acts: both are
    taken before the queued work, which is answered BranchClosed. ``remove`` takes the
    session's lock first (a checkpoint), so they are queued once the actor has yielded:
    after at most two runs of ``YIELD_EVERY`` items (trio may run the actor twice
    before the remover), and the item in hand."""
    from pride.actors.mailbox import YIELD_EVERY

    async with pride.Session() as session:
        member = await session.spawn(Branch(name="busy", chat_model=echo_model(), mailbox_size=200))
        acts = [pride.send_nowait(member, pride.Act(())) for _ in range(8 * YIELD_EVERY)]
        await acts[0].wait_done()
        before = sum(reply.done for reply in acts)
        assert 0 < before < len(acts)
        await session.remove(member)
        served, closed = await _outcomes(acts)
        assert served - before <= 2 * YIELD_EVERY + 1
        assert served + closed == len(acts) and closed > 0
        with pytest.raises(pride.UnknownBranch):
            session.get_branch("busy")
    assert member.messages is not None  # the conversation is kept
