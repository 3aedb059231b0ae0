"""Supervision: crashes restart children by strategy, restart type and intensity."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    Call,
    Chat,
    ChatAndRecord,
    Escalate,
    RunFailed,
    ScriptedModel,
    Session,
    SessionFailed,
    SupervisorFailed,
    TurnCancelled,
)
from pride.llm import RetryPolicy
from tests.helpers import Gate, Recorder, echo_model


async def escalate(branch: Branch, reason: str = "state is corrupt") -> None:
    raise Escalate(reason)


def observed_session(**options: Any) -> tuple[Session, Recorder]:
    session = Session(**options)
    session.register_operation("escalate", escalate)
    recorder = Recorder()
    session.observe(handler=recorder.dispatch)
    return session, recorder


async def settle() -> None:
    """Let the supervisor handle a crash: its caller is answered before the restart."""
    await trio.testing.wait_all_tasks_blocked()


def lifecycle(recorder: Recorder, name: str) -> list[str]:
    """The lifecycle signals of one child, as short strings."""
    found = []
    for signal in recorder.signals:
        if signal.branch_name != name:
            continue
        if isinstance(signal, BranchStarted):
            found.append("restarted" if signal.restart else "started")
        elif isinstance(signal, BranchStopped):
            found.append(f"stopped:{signal.reason}")
        elif isinstance(signal, BranchRestarted):
            found.append("restarting")
    return found


class TestOneForOne:
    """The default strategy restarts only the crashed child, keeping its state."""

    async def test_crash_answers_the_caller_and_restarts_keeping_the_conversation(self) -> None:
        """The crashing envelope gets Escalate; the branch comes back with its messages."""
        session, recorder = observed_session(name="s")
        async with session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            await branch.chat_and_record("remember me")
            with pytest.raises(Escalate, match="corrupt"):
                await session.ask("a", Call("escalate"))
            assert await branch.chat_and_record("again") == "re: again"
            assert session.statistics().restarts == 1
        assert [m.text for m in branch.messages][::2] == ["remember me", "again"]
        assert lifecycle(recorder, "a") == [
            "started",
            "stopped:crash",
            "restarting",
            "restarted",
            "stopped:shutdown",
        ]
        crash = next(s for s in recorder.of(BranchStopped) if s.reason == "crash")
        assert crash.error == "Escalate: state is corrupt"
        assert recorder.of(BranchRestarted)[0].cause == "Escalate: state is corrupt"

    async def test_queued_envelopes_survive_the_restart(self) -> None:
        """Work queued behind the crashing turn is served by the restarted actor."""
        release = trio.Event()

        async def crash_later(branch: Branch) -> None:
            await release.wait()
            raise Escalate("later")

        session, _ = observed_session()
        session.register_operation("crash_later", crash_later)
        async with session:
            branch = await session.spawn(Branch(chat_model=echo_model()))
            crashing = await pride.send(branch, Call("crash_later"))
            queued = await pride.send(branch, Chat("queued"))
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            with pytest.raises(Escalate):
                await crashing.result()
            assert await queued.result() == "re: queued"

    async def test_failed_turns_are_not_crashes(self) -> None:
        """Provider errors and operation errors fail the turn; nobody restarts."""

        async def broken(branch: Branch) -> None:
            raise ValueError("bad input")

        model = ScriptedModel([pride.ServerError("down", status=500), "ok"])
        model.retry = RetryPolicy(max_retries=0)
        session, recorder = observed_session()
        session.register_operation("broken", broken)
        async with session:
            await session.spawn(Branch(name="a", chat_model=model))
            with pytest.raises(pride.ServerError):
                await session.ask("a", Chat("x"))
            with pytest.raises(ValueError):
                await session.ask("a", Call("broken"))
            assert await session.ask("a", Chat("y")) == "ok"
        assert session.statistics().restarts == 0
        assert lifecycle(recorder, "a") == ["started", "stopped:shutdown"]
        assert len(recorder.of(RunFailed)) == 2

    async def test_siblings_are_untouched(self) -> None:
        """A sibling's running turn goes on while its neighbour restarts."""
        gate = Gate()
        session, recorder = observed_session()
        async with session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
            b = await session.spawn(Branch(name="b", chat_model=gate.model))
            running = await pride.send(b, Chat("busy"))
            await gate.started.wait()
            with pytest.raises(Escalate):
                await session.ask("a", Call("escalate"))
            gate.release("busy")
            assert await running.result() == "reply to busy"
        assert lifecycle(recorder, "b") == ["started", "stopped:shutdown"]

    async def test_escalate_from_a_tool_or_a_hook_is_a_crash(self) -> None:
        """Escalate raised by a tool, or by a message hook, crashes the branch too."""

        def poison() -> None:
            """A tool that finds the branch's state untrustworthy."""
            raise Escalate("tool says no")

        session, recorder = observed_session()
        async with session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model(), tools=[poison]))
            with pytest.raises(Escalate, match="tool says no"):
                await branch.act({"function": "poison", "arguments": {}})

            def hook(payload: Mapping[str, Any]) -> None:
                raise Escalate("hook says no")

            session.hooks.on("message_added", hook)
            with pytest.raises(Escalate, match="hook says no"):
                await branch.chat_and_record("x")
            session.hooks.off("message_added", hook)
            assert await branch.chat("still here") == "re: still here"
        assert lifecycle(recorder, "a").count("restarted") == 2


class TestGroupStrategies:
    """one_for_all and rest_for_one stop and restart siblings."""

    async def test_one_for_all_cancels_sibling_turns_and_keeps_their_queue(self) -> None:
        """The sibling's running turn gets TurnCancelled(restart); its queued work runs after."""
        gate = Gate()
        session, recorder = observed_session(strategy="one_for_all")
        async with session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
            b = await session.spawn(Branch(name="b", chat_model=gate.model))
            running = await pride.send(b, ChatAndRecord("busy"))
            queued = await pride.send(b, Chat("queued"))
            await gate.started.wait()
            with pytest.raises(Escalate):
                await session.ask("a", Call("escalate"))
            with pytest.raises(TurnCancelled) as info:
                await running.result()
            assert info.value.reason == "restart"
            gate.release("queued")
            assert await queued.result() == "reply to queued"
            assert len(b.messages) == 0  # the cancelled turn recorded nothing
            assert session.statistics().restarts == 1
        cancelled = [s for s in recorder.of(RunFailed) if s.branch_name == "b"]
        assert len(cancelled) == 1 and cancelled[0].cancelled
        assert lifecycle(recorder, "b") == [
            "started",
            "stopped:shutdown",
            "restarting",
            "restarted",
            "stopped:shutdown",
        ]

    async def test_one_for_all_restart_of_three_is_one_event(self) -> None:
        """With max_restarts=1 a one_for_all restart of three children leaves the session up."""
        session, recorder = observed_session(strategy="one_for_all", max_restarts=1)
        async with session:
            for name in "abc":
                await session.spawn(Branch(name=name, chat_model=echo_model()))
            with pytest.raises(Escalate):
                await session.ask("b", Call("escalate"))
            await settle()
            assert session.statistics().restarts == 1
            assert await session.ask("c", Chat("alive")) == "re: alive"
        assert len(recorder.of(BranchRestarted)) == 3
        # siblings stop in reverse start order, then all start again in start order
        events = [
            (type(s).__name__, s.branch_name)
            for s in recorder.signals
            if isinstance(s, BranchStopped | BranchStarted) and s.created_at
        ]
        assert events[3:9] == [
            ("BranchStopped", "b"),
            ("BranchStopped", "c"),
            ("BranchStopped", "a"),
            ("BranchStarted", "a"),
            ("BranchStarted", "b"),
            ("BranchStarted", "c"),
        ]

    async def test_rest_for_one_restarts_the_crashed_and_later_children(self) -> None:
        """Children started before the crashed one keep running."""
        session, recorder = observed_session(strategy="rest_for_one")
        async with session:
            for name in "abc":
                await session.spawn(Branch(name=name, chat_model=echo_model()))
            with pytest.raises(Escalate):
                await session.ask("b", Call("escalate"))
            await settle()
        assert "restarted" not in lifecycle(recorder, "a")
        assert "restarted" in lifecycle(recorder, "b")
        assert "restarted" in lifecycle(recorder, "c")


class TestRestartTypes:
    """temporary children never restart; deliberate stops are normal exits."""

    async def test_temporary_child_is_not_restarted(self) -> None:
        """A crashed temporary child stays stopped; its queued work gets BranchClosed."""
        release = trio.Event()

        async def crash_later(branch: Branch) -> None:
            await release.wait()
            raise Escalate("later")

        session, recorder = observed_session()
        session.register_operation("crash_later", crash_later)
        async with session:
            branch = await session.spawn(
                Branch(name="t", chat_model=echo_model()), restart="temporary"
            )
            crashing = await pride.send(branch, Call("crash_later"))
            queued = await pride.send(branch, Chat("queued"))
            await trio.testing.wait_all_tasks_blocked()
            release.set()
            with pytest.raises(Escalate):
                await crashing.result()
            with pytest.raises(pride.BranchClosed):
                await queued.result()
            with pytest.raises(pride.BranchClosed):
                await session.ask("t", Chat("after"))
            assert session.statistics().restarts == 0
        assert lifecycle(recorder, "t") == ["started", "stopped:crash"]

    async def test_transient_child_is_restarted_after_a_crash(self) -> None:
        """transient restarts after a crash, like permanent."""
        session, recorder = observed_session()
        async with session:
            await session.spawn(Branch(name="t", chat_model=echo_model()), restart="transient")
            with pytest.raises(Escalate):
                await session.ask("t", Call("escalate"))
            assert await session.ask("t", Chat("back")) == "re: back"
        assert lifecycle(recorder, "t")[:4] == [
            "started",
            "stopped:crash",
            "restarting",
            "restarted",
        ]

    async def test_temporary_sibling_in_a_group_is_stopped_not_restarted(self) -> None:
        """one_for_all stops a temporary sibling with the group and does not start it again."""
        session, recorder = observed_session(strategy="one_for_all")
        async with session:
            await session.spawn(Branch(name="p", chat_model=echo_model()))
            await session.spawn(Branch(name="t", chat_model=echo_model()), restart="temporary")
            with pytest.raises(Escalate):
                await session.ask("p", Call("escalate"))
            await settle()
            with pytest.raises(pride.BranchClosed):
                await session.ask("t", Chat("x"))
        assert lifecycle(recorder, "t") == ["started", "stopped:shutdown"]

    async def test_a_deliberate_stop_is_not_restarted(self) -> None:
        """Stop sent to a permanent child ends it normally; sends then raise BranchClosed."""
        session, recorder = observed_session()
        async with session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            await pride.ask(branch, pride.Stop())
            await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(pride.BranchClosed):
                await session.ask("a", Chat("x"))
            assert session.statistics().restarts == 0
            await session.spawn(branch)  # spawning a stopped member starts it again
            assert await session.ask("a", Chat("y")) == "re: y"
        assert lifecycle(recorder, "a") == [
            "started",
            "stopped:normal",
            "started",
            "stopped:shutdown",
        ]


class TestIntensity:
    """Past max_restarts per period the session fails to whoever supervises it."""

    async def test_zero_restarts_means_the_first_crash_fails_the_session(self) -> None:
        """SupervisorFailed (caused by the crash) leaves `async with`; the body is cancelled."""
        session, recorder = observed_session(max_restarts=0)
        body_cancelled = False
        with pytest.raises(SupervisorFailed) as info:
            async with session:
                await session.spawn(Branch(name="a", chat_model=echo_model()))
                await session.spawn(Branch(name="b", chat_model=echo_model()))
                with pytest.raises(Escalate):
                    await session.ask("a", Call("escalate"))
                try:
                    await trio.sleep_forever()
                except trio.Cancelled:
                    body_cancelled = True
                    raise
        assert type(info.value) is SupervisorFailed
        assert isinstance(info.value.__cause__, Escalate)
        assert body_cancelled
        assert len(recorder.of(SessionFailed)) == 1
        assert lifecycle(recorder, "b") == ["started", "stopped:shutdown"]
        assert recorder.kinds().index("SessionFailed") < len(recorder.kinds()) - 1

    async def test_restarts_within_the_period_are_counted(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """Two restarts per 5 s pass; a third crash within the window fails the session."""
        session, _ = observed_session(max_restarts=2, period=5.0)
        with pytest.raises(SupervisorFailed):
            async with session:
                await session.spawn(Branch(name="a", chat_model=echo_model()))
                for _ in range(2):
                    with pytest.raises(Escalate):
                        await session.ask("a", Call("escalate"))
                    await trio.sleep(1)  # the restart happens meanwhile
                await trio.sleep(10)  # the window empties
                for _ in range(2):
                    with pytest.raises(Escalate):
                        await session.ask("a", Call("escalate"))
                await settle()
                assert session.statistics().restarts == 4
                with pytest.raises(Escalate):
                    await session.ask("a", Call("escalate"))
                await trio.sleep_forever()
        assert session.statistics().restarts == 4

    async def test_failure_answers_queued_envelopes(self) -> None:
        """When the session fails, work still queued anywhere gets BranchClosed."""
        gate = Gate()
        session, _ = observed_session(max_restarts=0)
        queued: pride.Reply | None = None
        with pytest.raises(SupervisorFailed):
            async with session:
                await session.spawn(Branch(name="a", chat_model=echo_model()))
                b = await session.spawn(Branch(name="b", chat_model=gate.model))
                running = await pride.send(b, Chat("busy"))
                queued = await pride.send(b, Chat("queued"))
                await gate.started.wait()
                with pytest.raises(Escalate):
                    await session.ask("a", Call("escalate"))
                await trio.sleep_forever()
        with pytest.raises(TurnCancelled) as info:
            await running.result()
        assert info.value.reason == "shutdown"
        assert queued is not None
        with pytest.raises(pride.BranchClosed):
            await queued.result()


async def test_issue35_a_handled_crash_is_one_line_at_warning_its_traceback_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The supervisor restarted it: the WARNING says who crashed and why, in one line;
    where it was raised is for DEBUG (it printed ~50 lines mid-run in an example)."""
    session, _ = observed_session(name="s")
    with caplog.at_level(logging.DEBUG, logger="pride.session"):
        async with session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
            with pytest.raises(Escalate):
                await session.ask("a", Call("escalate"))
            await settle()
    records = [r for r in caplog.records if "crashed" in r.getMessage()]
    [warning] = [r for r in records if r.levelno == logging.WARNING]
    assert warning.getMessage() == "session 's': child 'a' crashed: Escalate('state is corrupt')"
    assert warning.exc_info is None and "\n" not in warning.getMessage()
    [debug] = [r for r in records if r.levelno == logging.DEBUG]
    assert debug.exc_info is not None and debug.exc_info[1] is not None
    assert isinstance(debug.exc_info[1], Escalate)
