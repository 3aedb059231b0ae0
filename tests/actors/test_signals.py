"""Lifecycle and message signals: one RunStart, one terminal, messages in between."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from pride import (
    Branch,
    ChatAndRecord,
    MessageAdded,
    RunEnd,
    RunFailed,
    RunStart,
    ScriptedModel,
    send,
)
from pride.errors import ServerError
from tests.helpers import Recorder, echo_model


async def test_exactly_one_start_and_one_terminal_per_turn() -> None:
    """Every started turn has one RunStart and one RunEnd or RunFailed with its turn_id."""
    recorder = Recorder()
    model = ScriptedModel(["ok", ServerError("boom", status=500), "ok again"])
    model.retry = pride_no_retries()
    async with Branch(chat_model=model, observer=recorder) as branch:
        assert await branch.chat("a") == "ok"
        with pytest.raises(ServerError):
            await branch.chat("b")
        assert await branch.chat("c") == "ok again"
    lifecycle = [s for s in recorder.signals if isinstance(s, RunStart | RunEnd | RunFailed)]
    assert [type(s).__name__ for s in lifecycle] == [
        "RunStart",
        "RunEnd",
        "RunStart",
        "RunFailed",
        "RunStart",
        "RunEnd",
    ]
    for start, terminal in zip(lifecycle[::2], lifecycle[1::2], strict=True):
        assert start.turn_id == terminal.turn_id
    failed = recorder.of(RunFailed)[0]
    assert failed.error_type == "ServerError"
    assert not failed.cancelled


def pride_no_retries():  # type: ignore[no-untyped-def]
    from pride.llm import RetryPolicy

    return RetryPolicy(max_retries=0)


async def test_message_signals_arrive_between_start_and_terminal() -> None:
    """A recording turn's MessageAdded signals come after RunStart and before RunEnd."""
    recorder = Recorder()
    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        await branch.chat_and_record("hi")
    assert recorder.kinds() == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    start = recorder.signals[0]
    added = recorder.of(MessageAdded)
    assert all(signal.turn_id == start.turn_id for signal in added)
    assert [signal.message.role for signal in added] == ["user", "assistant"]


async def test_async_message_subscribers_are_drained_before_the_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Async MessageAdded subscribers finish before RunEnd is emitted."""
    order: list[str] = []

    def on_signal(signal: object) -> object:
        if isinstance(signal, MessageAdded):
            delay = 2 if signal.message.role == "user" else 1

            async def slow() -> None:
                await trio.sleep(delay)
                order.append(f"handled {signal.message.role}")

            return slow()
        order.append(type(signal).__name__)
        return None

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        await branch.chat_and_record("hi")
    assert order == ["RunStart", "handled assistant", "handled user", "RunEnd"]


async def test_observer_failures_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    """A raising observer never replaces the turn's result."""

    def explode(signal: object) -> None:
        raise RuntimeError("observer bug")

    caplog.set_level(logging.ERROR)
    async with Branch(chat_model=echo_model(), observer=Recorder(explode)) as branch:
        assert await branch.chat_and_record("hi") == "re: hi"
    assert "observer failed" in caplog.text


async def test_async_observer_failure_is_isolated(caplog: pytest.LogCaptureFixture) -> None:
    """A failing async subscriber is logged; the turn still succeeds."""

    def on_signal(signal: object) -> object:
        async def boom() -> None:
            raise RuntimeError("async observer bug")

        return boom()

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        assert await branch.chat_and_record("hi") == "re: hi"
    assert "async observer bug" in caplog.text


async def test_signals_carry_branch_identity() -> None:
    """Every signal names the branch that emitted it."""
    recorder = Recorder()
    async with Branch(name="ada", chat_model=echo_model(), observer=recorder) as branch:
        reply = await send(branch, ChatAndRecord("x"))
        await reply.result()
    assert {signal.branch_name for signal in recorder.signals} == {"ada"}
    assert {signal.branch_id for signal in recorder.signals} == {branch.id}
