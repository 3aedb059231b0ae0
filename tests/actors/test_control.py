"""Out-of-band loop control addressed by turn (ADR-0018 D3)."""

from __future__ import annotations

import uuid

import pytest
import trio

import pride
from pride import Branch, LoopBreak, LoopDirective, RunEnd, StopStream
from tests.helpers import Gate, Recorder, echo_model


async def test_control_without_an_active_turn_stores_nothing() -> None:
    """With no turn running, control() returns False and nothing reaches later turns."""
    async with Branch(chat_model=echo_model()) as branch:
        assert branch.control(LoopDirective.CANCEL) is False
        assert branch.poll_control() is None

        async def poll(branch: Branch) -> object:
            return branch.poll_control()

        branch.register_operation("poll", poll)
        assert await branch.call("poll") is None


async def test_control_addresses_the_active_turn() -> None:
    """control() with the running turn's id is stored; a mismatched id is refused."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        reply = await pride.send(branch, pride.Chat("work"))
        await gate.started.wait()
        assert branch.control(LoopDirective.BREAK, turn_id=uuid.uuid4()) is False
        assert branch.control(LoopDirective.BREAK, reason="first", turn_id=reply.turn_id)
        assert branch.control(LoopDirective.CANCEL, reason="second")
        control = branch.poll_control(turn_id=reply.turn_id)
        assert control is not None
        assert (control.directive, control.reason) == (LoopDirective.CANCEL, "second")
        assert branch.poll_control() is None
        gate.release("work")
        await reply.result()


async def test_directive_never_carries_into_a_later_turn() -> None:
    """A directive left unpolled dies with its turn."""
    gate = Gate()
    async with Branch(chat_model=gate.model) as branch:
        reply = await pride.send(branch, pride.Chat("first"))
        await gate.started.wait()
        assert branch.control(LoopDirective.BREAK)
        gate.release("first")
        await reply.result()

        async def poll(branch: Branch) -> object:
            return branch.poll_control()

        branch.register_operation("poll", poll)
        assert await branch.call("poll") is None


async def test_control_refused_while_finalising() -> None:
    """A terminal observer cannot address the finishing turn."""
    answers: list[bool] = []

    def on_signal(signal: object) -> None:
        if isinstance(signal, RunEnd):
            answers.append(branch.control(LoopDirective.CANCEL))

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        await branch.chat("x")
    assert answers == [False]


async def test_check_control_raises_for_break_and_cancel() -> None:
    """check_control: BREAK raises LoopBreak, CANCEL raises StopStream, CONTINUE passes."""
    outcomes: list[str] = []

    async def loop(branch: Branch) -> str:
        for directive in (LoopDirective.CONTINUE, LoopDirective.BREAK, LoopDirective.CANCEL):
            assert branch.control(directive)
            try:
                pride.check_control(branch)
                outcomes.append("passed")
            except LoopBreak:
                outcomes.append("break")
            except StopStream:
                outcomes.append("cancel")
        return "ok"

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("loop", loop)
        assert await branch.call("loop") == "ok"
    assert outcomes == ["passed", "break", "cancel"]


async def test_bad_turn_id_type_is_rejected_and_actor_keeps_serving() -> None:
    """A turn_id that is not a UUID raises TypeError; the branch still answers."""
    async with Branch(chat_model=echo_model()) as branch:
        with pytest.raises(TypeError, match="turn_id must be a UUID"):
            branch.control(LoopDirective.BREAK, turn_id="not-a-uuid")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="directive must be a LoopDirective"):
            branch.control("break")
        assert await branch.chat("still") == "re: still"


async def test_break_fails_the_turn() -> None:
    """An operation that honours BREAK ends its turn with LoopBreak."""

    started = trio.Event()

    async def looping(branch: Branch) -> str:
        started.set()
        while True:
            await trio.sleep(0)
            pride.check_control(branch)

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("looping", looping)
        reply = await pride.send(branch, pride.Call("looping"))
        await started.wait()
        assert branch.control(LoopDirective.BREAK, turn_id=reply.turn_id)
        with pytest.raises(LoopBreak):
            await reply.result()
