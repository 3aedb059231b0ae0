"""Envelopes in line for room without a task (`send_in_line`), and a reply's done callbacks.

These are what ``pride.aio`` answers asyncio callers with; the trio API's own
guarantees (first come, first served; a dropped envelope gives its room
back; nothing dropped silently at a stop) hold for them unchanged.
"""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import pride
from pride import Branch, BranchClosed, Chat, Detach, ReplyConsumedError, Stop, TurnCancelled
from pride.actors import Reply, send_in_line
from tests.helpers import Gate, echo_model


def _statistics(branch: Branch) -> pride.actors.MailboxStatistics:
    found = branch.mailbox_statistics()
    assert found is not None
    return found


async def test_an_envelope_in_line_keeps_its_place_among_the_waiting_senders() -> None:
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=1) as branch:
        running = pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        queued = send_in_line(branch, Chat("queued"))  # room: queued as send_nowait would
        sent: list[Reply] = []

        async def sender() -> None:
            sent.append(await pride.send(branch, Chat("sender")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender)
            await trio.testing.wait_all_tasks_blocked()
            lined = send_in_line(branch, Chat("lined"))  # full: in line, after the sender
            dropped = send_in_line(branch, Chat("dropped"))
            assert _statistics(branch).queued == 4
            dropped.cancel()  # leaves the line at once: its room is nobody's
            assert _statistics(branch).queued == 3
            with pytest.raises(TurnCancelled):
                dropped.take_result()
            for text in ("running", "queued", "sender", "lined"):
                gate.release(text)
        assert await lined.result() == "reply to lined"
        for reply in (running, queued, *sent):
            await reply.result()
    started = [text for event, text in gate.events if event == "start"]
    assert started == ["running", "queued", "sender", "lined"]


async def test_an_envelope_in_line_is_answered_branchclosed_when_the_branch_stops() -> None:
    gate = Gate()
    async with Branch(chat_model=gate.model, mailbox_size=1) as branch:
        pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        pride.send_nowait(branch, Chat("queued"))
        lined = send_in_line(branch, Chat("lined"))
        answered: list[Reply] = []
        lined.add_done_callback(answered.append)
        stop = pride.send_nowait(branch, Stop())
        gate.release("running")
        await stop.result()
    assert answered == [lined]
    with pytest.raises(BranchClosed):
        lined.take_result()


async def test_done_callbacks_run_once_in_order_a_raising_one_is_logged_one_taken_back_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with Branch(chat_model=echo_model()) as branch:
        reply = pride.send_nowait(branch, Chat("hi"))
        seen: list[str] = []

        def boom(_: Reply) -> None:
            raise RuntimeError("a callback's own bug")

        def taken_back(_: Reply) -> None:
            seen.append("taken back")

        reply.add_done_callback(lambda r: seen.append(f"first {r.done}"))
        reply.add_done_callback(taken_back)
        reply.add_done_callback(boom)
        reply.add_done_callback(lambda r: seen.append("third"))
        assert reply.remove_done_callback(taken_back)
        assert not reply.remove_done_callback(taken_back)
        with pytest.raises(RuntimeError, match="before the command is done"):
            reply.take_result()
        with caplog.at_level(logging.ERROR, logger="pride.actor"):
            await reply.wait_done()
        assert seen == ["first True", "third"]
        assert "a done callback" in caplog.text and "a callback's own bug" in caplog.text
        reply.add_done_callback(lambda r: seen.append("late"))  # done already: called now
        assert seen == ["first True", "third", "late"]
        assert reply.take_result() == "re: hi"
        with pytest.raises(ReplyConsumedError):
            reply.take_result()
        with pytest.raises(ReplyConsumedError):
            await reply.result()


async def test_a_system_message_given_up_leaves_the_priority_queue_at_once() -> None:
    """Asks of a ``Detach`` that time out while a turn runs leave nothing queued behind
    them (they used to stay, dead, until the actor reached them)."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        running = pride.send_nowait(branch, Chat("running"))
        await gate.started.wait()
        for _ in range(100):
            with pytest.raises(trio.TooSlowError):
                await pride.ask(branch, Detach(), timeout=0)
        assert _statistics(branch).priority_queued == 0
        kept = pride.send_nowait(branch, Detach())  # one not given up stays, and is served
        assert _statistics(branch).priority_queued == 1
        gate.release("running")
        assert await running.result() == "reply to running"
        await kept.result()
        assert _statistics(branch).priority_queued == 0
