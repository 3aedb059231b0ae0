"""Observer and consumer faults: slow, hanging or raising watchers never cost a terminal."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Branch, ChatAndRecord, MessageAdded, RunEnd, RunStart
from pride.actors.turn import FINALIZE_GRACE
from tests.helpers import echo_model
from tests.reliability.invariants import InvariantChecker


class Watcher:
    """A signal sink that feeds the checker, then misbehaves on the chosen signal kind."""

    def __init__(self, checker: InvariantChecker, on: type, how: str) -> None:
        self.checker, self.on, self.how = checker, on, how
        self.cancelled = 0

    def dispatch(self, signal: pride.Signal) -> Any:
        self.checker.dispatch(signal)
        if not isinstance(signal, self.on):
            return None
        if self.how == "raise":
            raise RuntimeError("observer broke")
        return self.hang()

    async def hang(self) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled += 1
            raise


@pytest.mark.parametrize("on", [MessageAdded, RunStart, RunEnd])
@pytest.mark.parametrize("how", ["hang", "raise"])
async def test_a_misbehaving_observer_never_costs_a_terminal(
    on: type, how: str, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An observer raising, or hanging on any signal: every turn still gets exactly one
    terminal (at the latest after FINALIZE_GRACE), its caller an answer, and the hung
    deliveries are cancelled rather than left running (issue 10: a hanging MessageAdded
    subscriber used to cost the turn its terminal)."""
    caplog.set_level(logging.ERROR)
    checker = InvariantChecker()
    watcher = Watcher(checker, on, how)
    with checker.envelopes():
        async with Branch(chat_model=echo_model(), observer=watcher) as branch:
            checker.baseline(branch)
            started = trio.current_time()
            assert await branch.chat_and_record("one") == "re: one"
            assert await branch.chat_and_record("two") == "re: two"
            await trio.testing.wait_all_tasks_blocked()
            assert trio.current_time() - started <= 4 * FINALIZE_GRACE
            if how == "hang":
                assert watcher.cancelled >= 2  # nothing left behind
    checker.check(branch, quiescent=True)
    assert [type(s).__name__ for s in checker.signals if isinstance(s, RunStart | RunEnd)] == [
        "RunStart",
        "RunEnd",
        "RunStart",
        "RunEnd",
    ]


@pytest.mark.parametrize("via", ["observer", "hook"])
async def test_issue10_a_hanging_lifecycle_subscriber_never_stalls_the_supervisor(
    via: str, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """An async subscriber (or hook handler) of branch lifecycle events that never returns:
    the crashed branch is still restarted and the session still stops, each wait on the
    subscriber bounded by FINALIZE_GRACE (it used to stall restarts and shutdown forever)."""
    caplog.set_level(logging.ERROR)
    cancelled = 0

    async def hang(*_: Any) -> None:
        nonlocal cancelled
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled += 1
            raise

    async def crash(branch: Branch) -> None:
        raise pride.Escalate("crash")

    with trio.fail_after(20 * FINALIZE_GRACE):
        async with pride.Session() as session:
            if via == "observer":
                session.observe((pride.BranchStopped, pride.BranchStarted), handler=hang)
            else:
                session.hooks.on("branch_stop", hang)
                session.hooks.on("branch_start", hang)
            session.register_operation("crash", crash)
            branch = await session.spawn(Branch(chat_model=echo_model()))
            with pytest.raises(pride.Escalate):
                await branch.call("crash")
            assert await branch.chat("restarted") == "re: restarted"
    assert cancelled >= 2


async def test_issue10_a_finished_stream_stays_finished() -> None:
    """Iterating a stream again after its end yields nothing (StopAsyncIteration), as any
    exhausted iterator; it used to raise ReplyConsumedError."""
    async with Branch(chat_model=echo_model()) as branch:
        async with pride.stream(branch, ChatAndRecord("hello there")) as items:
            assert "".join([item async for item in items]) == "re: hello there"
            assert [item async for item in items] == []
            with pytest.raises(StopAsyncIteration):
                await items.__anext__()


async def test_issue10_a_failed_stream_raises_once_then_stays_finished() -> None:
    """A failed turn's error comes out of the loop once; iterating again ends quietly."""
    model = pride.ScriptedModel([pride.ServerError("down", status=500)], retry=None)
    model.retry = pride.llm.RetryPolicy(max_retries=0)
    async with Branch(chat_model=model) as branch:
        async with pride.stream(branch, ChatAndRecord("x")) as items:
            with pytest.raises(pride.ServerError):
                async for _ in items:
                    pass
            assert [item async for item in items] == []


async def test_an_async_hook_escalating_outside_a_turn_is_logged_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An async hook raising Escalate for a message recorded outside any turn has no
    turn to escalate: it is logged, and the session and its branch keep serving."""
    async with pride.Session(name="s") as session:
        branch = await session.spawn(Branch(name="b", chat_model=echo_model()))

        async def refuse(payload: Any) -> None:
            await trio.sleep(0)
            raise pride.Escalate("hook says no")

        session.hooks.on("message_added", refuse)
        branch.add_message(pride.Instruction(instruction="recorded from outside"))
        await trio.testing.wait_all_tasks_blocked()
        assert "hook says no" in caplog.text
        session.hooks.off("message_added", refuse)
        assert await branch.chat_and_record("still there?") == "re: still there?"
