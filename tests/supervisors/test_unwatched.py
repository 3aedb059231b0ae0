"""A session member nobody watches builds no signals and runs no hook machinery,
yet everything subscribed later, anywhere in the tree, still sees what it asked for
and the session's statistics still count every turn (issue 15 point 7)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from pride import (
    BadRequest,
    Branch,
    Chat,
    MessageAdded,
    Observer,
    RunEnd,
    RunFailed,
    RunStart,
    RunSuspended,
    ScriptedModel,
    Session,
    Signal,
    ask,
)
from pride.supervisors import HookBus
from tests.helpers import echo_model


class TestWants:
    """Observer.wants(kind): could a signal of that class reach a subscriber?"""

    def test_an_empty_observer_wants_nothing(self) -> None:
        observer = Observer()
        assert not observer.wants(RunStart) and not observer.wants(RunEnd)

    def test_classes_admit_their_subclasses_only(self) -> None:
        """A subscription to RunFailed wants RunSuspended (a RunFailed), not RunEnd."""
        observer = Observer()
        observer.observe(RunFailed, handler=lambda s: None)
        assert observer.wants(RunFailed) and observer.wants(RunSuspended)
        assert not observer.wants(RunEnd) and not observer.wants(RunStart)

    def test_a_predicate_only_subscription_wants_everything(self) -> None:
        observer = Observer()
        observer.observe(lambda s: False, handler=lambda s: None)
        assert observer.wants(RunStart) and observer.wants(MessageAdded)

    def test_subscribing_and_unsubscribing_change_the_answer_at_once(self) -> None:
        """The answer is cached per class; every change of subscriptions forgets it."""
        observer = Observer()
        assert not observer.wants(RunEnd)

        def handler(signal: Signal) -> None:
            pass

        observer.observe(RunEnd, handler=handler)
        assert observer.wants(RunEnd)
        observer.unobserve(handler)
        assert not observer.wants(RunEnd)

    async def test_a_child_session_wants_what_its_parent_wants(self) -> None:
        async with Session(name="root") as root:
            child = await root.spawn_session("child")
            assert not child.observer.wants(RunEnd)
            root.observe(RunEnd, handler=lambda s: None)
            assert child.observer.wants(RunEnd) and not child.observer.wants(RunStart)


class TestLateSubscribers:
    """Nothing is built while nobody listens; whoever subscribes later sees the next turn."""

    async def test_a_subscriber_added_after_unwatched_turns_sees_the_next(self) -> None:
        seen: list[str] = []
        async with Session() as session:
            branch = await session.spawn(Branch(chat_model=echo_model()))
            await branch.chat_and_record("unwatched")
            session.observe(
                RunStart, RunEnd, MessageAdded, handler=lambda s: seen.append(type(s).__name__)
            )
            await branch.chat_and_record("watched")
        assert seen == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]

    async def test_a_root_subscriber_sees_a_grandchild_members_turn(self) -> None:
        """Subscribed at the root after the tree was built: the terminal still goes up."""
        seen: list[Signal] = []
        async with Session(name="root") as root:
            child = await root.spawn_session("child")
            branch = await child.spawn(Branch(name="deep", chat_model=echo_model()))
            await branch.chat("first")
            root.observe(RunEnd, handler=seen.append)
            await branch.chat("second")
        assert [s.branch_name for s in seen] == ["deep"]

    async def test_an_async_terminal_subscriber_is_awaited_before_the_reply(self) -> None:
        """With nothing to drain, the terminal is sent without finalisation's scope; an
        async subscriber of it still finishes before the caller is answered."""
        finished: list[str] = []

        async def slow(signal: Signal) -> None:
            await trio.sleep(0)
            finished.append(type(signal).__name__)

        async with Session() as session:
            session.observe(RunEnd, handler=slow)
            branch = await session.spawn(Branch(chat_model=echo_model()))
            await branch.chat("hi")
            assert finished == ["RunEnd"]

    async def test_a_hook_registered_after_spawn_runs_at_the_next_model_call(self) -> None:
        points: list[str] = []
        async with Session() as session:
            branch = await session.spawn(Branch(chat_model=echo_model()))
            await branch.chat("before any hook")
            session.hooks.on("before_model_call", lambda p: points.append("before"))
            session.hooks.on("after_model_call", lambda p: points.append("after"))
            await branch.chat("hooked")
        assert points == ["before", "after"]


def test_a_hook_bus_is_falsy_while_it_has_no_handlers() -> None:
    """len(bus) counts handlers over every point; branches skip hook payloads while it is 0."""
    bus = HookBus()
    assert len(bus) == 0 and not bus

    def handler(payload: Any) -> None:
        pass

    bus.on("before_model_call", handler)
    bus.on("message_added", handler)
    assert len(bus) == 2 and bus
    bus.off("before_model_call", handler)
    bus.off("message_added", handler)
    assert not bus


async def test_statistics_count_turns_nobody_watches_over_the_whole_tree() -> None:
    """Turns are counted on the sessions' accounts, not by a hidden subscriber."""
    failing = ScriptedModel([BadRequest("refused", status=400)])
    async with Session(name="root") as root:
        child = await root.spawn_session("child")
        ok = await child.spawn(Branch(name="ok", chat_model=echo_model()))
        bad = await root.spawn(Branch(name="bad", chat_model=failing))
        await ok.chat("one")
        await ok.chat("two")
        with pytest.raises(BadRequest):
            await bad.chat("three")
        assert not root.observer.wants(RunEnd) and not root.observer.wants(RunFailed)
        below, above = child.statistics(), root.statistics()
    assert (below.turns_done, below.turns_failed) == (2, 0)
    assert (above.turns_done, above.turns_failed) == (2, 1)


async def test_a_custom_signal_sink_without_wants_gets_every_signal() -> None:
    """A sink given to a standalone branch need only dispatch: all signals go to it."""

    class Sink:
        def __init__(self) -> None:
            self.kinds: list[str] = []

        def dispatch(self, signal: Signal) -> None:
            self.kinds.append(type(signal).__name__)

    sink = Sink()
    async with Branch(chat_model=echo_model(), observer=sink) as branch:  # type: ignore[arg-type]
        await branch.chat("hi")
        await ask(branch, Chat("again"))
    assert sink.kinds == ["RunStart", "RunEnd", "RunStart", "RunEnd"]
