"""Tests for ``ActionManager.execute``: strategies, ordering, errors as outcomes, hooks."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import trio
import trio.testing

from pride.errors import Escalate, ToolArgumentError, ToolError
from pride.messages.commands import ActionCall
from pride.tools import ActionManager, ActionOutcome


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def fail(message: str) -> None:
    """Raise ValueError."""
    raise ValueError(message)


class TestOutcomes:
    """Each call becomes one ActionOutcome, in call order."""

    async def test_success_outcome_fields(self, autojump_clock: trio.testing.MockClock) -> None:
        """A successful call records function, arguments, call_id, output, start and duration."""

        async def slow(x: int) -> int:
            await trio.sleep(2)
            return x

        manager = ActionManager([slow])
        start = trio.current_time()
        [outcome] = await manager.execute([ActionCall("slow", {"x": 7}, call_id="call_1")])
        assert outcome == ActionOutcome(
            function="slow",
            arguments={"x": 7},
            call_id="call_1",
            output=7,
            error=None,
            started_at=start,
            duration=2.0,
        )
        assert outcome.succeeded
        assert outcome.exception is None

    async def test_empty_batch(self) -> None:
        """No calls, no outcomes."""
        assert await ActionManager([add]).execute([]) == []

    @pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
    async def test_outcomes_follow_call_order_not_finish_order(self, strategy: Any) -> None:
        """Outcomes come back in call order even when later calls finish first."""
        finished: list[int] = []
        done = [trio.Event() for _ in range(3)]

        async def step(i: int) -> int:
            # Concurrently, call i waits for call i+1 to finish first.
            if strategy == "concurrent" and i < 2:
                await done[i + 1].wait()
            finished.append(i)
            done[i].set()
            return i

        manager = ActionManager([step])
        outcomes = await manager.execute(
            [ActionCall("step", {"i": i}) for i in range(3)], strategy=strategy
        )
        assert [o.output for o in outcomes] == [0, 1, 2]
        assert finished == ([2, 1, 0] if strategy == "concurrent" else [0, 1, 2])

    async def test_raising_tool_is_an_error_outcome_and_others_succeed(self) -> None:
        """A tool that raises gives error "<ExcType>: <message>"; the other calls still succeed."""
        manager = ActionManager([add, fail])
        outcomes = await manager.execute(
            [
                ActionCall("add", {"a": 1, "b": 2}),
                ActionCall("fail", {"message": "boom"}),
                ActionCall("add", {"a": 3, "b": 4}),
            ]
        )
        assert [o.output for o in outcomes] == [3, None, 7]
        assert outcomes[1].error == "ValueError: boom"
        assert isinstance(outcomes[1].exception, ValueError)
        assert [o.succeeded for o in outcomes] == [True, False, True]

    async def test_unknown_tool_is_an_error_outcome(self) -> None:
        """Calling an unregistered name gives a ToolError outcome listing the available tools."""
        outcomes = await ActionManager([add]).execute(
            [ActionCall("div", {"a": 1}), ActionCall("add", {"a": 1, "b": 1})]
        )
        assert outcomes[0].error == "ToolError: no tool named 'div' (available: add)"
        assert type(outcomes[0].exception) is ToolError
        assert outcomes[1].output == 2

    async def test_bad_arguments_are_an_error_outcome(self) -> None:
        """Invalid arguments give a ToolArgumentError outcome and the tool does not run."""
        ran = []

        def record(n: int) -> None:
            ran.append(n)

        [outcome] = await ActionManager([record]).execute([ActionCall("record", {"n": "x"})])
        assert outcome.error == (
            "ToolArgumentError: tool 'record': invalid value for argument 'n': "
            "Expected `int`, got `str`"
        )
        assert isinstance(outcome.exception, ToolArgumentError)
        assert outcome.arguments == {"n": "x"}
        assert ran == []

    async def test_exception_without_message(self) -> None:
        """An exception with an empty message is described by its type alone."""

        async def bare() -> None:
            raise RuntimeError

        [outcome] = await ActionManager([bare]).execute([ActionCall("bare")])
        assert outcome.error == "RuntimeError"

    async def test_registry_snapshot(self) -> None:
        """Calls of a batch see the registry as it was when execute started."""
        manager = ActionManager()

        def first() -> str:
            manager.unregister("second")
            return "first"

        def second() -> str:
            return "second"

        manager.register([first, second])
        outcomes = await manager.execute(
            [ActionCall("first"), ActionCall("second")], strategy="sequential"
        )
        assert [o.output for o in outcomes] == ["first", "second"]
        assert manager.names == ("first",)

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"strategy": "parallel"}, "strategy must be"),
            ({"max_concurrent": 0}, "max_concurrent must be"),
            ({"max_concurrent": True}, "max_concurrent must be"),
        ],
    )
    async def test_invalid_options(self, options: Any, message: str) -> None:
        """An unknown strategy or a non-positive cap is a ValueError."""
        with pytest.raises(ValueError, match=message):
            await ActionManager([add]).execute([], **options)


class TestStrategies:
    """Concurrent calls overlap, sequential ones do not, and a cap holds."""

    async def test_concurrent_calls_overlap(self, autojump_clock: trio.testing.MockClock) -> None:
        """Each call waits for the other to start: this only finishes if they overlap."""
        started = {"a": trio.Event(), "b": trio.Event()}

        async def meet(me: str, other: str) -> str:
            started[me].set()
            await started[other].wait()
            return me

        manager = ActionManager([meet])
        with trio.fail_after(10):  # virtual time: a deadlock fails fast
            outcomes = await manager.execute(
                [
                    ActionCall("meet", {"me": "a", "other": "b"}),
                    ActionCall("meet", {"me": "b", "other": "a"}),
                ]
            )
        assert [o.output for o in outcomes] == ["a", "b"]

    async def test_sync_tools_overlap_in_threads(self) -> None:
        """Two sync tools meet at a thread barrier, so they run in threads at the same time."""
        barrier = threading.Barrier(2, timeout=10)

        def meet(me: str) -> str:
            barrier.wait()
            return me

        outcomes = await ActionManager([meet]).execute(
            [ActionCall("meet", {"me": "a"}), ActionCall("meet", {"me": "b"})]
        )
        assert [o.output for o in outcomes] == ["a", "b"]

    async def test_sequential_runs_one_at_a_time_in_order(self) -> None:
        """Sequential calls start only after the previous one ended, in call order."""
        log: list[str] = []

        async def step(i: int) -> None:
            log.append(f"start {i}")
            await trio.lowlevel.checkpoint()
            log.append(f"end {i}")

        await ActionManager([step]).execute(
            [ActionCall("step", {"i": i}) for i in range(3)], strategy="sequential"
        )
        assert log == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]

    @pytest.mark.parametrize(("cap", "peak", "elapsed"), [(2, 2, 3.0), (None, 5, 1.0), (1, 1, 5.0)])
    async def test_max_concurrent_caps_running_calls(
        self, autojump_clock: trio.testing.MockClock, cap: int | None, peak: int, elapsed: float
    ) -> None:
        """With max_concurrent=n at most n calls run at once; without it, all do."""
        running = 0
        highest = 0

        async def work() -> None:
            nonlocal running, highest
            running += 1
            highest = max(highest, running)
            await trio.sleep(1)
            running -= 1

        start = trio.current_time()
        await ActionManager([work]).execute([ActionCall("work")] * 5, max_concurrent=cap)
        assert highest == peak
        assert trio.current_time() - start == elapsed


class TestHooks:
    """before_call can deny a call; after_call sees every outcome and cannot break the batch."""

    @pytest.mark.parametrize("async_hook", [False, True])
    async def test_before_call_denies(self, async_hook: bool) -> None:
        """A raising before_call denies that call: not run, error "denied: <message>"."""
        ran: list[str] = []
        seen: list[ActionCall] = []

        def record(name: str) -> str:
            ran.append(name)
            return name

        def check(call: ActionCall) -> None:
            seen.append(call)
            if call.arguments["name"] == "rm":
                raise PermissionError("rm is not allowed")

        async def check_async(call: ActionCall) -> None:
            await trio.lowlevel.checkpoint()
            check(call)

        calls = [ActionCall("record", {"name": "ls"}), ActionCall("record", {"name": "rm"})]
        outcomes = await ActionManager([record]).execute(
            calls, before_call=check_async if async_hook else check
        )
        assert outcomes[0].output == "ls"
        assert outcomes[1].error == "denied: rm is not allowed"
        assert isinstance(outcomes[1].exception, PermissionError)
        assert ran == ["ls"]
        assert sorted(seen, key=str) == sorted(calls, key=str)  # concurrent: any order

    async def test_denial_without_message(self) -> None:
        """A denial with an empty message names the exception type."""

        def deny(call: ActionCall) -> None:
            raise PermissionError

        [outcome] = await ActionManager([add]).execute(
            [ActionCall("add", {"a": 1, "b": 1})], before_call=deny
        )
        assert outcome.error == "denied: PermissionError"

    @pytest.mark.parametrize("async_hook", [False, True])
    async def test_after_call_sees_every_outcome(self, async_hook: bool) -> None:
        """after_call runs once per call with its outcome, failed, denied and unknown included."""
        seen: list[ActionOutcome] = []

        def deny_fail(call: ActionCall) -> None:
            if call.function == "fail":
                raise PermissionError("no")

        def after(outcome: ActionOutcome) -> None:
            seen.append(outcome)

        async def after_async(outcome: ActionOutcome) -> None:
            await trio.lowlevel.checkpoint()
            after(outcome)

        outcomes = await ActionManager([add, fail]).execute(
            [
                ActionCall("add", {"a": 1, "b": 1}),
                ActionCall("fail", {"message": "x"}),
                ActionCall("nope"),
            ],
            before_call=deny_fail,
            after_call=after_async if async_hook else after,
            strategy="sequential",
        )
        assert seen == outcomes

    async def test_after_call_failure_is_logged_and_isolated(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A raising after_call is logged to pride.tools; the outcomes are unaffected."""

        def after(outcome: ActionOutcome) -> None:
            if outcome.output == 2:
                raise RuntimeError("observer broke")

        with caplog.at_level(logging.ERROR, logger="pride.tools"):
            outcomes = await ActionManager([add]).execute(
                [ActionCall("add", {"a": 1, "b": 1}), ActionCall("add", {"a": 2, "b": 2})],
                after_call=after,
            )
        assert [o.output for o in outcomes] == [2, 4]
        assert all(o.succeeded for o in outcomes)
        [record] = caplog.records
        assert record.name == "pride.tools"
        assert "after_call hook failed for tool call 'add'" in record.getMessage()
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], RuntimeError)


class TestEscalate:
    """Escalate is not an error response: it leaves execute as itself."""

    @pytest.mark.parametrize("strategy", ["concurrent", "sequential"])
    async def test_escalating_tool_propagates(self, strategy: Any) -> None:
        """A tool raising Escalate ends the batch with that Escalate, not an outcome or a group."""
        cancelled = []

        async def bad() -> None:
            raise Escalate("state corrupted")

        async def patient() -> None:
            try:
                await trio.sleep_forever()
            finally:
                cancelled.append(True)

        calls = [ActionCall("bad")]
        if strategy == "concurrent":
            calls.append(ActionCall("patient"))
        with pytest.raises(Escalate, match="state corrupted") as info:
            await ActionManager([bad, patient]).execute(calls, strategy=strategy)
        assert type(info.value) is Escalate
        assert cancelled == ([True] if strategy == "concurrent" else [])

    async def test_escalating_hooks_propagate(self) -> None:
        """Escalate from before_call or after_call propagates instead of denying or logging."""

        def escalate(_: object) -> None:
            raise Escalate("hook says stop")

        manager = ActionManager([add])
        call = ActionCall("add", {"a": 1, "b": 1})
        with pytest.raises(Escalate):
            await manager.execute([call], before_call=escalate)
        with pytest.raises(Escalate):
            await manager.execute([call, call], after_call=escalate)

    async def test_escalate_inside_a_tool_exception_group(self) -> None:
        """An Escalate inside a tool's own exception group still propagates, alone."""

        async def grouped() -> None:
            raise ExceptionGroup("inner", [Escalate("deep"), ValueError("noise")])

        with pytest.raises(Escalate, match="deep") as info:
            await ActionManager([grouped]).execute([ActionCall("grouped")])
        assert type(info.value) is Escalate
