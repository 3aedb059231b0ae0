"""Cancellation never strands a branch: terminal sent, reply answered, actor ready."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Chat, ChatAndRecord, RunEnd, RunFailed, RunStart, TurnCancelled
from tests.helpers import Gate, Recorder, echo_model


async def test_cancelling_the_caller_cancels_and_finalises_the_turn() -> None:
    """A caller cancelled mid-turn gets out; the turn ends with RunFailed(cancelled)."""
    gate = Gate()
    recorder = Recorder()
    async with Branch(chat_model=gate.model, observer=recorder) as branch:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def ask_and_cancel() -> None:
                    await gate.started.wait()
                    scope.cancel()

                nursery.start_soon(ask_and_cancel)
                await pride.ask(branch, ChatAndRecord("slow"))
        assert scope.cancelled_caught
        gate.release("next")
        assert await branch.chat("next") == "reply to next"
    failed = recorder.of(RunFailed)
    assert len(failed) == 1 and failed[0].cancelled
    assert failed[0].error_type == "TurnCancelled"
    assert recorder.kinds() == ["RunStart", "RunFailed", "RunStart", "RunEnd"]
    assert len(branch.messages) == 0  # nothing recorded by the cancelled turn


async def test_timeout_raises_too_slow_and_the_branch_serves_the_next_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """ask(timeout=) raises TooSlowError; the next turn runs normally."""
    gate = Gate()
    recorder = Recorder()
    async with Branch(chat_model=gate.model, observer=recorder) as branch:
        with pytest.raises(trio.TooSlowError):
            await pride.ask(branch, Chat("stuck"), timeout=5)
        gate.release("after")
        assert await pride.ask(branch, Chat("after")) == "reply to after"
    kinds = recorder.kinds()
    assert kinds == ["RunStart", "RunFailed", "RunStart", "RunEnd"]


async def test_cancelled_queued_envelope_never_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A caller giving up while queued: no RunStart, no model call, no messages."""
    gate = Gate()
    recorder = Recorder()
    async with Branch(chat_model=gate.model, observer=recorder) as branch:
        first = await pride.send(branch, Chat("first"))
        await gate.started.wait()
        with pytest.raises(trio.TooSlowError):
            await pride.ask(branch, ChatAndRecord("queued"), timeout=1)
        gate.release("first")
        await first.result()
        gate.release("third")
        assert await branch.chat("third") == "reply to third"
    assert [text for kind, text in gate.events if kind == "start"] == ["first", "third"]
    assert len(recorder.of(RunStart)) == 2
    assert len(branch.messages) == 0


async def test_reply_cancel_drops_a_queued_command() -> None:
    """reply.cancel() on a queued command drops it; result() raises TurnCancelled."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        first = await pride.send(branch, Chat("first"))
        second = await pride.send(branch, Chat("second"))
        second.cancel()
        second.cancel()  # idempotent
        assert second.state == "dropped"
        with pytest.raises(TurnCancelled) as info:
            await second.result()
        assert info.value.reason == "caller"
        gate.release("first")
        await first.result()
    assert ("start", "second") not in gate.events


async def test_reply_cancel_cancels_a_running_turn() -> None:
    """reply.cancel() on a running turn finalises it and answers TurnCancelled."""
    gate = Gate()
    recorder = Recorder()
    async with Branch(chat_model=gate.model, observer=recorder) as branch:
        reply = await pride.send(branch, Chat("running"))
        await gate.started.wait()
        reply.cancel()
        with pytest.raises(TurnCancelled):
            await reply.result()
        gate.release("next")
        assert await branch.chat("next") == "reply to next"
    assert recorder.kinds() == ["RunStart", "RunFailed", "RunStart", "RunEnd"]


async def test_cancelling_the_supervisor_finalises_the_running_turn() -> None:
    """Cancelling the scope the actor runs in still sends the terminal and answers the caller."""
    gate = Gate()
    recorder = Recorder()
    outcome: list[BaseException] = []
    branch = Branch(chat_model=gate.model, observer=recorder)
    async with trio.open_nursery() as nursery:
        await nursery.start(branch.serve)
        reply = await pride.send(branch, Chat("busy"))
        await gate.started.wait()
        nursery.cancel_scope.cancel()
    try:
        await reply.result()
    except TurnCancelled as exc:
        outcome.append(exc)
    assert len(outcome) == 1 and outcome[0].reason == "shutdown"
    assert recorder.kinds() == ["RunStart", "RunFailed"]
    assert recorder.of(RunFailed)[0].cancelled


async def test_stream_closed_early_finalises_before_the_next_turn() -> None:
    """Leaving a stream block early ends the turn before the next queued turn starts."""
    recorder = Recorder()
    model = pride.ScriptedModel(["a b c d e f g h", "next"], chunk_size=2)
    async with Branch(chat_model=model, observer=recorder) as branch:
        async with pride.stream(branch, Chat("long")) as items:
            async for item in items:
                assert item
                break
        assert recorder.kinds() == ["RunStart", "RunEnd"]
        assert await branch.chat("again") == "next"
    assert recorder.kinds() == ["RunStart", "RunEnd", "RunStart", "RunEnd"]


async def test_stream_left_by_exception_fails_the_turn() -> None:
    """An exception in the consumer's block cancels the turn (RunFailed) and propagates bare."""
    recorder = Recorder()
    model = pride.ScriptedModel(["a b c d e f", "next"], chunk_size=2)
    async with Branch(chat_model=model, observer=recorder) as branch:
        with pytest.raises(KeyError):
            async with pride.stream(branch, Chat("long")) as items:
                async for _ in items:
                    raise KeyError("consumer bug")
        assert await branch.chat("again") == "next"
    failed = recorder.of(RunFailed)
    assert len(failed) == 1 and failed[0].cancelled


async def test_stream_nothing_enqueued_before_entry() -> None:
    """Creating the stream context manager queues nothing until it is entered."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        manager = pride.stream(branch, Chat("later"))
        await trio.testing.wait_all_tasks_blocked()
        assert recorder.signals == []
        async with manager as items:
            chunks = [chunk async for chunk in items]
        assert "".join(chunks) == "re: later"
    assert recorder.kinds() == ["RunStart", "RunEnd"]


async def test_stream_delivers_turn_errors_after_the_last_item() -> None:
    """A failing streamed turn raises its error from the async for."""
    model = pride.ScriptedModel([pride.errors.BadRequest("nope", status=400)])
    async with Branch(chat_model=model) as branch:
        with pytest.raises(pride.errors.BadRequest):
            async with pride.stream(branch, Chat("x")) as items:
                async for _ in items:
                    pass


async def test_run_end_is_emitted_for_a_fully_consumed_stream() -> None:
    """Consuming every chunk ends the turn with RunEnd."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        async with pride.stream(branch, Chat("hi")) as items:
            assert "".join([c async for c in items]) == "re: hi"
    assert [type(s) for s in recorder.signals] == [RunStart, RunEnd]
