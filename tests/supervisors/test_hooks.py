"""Hook points: named, ordered, isolated — and a blocking pre-tool hook that denies."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import ActionResponse, Branch, Session
from pride.supervisors import HookBus
from tests.helpers import echo_model


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class TestHookBus:
    """The bus itself: names, order, isolation, blocking points."""

    def test_unknown_points_are_value_errors(self) -> None:
        """Registering or emitting at a misspelt point fails loudly."""
        hooks = HookBus()
        with pytest.raises(ValueError, match="before_tool_call"):
            hooks.on("before_tool", print)
        with pytest.raises(ValueError):
            hooks.emit("tool.pre", {})

    def test_active_says_whether_any_handler_is_registered(self) -> None:
        """``active`` (and truth) follows on/off: a branch reads it before building payloads."""
        hooks = HookBus()
        assert not hooks.active and not hooks
        first = hooks.on("message_added", print)
        second = hooks.on("after_model_call", print)
        assert hooks.active and hooks
        assert hooks.off("message_added", first)
        assert hooks.active
        assert hooks.off("after_model_call", second)
        assert not hooks.active and not hooks
        assert not hooks.off("after_model_call", second)
        assert not hooks.active

    def test_handlers_run_in_registration_order_and_off_removes(self) -> None:
        """on() appends, off() removes, handlers() lists them."""
        hooks = HookBus()
        order: list[int] = []
        first = hooks.on("message_added", lambda p: order.append(1))

        @hooks.on("message_added")
        def second(payload: Mapping[str, Any]) -> None:
            order.append(2)

        assert hooks.handlers("message_added") == (first, second)
        assert hooks.emit("message_added", {}) is None
        assert hooks.off("message_added", first)
        assert not hooks.off("message_added", first)
        hooks.emit("message_added", {})
        assert order == [1, 2, 2]

    def test_a_bus_is_truthy_exactly_while_it_has_a_handler(self) -> None:
        """Truthiness (what a member asks each turn before building a hook payload)
        agrees with len() through registering and removing, at one point and at two."""
        hooks = HookBus()
        assert not hooks and len(hooks) == 0

        def handler(payload: Mapping[str, Any]) -> None:
            pass

        hooks.on("message_added", handler)
        hooks.on("before_model_call", handler)
        assert hooks and len(hooks) == 2
        assert hooks.off("message_added", handler)
        assert hooks and len(hooks) == 1
        assert not hooks.off("message_added", handler)
        assert hooks.off("before_model_call", handler)
        assert not hooks and len(hooks) == 0

    def test_non_blocking_failures_are_logged(self, caplog: pytest.LogCaptureFixture) -> None:
        """A raising handler at a non-blocking point is logged; the next one runs."""
        hooks = HookBus()
        seen: list[str] = []
        hooks.on("after_model_call", lambda p: 1 / 0)
        hooks.on("after_model_call", lambda p: seen.append("ran"))
        with caplog.at_level(logging.ERROR, "pride.hooks"):
            hooks.emit("after_model_call", {})
        assert seen == ["ran"]
        assert "ZeroDivisionError" in caplog.text

    def test_blocking_point_propagates_the_first_failure(self) -> None:
        """before_tool_call: the first raising handler's exception comes out."""
        hooks = HookBus()
        hooks.on("before_tool_call", lambda p: None)

        def deny(payload: Mapping[str, Any]) -> None:
            raise PermissionError("no")

        hooks.on("before_tool_call", deny)
        with pytest.raises(PermissionError):
            hooks.emit("before_tool_call", {})

    def test_escalate_is_never_swallowed(self) -> None:
        """Escalate propagates even from a non-blocking point."""
        hooks = HookBus()

        def escalate(payload: Mapping[str, Any]) -> None:
            raise pride.Escalate("hook lost trust")

        hooks.on("message_added", escalate)
        with pytest.raises(pride.Escalate):
            hooks.emit("message_added", {})

    async def test_async_handlers_keep_order_after_sync_ones(self) -> None:
        """Sync handlers run at once; from the first async one on, the rest run in order."""
        hooks = HookBus()
        order: list[str] = []

        async def slow(payload: Mapping[str, Any]) -> None:
            await trio.lowlevel.checkpoint()
            order.append("async")

        hooks.on("branch_start", lambda p: order.append("sync 1"))
        hooks.on("branch_start", slow)
        hooks.on("branch_start", lambda p: order.append("sync 2"))
        pending = hooks.emit("branch_start", {})
        assert order == ["sync 1"]
        assert pending is not None
        await pending
        assert order == ["sync 1", "async", "sync 2"]

    async def test_async_blocking_handler_denies_from_the_awaitable(self) -> None:
        """An async pre-tool handler's exception comes out of the awaitable."""
        hooks = HookBus()

        async def deny(payload: Mapping[str, Any]) -> None:
            raise PermissionError("async no")

        hooks.on("before_tool_call", deny)
        pending = hooks.emit("before_tool_call", {})
        assert pending is not None
        with pytest.raises(PermissionError):
            await pending


class TestHooksInTurns:
    """A session's hooks reach its members' turns."""

    async def test_a_raising_pre_tool_hook_denies_that_call(self) -> None:
        """The denied call is recorded as an error ActionResponse; the allowed one runs."""
        async with Session() as session:
            branch = await session.spawn(Branch(chat_model=echo_model(), tools=[add]))

            @session.hooks.on("before_tool_call")
            def guard(payload: Mapping[str, Any]) -> None:
                if payload["call"].arguments.get("a") == 13:
                    raise PermissionError("unlucky number")

            responses = await branch.act(
                [
                    {"function": "add", "arguments": {"a": 1, "b": 2}},
                    {"function": "add", "arguments": {"a": 13, "b": 2}},
                ]
            )
        assert [r.output for r in responses] == [3, None]
        assert "unlucky number" in (responses[1].error or "")
        recorded = [m for m in branch.messages if isinstance(m, ActionResponse)]
        assert recorded[1].error == responses[1].error

    async def test_turn_hooks_fire_and_failures_are_isolated(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Model-call and message hooks see the turn; a raising one does not fail it."""
        points: list[str] = []
        async with Session() as session:
            for point in ("before_model_call", "after_model_call", "message_added"):
                session.hooks.on(point, lambda p, point=point: points.append(point))
            session.hooks.on("after_model_call", lambda p: 1 / 0)
            branch = await session.spawn(Branch(chat_model=echo_model()))
            with caplog.at_level(logging.ERROR, "pride.hooks"):
                assert await branch.chat_and_record("hi") == "re: hi"
        assert points == ["before_model_call", "after_model_call", "message_added", "message_added"]
        assert "ZeroDivisionError" in caplog.text

    async def test_lifecycle_hook_points_fire(self) -> None:
        """session_start, branch_start, branch_stop and session_stop fire with their payloads."""
        events: list[tuple[str, Any]] = []
        session = Session(name="life")
        for point in ("session_start", "branch_start", "branch_stop", "session_stop"):
            session.hooks.on(
                point,
                lambda p, point=point: events.append((point, p.get("reason", p.get("restart")))),
            )
        async with session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
        assert events == [
            ("session_start", None),
            ("branch_start", False),
            ("branch_stop", "shutdown"),
            ("session_stop", None),
        ]


async def test_restart_and_failure_hook_points_fire() -> None:
    """branch_restart fires with the crash as cause; session_failed when intensity runs out."""
    events: list[tuple[str, str]] = []
    session = Session(max_restarts=1)

    async def escalate(branch: Branch) -> None:
        raise pride.Escalate("corrupt")

    session.register_operation("escalate", escalate)

    @session.hooks.on("branch_restart")
    async def restarting(payload: Mapping[str, Any]) -> None:
        events.append(("branch_restart", str(payload["cause"])))

    session.hooks.on("session_failed", lambda p: events.append(("session_failed", str(p["cause"]))))
    with pytest.raises(pride.SupervisorFailed):
        async with session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
            for _ in range(2):
                with pytest.raises(pride.Escalate):
                    await session.run_operation("escalate")
                await trio.testing.wait_all_tasks_blocked()
            await trio.sleep_forever()
    assert events == [("branch_restart", "corrupt"), ("session_failed", "corrupt")]


async def test_a_handler_registered_after_the_branch_attached_is_called() -> None:
    """The branch reads the bus's ``active`` live: a bus empty at attach time still counts."""
    async with Session() as session:
        branch = await session.spawn(Branch(chat_model=echo_model()))
        await branch.chat_and_record("before")  # no handler yet: no payload built
        seen: list[str] = []
        session.hooks.on("message_added", lambda payload: seen.append(payload["message"].role))
        session.hooks.on("before_model_call", lambda payload: seen.append("model"))
        await branch.chat_and_record("after")
    assert seen == ["model", "user", "assistant"]
