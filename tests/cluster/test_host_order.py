"""A host's ordering and cancellation rules, on its trio runtime in this process (no Ray).

Ray may deliver one caller's batches in any order; these tests hand a host
runtime batches out of order, twice, and with cancels ahead of their envelopes.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from pride import Call, Chat, Run, RunStart, Signal
from pride.cluster.host.runtime import HostRuntime
from pride.cluster.wire.encoding import decode_error, decode_value
from pride.messages import unstructure


class Outbox:
    """What the runtime sends back, per connection, with a way to wait for it."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.posts: list[list[dict[str, Any]]] = []
        self.lazy: list[bool] = []
        self.changed = trio.Event()

    def post(self, conn: str, items: list[dict[str, Any]], *, lazy: bool = False) -> None:
        self.items.extend(items)
        self.posts.append(items)
        self.lazy.append(lazy)
        self.changed.set()

    async def answer(self, envelope_id: str) -> dict[str, Any]:
        while True:
            for item in self.items:
                if item.get("id") == envelope_id and item["k"] in ("done", "refused"):
                    return item
            self.changed = trio.Event()
            await self.changed.wait()


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[tuple[HostRuntime, Outbox]]:
    outbox = Outbox()
    runtime = HostRuntime("local", tmp_path, outbox)
    async with trio.open_nursery() as nursery:
        ready = trio.Event()
        nursery.start_soon(runtime.main, lambda _: ready.set())
        await ready.wait()
        await runtime.place(
            {"factory": "tests.cluster.factories:worker", "name": "w", "args": [], "kwargs": {}}
        )
        yield runtime, outbox
        runtime.stop()


def envelope(command: Any, mode: str = "ask") -> dict[str, Any]:
    return {
        "k": "send",
        "id": uuid.uuid4().hex,
        "b": "w",
        "mode": mode,
        "cmd": unstructure(command),
    }


async def test_batches_out_of_order_reach_the_mailbox_in_order(
    host: tuple[HostRuntime, Outbox],
) -> None:
    runtime, outbox = host
    notes = [envelope(Call("note", caller=0, n=n)) for n in range(6)]
    batches = [notes[0:2], notes[2:4], notes[4:6]]
    runtime.on_batch("c", 2, batches[2], set())
    runtime.on_batch("c", 1, batches[1], set())
    runtime.on_batch("c", 1, batches[1], set())  # delivered twice: ignored
    runtime.on_batch("c", 0, batches[0], set())
    for item in notes:
        assert "error" not in await outbox.answer(item["id"])
    ask = envelope(Call("notes"))
    runtime.on_batch("c", 3, [ask], set())
    answer = await outbox.answer(ask["id"])
    assert decode_value(answer["value"]) == [[0, n] for n in range(6)]


async def test_a_cancel_that_overtakes_its_envelope_is_remembered(
    host: tuple[HostRuntime, Outbox],
) -> None:
    runtime, outbox = host
    starts: list[Signal] = []
    assert runtime.session is not None
    runtime.session.observe(RunStart, handler=starts.append)
    late = envelope(Chat("never"))
    runtime.on_batch("c", 1, [{"k": "cancel", "id": late["id"]}], set())
    runtime.on_batch("c", 0, [late], set())
    refused = await outbox.answer(late["id"])
    assert refused["k"] == "refused"
    assert type(decode_error(refused["error"])).__name__ == "TurnCancelled"
    await trio.testing.wait_all_tasks_blocked()
    assert starts == []  # it never started


async def test_a_batch_filling_the_gap_is_taken_when_many_wait_behind_it(
    host: tuple[HostRuntime, Outbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `MAX_HELD_BATCHES` batches waiting, a further one ahead of the gap is
    refused, but never the batch that fills it: that would stall the connection."""
    from pride.cluster.host import serving as _serving

    monkeypatch.setattr(_serving, "MAX_HELD_BATCHES", 2)
    runtime, outbox = host
    notes = [envelope(Call("note", caller=0, n=n)) for n in range(4)]
    for seq in (1, 2, 3):
        runtime.on_batch("c", seq, [notes[seq]], set())
    refused = await outbox.answer(notes[3]["id"])  # two waited already
    assert refused["k"] == "refused"
    runtime.on_batch("c", 0, [notes[0]], set())
    for item in notes[:3]:
        assert (await outbox.answer(item["id"]))["k"] == "done"


async def test_each_hand_over_says_a_branchs_room_once(host: tuple[HostRuntime, Outbox]) -> None:
    """A branch's room is read once per hand-over, when it is handed over, and rides
    on the last outcome of that branch in it; the caller keeps the latest."""
    runtime, outbox = host
    notes = [envelope(Call("note", caller=0, n=n)) for n in range(40)]
    runtime.on_batch("c", 0, notes, set())
    for item in notes:
        await outbox.answer(item["id"])
    await trio.testing.wait_all_tasks_blocked()
    for post in outbox.posts:
        done = [item for item in post if item["k"] == "done"]
        assert [("room" in item) for item in done] == [False] * (len(done) - 1) + [True]
    assert outbox.posts[-1][-1]["room"] == 64  # all served: the whole mailbox is free
    # Outcomes while more work waits may gather; the last ones, the mailbox empty, may not.
    assert outbox.lazy[-1] is False
    assert all(outbox.lazy[:-1]) and len(outbox.lazy) > 1


async def test_a_replayed_envelope_id_is_refused(host: tuple[HostRuntime, Outbox]) -> None:
    runtime, outbox = host
    item = envelope(Chat("once"))
    runtime.on_batch("c", 0, [item], {item["id"]})  # the journal had seen it
    refused = await outbox.answer(item["id"])
    assert type(decode_error(refused["error"])).__name__ == "EnvelopeReplayed"


async def test_a_batch_delivered_twice_grants_its_credits_once(
    host: tuple[HostRuntime, Outbox],
) -> None:
    """A second copy of a batch is ignored whole: its credits are not granted again."""
    runtime, outbox = host
    streamed = {**envelope(Run(" ".join(str(n) for n in range(20))), "stream"), "window": 1}
    runtime.on_batch("c", 0, [streamed], set())
    await trio.testing.wait_all_tasks_blocked()
    credit = [{"k": "credit", "id": streamed["id"], "n": 2}]
    runtime.on_batch("c", 1, credit, set())
    runtime.on_batch("c", 1, credit, set())  # delivered twice
    await trio.testing.wait_all_tasks_blocked()
    items = [i for i in outbox.items if i.get("id") == streamed["id"] and i["k"] == "item"]
    assert len(items) == 3  # the window of 1, then the 2 credited once
    runtime.on_batch("c", 2, [{"k": "cancel", "id": streamed["id"]}], set())
    await outbox.answer(streamed["id"])  # the turn ends now, not at the host's stop


async def test_a_cancel_in_a_batch_delivered_twice_is_taken_once(
    host: tuple[HostRuntime, Outbox],
) -> None:
    """A second copy of a batch does not remember its cancels again (nor anything else)."""
    runtime, outbox = host
    late = envelope(Chat("never"))
    cancel = [{"k": "cancel", "id": late["id"]}]
    runtime.on_batch("c", 1, cancel, set())
    runtime.on_batch("c", 0, [late], set())  # refused: the cancel overtook it
    refused = await outbox.answer(late["id"])
    assert type(decode_error(refused["error"])).__name__ == "TurnCancelled"
    outbox.items.clear()
    runtime.on_batch("c", 1, cancel, set())  # the cancel's batch again
    again = envelope(Chat("runs"))
    runtime.on_batch("c", 2, [{**again, "id": late["id"]}], set())
    answer = await outbox.answer(late["id"])
    assert answer["k"] == "done" and decode_value(answer["value"]) == "echo: runs"


async def test_a_turn_id_reaches_the_journal_with_the_answers(tmp_path: Path) -> None:
    """The turn an envelope started is noted for the envelope journal, handed over
    with the answers (no hand-over of its own while the turn runs)."""
    outbox = Outbox()
    notes: list[tuple[str, str]] = []
    runtime = HostRuntime("local", tmp_path, outbox)
    async with trio.open_nursery() as nursery:
        ready = trio.Event()
        nursery.start_soon(runtime.main, lambda _: ready.set(), notes.extend)
        await ready.wait()
        await runtime.place(
            {"factory": "tests.cluster.factories:worker", "name": "w", "args": [], "kwargs": {}}
        )
        item = envelope(Chat("noted"))
        runtime.on_batch("c", 0, [item], set())
        answer = await outbox.answer(item["id"])
        assert (item["id"], answer["turn"]) in notes
        runtime.stop()
