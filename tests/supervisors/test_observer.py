"""The observer: filtered subscriptions, dispatch order, isolation, async drain."""

from __future__ import annotations

import logging
import uuid

import pytest
import trio
import trio.testing

from pride import (
    Branch,
    BranchStarted,
    MessageAdded,
    Observer,
    RunEnd,
    RunFailed,
    RunStart,
    Session,
    Signal,
)
from tests.helpers import echo_model


def _start() -> RunStart:
    return RunStart(branch_name="a", command="Chat")


class TestSubscriptions:
    """Classes are alternatives, predicates all hold; handlers run in subscription order."""

    def test_type_filters_use_isinstance(self) -> None:
        """A class filter matches its subclasses; others are skipped."""
        observer = Observer()
        seen: list[str] = []
        observer.observe(Signal, handler=lambda s: seen.append("any"))
        observer.observe(RunEnd, handler=lambda s: seen.append("end"))
        assert observer.dispatch(_start()) is None
        assert seen == ["any"]

    def test_all_filters_must_match(self) -> None:
        """A class and a predicate together: both must hold."""
        observer = Observer()
        seen: list[Signal] = []
        observer.observe(RunStart, lambda s: s.branch_name == "b", handler=seen.append)
        observer.dispatch(_start())
        observer.dispatch(RunStart(branch_name="b"))
        assert [s.branch_name for s in seen] == ["b"]

    def test_tuple_filter_matches_any_class(self) -> None:
        """A tuple of classes matches a signal of any of them."""
        observer = Observer()
        seen: list[str] = []
        observer.observe((RunEnd, RunFailed), handler=lambda s: seen.append(type(s).__name__))
        for signal in (_start(), RunEnd(), RunFailed()):
            observer.dispatch(signal)
        assert seen == ["RunEnd", "RunFailed"]

    def test_dispatch_follows_subscription_order(self) -> None:
        """Handlers run in the order they subscribed."""
        observer = Observer()
        order: list[int] = []
        for index in range(4):
            observer.observe(handler=lambda s, i=index: order.append(i))
        observer.dispatch(_start())
        assert order == [0, 1, 2, 3]

    def test_decorator_form_returns_the_function(self) -> None:
        """observe(...) without a handler decorates and leaves the function usable."""
        observer = Observer()

        @observer.observe(RunStart)
        def handler(signal: Signal) -> str:
            return "still callable"

        assert handler(_start()) == "still callable"
        assert len(observer) == 1

    def test_unobserve_removes_every_subscription_of_a_handler(self) -> None:
        """unobserve returns how many subscriptions it removed."""
        observer = Observer()
        seen: list[Signal] = []
        observer.observe(RunStart, handler=seen.append)
        observer.observe(RunEnd, handler=seen.append)
        assert observer.unobserve(seen.append) == 2
        observer.dispatch(_start())
        assert seen == []

    def test_bad_filter_is_a_type_error(self) -> None:
        """A filter that is neither class nor callable is refused at once."""
        with pytest.raises(TypeError, match="filters"):
            Observer().observe("RunEnd", handler=print)  # type: ignore[arg-type]


class TestAlternatives:
    """The classes of one observe call are alternatives (DESIGN.md, "Sessions, pinned")."""

    def test_classes_listed_together_each_match(self) -> None:
        """observe(RunStart, RunEnd) sees both kinds (it once saw neither, silently)."""
        observer = Observer()
        seen: list[str] = []
        observer.observe(RunStart, RunEnd, handler=lambda s: seen.append(type(s).__name__))
        for signal in (_start(), RunEnd(), RunFailed()):
            observer.dispatch(signal)
        assert seen == ["RunStart", "RunEnd"]

    def test_classes_and_predicates_mean_any_class_and_every_predicate(self) -> None:
        """(RunStart or RunEnd) and the name is "b" and the turn id is set."""
        observer = Observer()
        seen: list[Signal] = []
        observer.observe(
            RunStart,
            RunEnd,
            lambda s: s.branch_name == "b",
            lambda s: s.turn_id is not None,
            handler=seen.append,
        )
        turn = uuid.uuid4()
        candidates = [
            RunStart(branch_name="b", turn_id=turn),  # yes
            RunEnd(branch_name="b", turn_id=turn),  # yes
            RunFailed(branch_name="b", turn_id=turn),  # no class matches
            RunEnd(branch_name="a", turn_id=turn),  # a predicate fails
            RunEnd(branch_name="b"),  # the other predicate fails
        ]
        for signal in candidates:
            observer.dispatch(signal)
        assert seen == candidates[:2]

    def test_tuples_and_classes_mix(self) -> None:
        """The tuple form stays accepted, alone or beside classes."""
        observer = Observer()
        seen: list[str] = []
        observer.observe((RunStart, RunEnd), RunFailed, handler=lambda s: seen.append("x"))
        for signal in (_start(), RunEnd(), RunFailed(), BranchStarted()):
            observer.dispatch(signal)
        assert seen == ["x", "x", "x"]

    async def test_a_session_observer_sees_every_kind_it_lists(self) -> None:
        """Through a real session turn: both listed lifecycle kinds arrive, in order."""
        seen: list[str] = []
        async with Session() as session:
            session.observe(RunStart, RunEnd, handler=lambda s: seen.append(type(s).__name__))
            branch = await session.spawn(Branch(chat_model=echo_model()))
            assert await branch.chat("hi") == "re: hi"
        assert seen == ["RunStart", "RunEnd"]


class TestIsolation:
    """A failing subscriber is logged; the others still run."""

    def test_a_raising_handler_does_not_stop_the_next(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The second handler runs after the first raised; the failure is logged."""
        observer = Observer()
        seen: list[str] = []

        def broken(signal: Signal) -> None:
            raise RuntimeError("subscriber bug")

        observer.observe(handler=broken)
        observer.observe(handler=lambda s: seen.append("ok"))
        with caplog.at_level(logging.ERROR, "pride.observer"):
            observer.dispatch(_start())
        assert seen == ["ok"]
        assert "subscriber bug" in caplog.text

    def test_a_raising_predicate_counts_as_no_match(self, caplog: pytest.LogCaptureFixture) -> None:
        """A predicate that raises skips its handler and is logged."""
        observer = Observer()
        seen: list[Signal] = []
        observer.observe(lambda s: 1 / 0 == 0, handler=seen.append)
        with caplog.at_level(logging.ERROR, "pride.observer"):
            observer.dispatch(_start())
        assert seen == []
        assert "predicate" in caplog.text

    async def test_async_handlers_run_in_the_returned_awaitable_isolated(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """dispatch returns one awaitable for async handlers; one failing does not stop another."""
        observer = Observer()
        seen: list[str] = []

        async def good(signal: Signal) -> None:
            await trio.lowlevel.checkpoint()
            seen.append("good")

        async def bad(signal: Signal) -> None:
            raise RuntimeError("async subscriber bug")

        observer.observe(handler=bad)
        observer.observe(handler=good)
        pending = observer.dispatch(_start())
        assert pending is not None and seen == []
        with caplog.at_level(logging.ERROR, "pride.observer"):
            await pending
        assert seen == ["good"]
        assert "async subscriber bug" in caplog.text


async def test_standalone_branch_drains_async_subscribers_before_the_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Branch(observer=Observer()): slow async MessageAdded handlers finish before RunEnd."""
    observer = Observer()
    order: list[str] = []

    @observer.observe(MessageAdded)
    async def slow(signal: MessageAdded) -> None:
        await trio.sleep(2 if signal.message.role == "user" else 1)
        order.append(f"handled {signal.message.role}")

    observer.observe((RunStart, RunEnd), handler=lambda s: order.append(type(s).__name__))
    async with Branch(chat_model=echo_model(), observer=observer) as branch:
        await branch.chat_and_record("hi")
    assert order == ["RunStart", "handled assistant", "handled user", "RunEnd"]
