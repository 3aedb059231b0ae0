"""Nested work joins its turn; leftovers are cancelled before the terminal (ADR-0018 D2)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

import pride
from pride import Branch, Chat, RunEnd, RunStart, TurnFinalizingError
from tests.helpers import Recorder, echo_model


async def test_nested_verb_from_an_operation_joins_the_turn() -> None:
    """An operation calling its own branch's verbs runs them inline: one RunStart, no deadlock."""
    recorder = Recorder()

    async def twice(branch: Branch) -> list[str]:
        first = await branch.chat("one")
        second = await pride.ask(branch, Chat("two"))
        return [first, second]

    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        branch.register_operation("twice", twice)
        assert await branch.call("twice") == ["re: one", "re: two"]
    assert recorder.kinds() == ["RunStart", "RunEnd"]


async def test_nested_call_from_a_spawned_task_joins_the_turn() -> None:
    """A task started with TurnScope.start_soon inherits the turn and calls inline."""
    recorder = Recorder()
    results: list[str] = []

    async def fan_out(branch: Branch) -> str:
        scope = pride.current_turn()
        assert scope is not None
        done = trio.Event()

        async def child() -> None:
            results.append(await branch.chat("from child"))
            done.set()

        scope.start_soon(child)
        await done.wait()
        return "parent"

    async with Branch(chat_model=echo_model(), observer=recorder) as branch:
        branch.register_operation("fan_out", fan_out)
        assert await branch.call("fan_out") == "parent"
    assert results == ["re: from child"]
    assert recorder.kinds() == ["RunStart", "RunEnd"]


async def test_nested_call_from_a_tool_joins_the_turn() -> None:
    """A tool that calls its own branch during an act runs inline."""
    seen: list[str] = []

    async with Branch(chat_model=echo_model()) as branch:

        async def lookup(query: str) -> str:
            """Ask the branch itself."""
            answer = await branch.chat(query)
            seen.append(answer)
            return answer

        branch.register_tools(lookup)

        async def use_tool(branch: Branch) -> object:
            return await branch.act({"function": "lookup", "arguments": {"query": "q"}})

        branch.register_operation("use_tool", use_tool)
        responses = await branch.call("use_tool")
    assert seen == ["re: q"]
    assert responses[0].output == "re: q"


async def test_leftover_nested_tasks_are_cancelled_before_the_terminal() -> None:
    """A nested task still running when the body returns is cancelled and awaited first."""
    order: list[str] = []

    def on_signal(signal: object) -> None:
        order.append(type(signal).__name__)

    async def spawn_forever(branch: Branch) -> str:
        scope = pride.current_turn()
        assert scope is not None

        async def forever() -> None:
            try:
                await trio.sleep_forever()
            finally:
                order.append("child cancelled")

        scope.start_soon(forever)
        await trio.testing.wait_all_tasks_blocked()
        return "body done"

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        branch.register_operation("spawn_forever", spawn_forever)
        assert await branch.call("spawn_forever") == "body done"
    assert order == ["RunStart", "child cancelled", "RunEnd"]


async def test_unawaited_nested_failure_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing nested task is diagnostic: the turn's result stands."""

    async def spawn_failure(branch: Branch) -> str:
        scope = pride.current_turn()
        assert scope is not None

        async def fail() -> None:
            raise ValueError("child broke")

        scope.start_soon(fail)
        await trio.testing.wait_all_tasks_blocked()
        return "fine"

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("spawn_failure", spawn_failure)
        assert await branch.call("spawn_failure") == "fine"
    assert "child broke" in caplog.text


async def test_child_outliving_the_turn_enters_as_a_new_turn() -> None:
    """A task spawned into an outside nursery that calls later goes through the mailbox."""
    recorder = Recorder()
    answers: list[str] = []

    async with trio.open_nursery() as outside:
        async with Branch(chat_model=echo_model(), observer=recorder) as branch:
            release = trio.Event()

            async def leak(branch: Branch) -> str:
                async def later() -> None:
                    await release.wait()
                    answers.append(await branch.chat("later"))

                outside.start_soon(later)  # inherits the turn's binding, then outlives it
                return "returned"

            branch.register_operation("leak", leak)
            assert await branch.call("leak") == "returned"
            release.set()
            while not answers:
                await trio.testing.wait_all_tasks_blocked()
    assert answers == ["re: later"]
    starts = recorder.of(RunStart)
    assert len(starts) == 2
    assert len(recorder.of(RunEnd)) == 2


async def test_terminal_observer_calling_the_branch_fails_fast() -> None:
    """A RunEnd subscriber re-entering its branch gets TurnFinalizingError at once."""
    errors: list[BaseException] = []

    def on_signal(signal: object) -> object:
        if isinstance(signal, RunEnd) and not errors:

            async def reenter() -> None:
                try:
                    await branch.chat("again")
                except TurnFinalizingError as exc:
                    errors.append(exc)

            return reenter()
        return None

    async with Branch(chat_model=echo_model(), observer=Recorder(on_signal)) as branch:
        assert await branch.chat("first") == "re: first"
        assert await branch.chat("second") == "re: second"
    assert len(errors) == 1
    assert "finalising" in str(errors[0])


async def test_start_soon_after_the_turn_is_refused() -> None:
    """A scope kept past its turn cannot start work."""
    kept: list[pride.TurnScope] = []

    async def keep(branch: Branch) -> None:
        scope = pride.current_turn()
        assert scope is not None
        kept.append(scope)

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("keep", keep)
        await branch.call("keep")
    with pytest.raises(RuntimeError, match="not active"):
        kept[0].start_soon(trio.sleep, 0)


async def test_logging_of_nested_failure_names_the_turn(caplog: pytest.LogCaptureFixture) -> None:
    """The log line of a failed nested task names its turn."""
    caplog.set_level(logging.ERROR)
    turn_ids = []

    async def spawn(branch: Branch) -> None:
        scope = pride.current_turn()
        assert scope is not None
        turn_ids.append(scope.turn_id)

        async def fail() -> None:
            raise KeyError("x")

        scope.start_soon(fail)
        await trio.testing.wait_all_tasks_blocked()

    async with Branch(chat_model=echo_model()) as branch:
        branch.register_operation("spawn", spawn)
        await branch.call("spawn")
    assert str(turn_ids[0]) in caplog.text


async def test_escalate_from_a_nested_task_escalates_the_turn() -> None:
    """An Escalate raised by a task started with start_soon reaches the caller and crashes."""
    caught: list[BaseException] = []

    async def spawn_escalation(branch: Branch) -> str:
        scope = pride.current_turn()
        assert scope is not None

        async def corrupt() -> None:
            raise pride.Escalate("nested task saw corrupt state")

        scope.start_soon(corrupt)
        await trio.testing.wait_all_tasks_blocked()
        return "body done"

    with pytest.raises(pride.Escalate):
        async with Branch(chat_model=echo_model()) as branch:
            branch.register_operation("spawn_escalation", spawn_escalation)
            try:
                await branch.call("spawn_escalation")
            except pride.Escalate as exc:
                caught.append(exc)
            await trio.sleep_forever()
    assert [str(exc) for exc in caught] == ["nested task saw corrupt state"]


async def test_a_nested_stream_that_fails_raises_its_error_every_time() -> None:
    """The consumer of a stream inside the branch's own turn gets the producer's
    error after the items, every time: it used to end clean, now and then, when
    it saw the end of the items before the error was recorded."""

    def fails(request: object) -> str:
        raise RuntimeError("model down")

    branch = Branch(chat_model=pride.ScriptedModel(fails))

    async def streams_nested(of: Branch) -> str:
        items_seen = 0
        try:
            async with pride.stream(of, pride.Run("inner")) as items:
                async for _ in items:
                    items_seen += 1
        except RuntimeError as exc:
            return f"{exc} after {items_seen} item(s)"
        return "ended clean"

    branch.register_operation("streams_nested", streams_nested)
    async with branch:
        outcomes = {await pride.ask(branch, pride.Call("streams_nested")) for _ in range(10)}
    assert outcomes == {"model down after 1 item(s)"}
