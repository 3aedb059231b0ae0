"""Turns of one branch run one at a time in mailbox order; distinct branches overlap."""

from __future__ import annotations

import trio
import trio.testing

import pride
from pride import Branch, Chat, ChatAndRecord
from tests.helpers import Gate, echo_model


async def test_concurrent_asks_run_one_at_a_time_in_arrival_order() -> None:
    """Five concurrent asks on one branch never overlap and start in send order."""
    gate = Gate()
    results: dict[str, str] = {}
    async with Branch(chat_model=gate.model) as branch, trio.open_nursery() as nursery:
        for index in range(5):
            text = f"q{index}"

            async def one(text: str = text) -> None:
                results[text] = await pride.ask(branch, Chat(text))

            nursery.start_soon(one)
            await trio.testing.wait_all_tasks_blocked()
        for index in range(5):
            await trio.testing.wait_all_tasks_blocked()
            gate.release(f"q{index}")
    expected = []
    for index in range(5):
        expected += [("start", f"q{index}"), ("end", f"q{index}")]
    assert gate.events == expected
    assert results == {f"q{i}": f"reply to q{i}" for i in range(5)}


async def test_distinct_branches_overlap() -> None:
    """Two branches' turns run at the same time: both start before either ends."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as first, Branch(chat_model=gate.model) as second:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pride.ask, first, Chat("a"))
            nursery.start_soon(pride.ask, second, Chat("b"))
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(gate.events) == [("start", "a"), ("start", "b")]
            gate.release("a")
            gate.release("b")


async def test_recorded_history_follows_mailbox_order() -> None:
    """Recording turns append to the history in the order they were sent."""
    async with Branch(chat_model=echo_model()) as branch:
        replies = [await pride.send(branch, ChatAndRecord(f"m{i}")) for i in range(4)]
        for reply in replies:
            await reply.result()
    texts = [message.text for message in branch.messages]
    assert texts == [t for i in range(4) for t in (f"m{i}", f"re: m{i}")]


async def test_send_returns_before_the_turn_runs() -> None:
    """send puts the envelope in the mailbox and returns a handle at once."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        first = await pride.send(branch, Chat("one"))
        second = await pride.send(branch, Chat("two"))
        await gate.started.wait()
        assert first.turn_id is not None
        assert second.turn_id is None  # queued: not started yet
        assert not second.done
        gate.release("one")
        gate.release("two")
        assert await first.result() == "reply to one"
        assert await second.result() == "reply to two"
        assert second.turn_id is not None and second.turn_id != first.turn_id
