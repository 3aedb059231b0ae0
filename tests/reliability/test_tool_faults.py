"""Tool faults: raising, hanging and task-leaking tools never strand a turn."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import (
    ActionCall,
    ActionResponse,
    Branch,
    Chat,
    Run,
    RunEnd,
    RunFailed,
    RunStart,
    ScriptedModel,
    Session,
    TurnCancelled,
)
from pride.llm import ToolCall
from tests.helpers import echo_model
from tests.reliability.invariants import InvariantChecker


def calls_then(tool: str, reply: str = "answered") -> ScriptedModel:
    """A model that asks for ``tool`` when told to ``go``; otherwise it replies with text."""

    def script(request: pride.llm.ModelRequest) -> object:
        if request.messages[-1] == {"role": "user", "content": "go"}:
            return ToolCall(tool, {})
        return reply

    return ScriptedModel(script)


class Sink:
    """An observer feeding the checker and noting the order of signals and events."""

    def __init__(self, checker: InvariantChecker, order: list[str]) -> None:
        self.checker, self.order = checker, order

    def dispatch(self, signal: pride.Signal) -> None:
        self.checker.dispatch(signal)
        self.order.append(type(signal).__name__)


def responses(branch: Branch) -> list[ActionResponse]:
    return [m for m in branch.messages if isinstance(m, ActionResponse)]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_tool_is_an_error_response_not_a_failed_turn(kind: str) -> None:
    """The tool's exception is recorded for the model; the turn ends with RunEnd."""

    def broken_sync() -> str:
        """Break."""
        raise ValueError("tool broke")

    async def broken_async() -> str:
        """Break."""
        raise ValueError("tool broke")

    tool = broken_sync if kind == "sync" else broken_async
    checker = InvariantChecker()
    with checker.envelopes():
        async with Branch(
            chat_model=calls_then(tool.__name__), tools=[tool], observer=checker
        ) as branch:
            items = await pride.ask(branch, Run("go"))
            assert items[-1].text == "answered"
            assert await branch.chat("next") == "answered"
    checker.check(branch, quiescent=True)
    assert responses(branch)[0].error == "ValueError: tool broke"
    assert [type(s).__name__ for s in checker.signals if not hasattr(s, "message")] == [
        "RunStart",
        "RunEnd",
        "RunStart",
        "RunEnd",
    ]


@pytest.mark.parametrize("how", ["ask timeout", "reply.cancel"])
async def test_a_hanging_tool_is_cancelled_with_its_turn(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    """Giving up on the turn cancels the hanging tool before the terminal signal; the
    request gets a response saying it was not executed; the branch serves on."""
    order: list[str] = []

    async def hang() -> str:
        """Hang."""
        try:
            await trio.sleep_forever()
        finally:
            order.append("tool cancelled")
        return "never"

    checker = InvariantChecker()
    observe = Sink(checker, order)
    with checker.envelopes():
        async with Branch(chat_model=calls_then("hang"), tools=[hang], observer=observe) as branch:
            checker.baseline(branch)
            if how == "ask timeout":
                with pytest.raises(trio.TooSlowError):
                    await pride.ask(branch, Run("go"), timeout=10)
            else:
                reply = await pride.send(branch, Run("go"))
                await trio.testing.wait_all_tasks_blocked()
                reply.cancel()
                with pytest.raises(TurnCancelled):
                    await reply.result()
            assert await branch.chat("next") == "answered"
    checker.check(branch, quiescent=True)
    assert order.index("tool cancelled") < order.index("RunFailed")
    failed = next(s for s in checker.signals if isinstance(s, RunFailed))
    assert failed.cancelled and failed.error_type == "TurnCancelled"
    assert "not executed" in (responses(branch)[0].error or "")


async def test_a_task_a_tool_leaves_in_the_turn_is_cancelled_before_the_terminal() -> None:
    """A never-ending task started into the turn (current_turn().start_soon) is cancelled
    and awaited at finalisation; the turn still ends with RunEnd."""
    order: list[str] = []

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            order.append("leftover cancelled")

    async def spawn() -> str:
        """Leave background work behind."""
        scope = pride.current_turn()
        assert scope is not None
        scope.start_soon(forever)
        return "spawned"

    checker = InvariantChecker()
    observe = Sink(checker, order)
    with checker.envelopes():
        async with Branch(chat_model=calls_then("spawn"), tools=[spawn], observer=observe) as b:
            checker.baseline(b)
            await pride.ask(b, Run("go"))
            assert order[-2:] == ["leftover cancelled", "RunEnd"]
            assert await b.chat("next") == "answered"
    checker.check(b, quiescent=True)


async def test_a_hanging_tool_in_a_direct_act_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Act is not a turn, but its caller giving up still cancels the tool and answers it."""

    async def hang() -> str:
        """Hang."""
        await trio.sleep_forever()
        return "never"

    checker = InvariantChecker()
    with checker.envelopes():
        async with Branch(chat_model=echo_model(), tools=[hang], observer=checker) as branch:
            checker.baseline(branch)
            with pytest.raises(trio.TooSlowError):
                await branch.act(ActionCall("hang"), timeout=5)
            assert await branch.chat("next") == "re: next"
    checker.check(branch, quiescent=True)
    lifecycle = [s for s in checker.signals if isinstance(s, RunStart | RunEnd | RunFailed)]
    assert [type(s).__name__ for s in lifecycle] == ["RunStart", "RunEnd"]  # the chat only


async def test_issue10_a_tool_in_a_direct_act_asking_its_own_branch_fails_fast(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An Act occupies its branch's actor; a tool waiting on that branch would wait
    forever, so it gets ReentrancyError at once (it used to hang)."""
    async with Branch(chat_model=echo_model()) as branch:

        async def ask_back() -> str:
            """Ask this tool's own branch."""
            return await branch.chat("from the tool")

        branch.register_tools([ask_back])
        with trio.fail_after(60):
            [response] = await branch.act(ActionCall("ask_back"))
        assert (response.error or "").startswith("ReentrancyError")
        assert await branch.chat("next") == "re: next"


async def test_issue10_a_tool_in_a_direct_act_removing_its_own_branch_fails_fast(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """session.remove waits for the actor to stop, which waits for the Act: refused with
    ReentrancyError, as from the branch's own turn (it used to hang)."""
    async with Session() as session:
        branch = await session.spawn(Branch(name="a", chat_model=echo_model()))

        async def leave() -> str:
            """Remove this tool's own branch from its session."""
            await session.remove(branch)
            return "removed"

        branch.register_tools([leave])
        with trio.fail_after(60):
            [response] = await branch.act(ActionCall("leave"))
        assert (response.error or "").startswith("ReentrancyError")
        assert branch in session.branches
        assert await branch.chat("next") == "re: next"


async def test_issue10_an_act_in_a_cross_branch_cycle_fails_fast(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A's Act tool asks B, whose turn asks A back: the cycle is refused, not deadlocked."""
    async with Session() as session:
        a = await session.spawn(Branch(name="a", chat_model=echo_model()))
        b = await session.spawn(Branch(name="b", chat_model=echo_model()))

        async def back_to_a(branch: Branch) -> str:
            return await pride.ask(a, Chat("back"))

        session.register_operation("back_to_a", back_to_a)

        async def ask_b() -> str:
            """Ask branch b to call a."""
            return await b.call("back_to_a")

        a.register_tools([ask_b])
        with trio.fail_after(60):
            [response] = await a.act(ActionCall("ask_b"))
        assert (response.error or "").startswith("ReentrancyError")
        assert await a.chat("next") == "re: next"
