"""Issue 30: cancellation both ways, many callers at once, and nothing left on either side."""

from __future__ import annotations

import asyncio
import collections
import functools
import gc
import random
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import pride
import pride.aio
from pride import Chat, ChatAndRecord, RunEnd, RunFailed, RunStart, Signal
from tests.helpers import Gate

from .kit import branch, counted, run, waiting


class Terminals:
    """Every turn's start and terminal signals, as the asyncio side saw them."""

    def __init__(self) -> None:
        self.starts: set[Any] = set()
        self.ends: collections.Counter[Any] = collections.Counter()
        self._changed = asyncio.Event()

    def __call__(self, signal: Signal) -> None:
        if isinstance(signal, RunStart):
            self.starts.add(signal.turn_id)
        else:
            self.ends[signal.turn_id] += 1
        self._changed.set()

    async def settled(self) -> None:
        """Wait until every turn seen starting has had its terminal (woken by each signal)."""
        while set(self.ends) != self.starts:
            self._changed.clear()
            await self._changed.wait()

    def check(self) -> None:
        assert set(self.ends) == self.starts, "a turn without a terminal, or the reverse"
        assert set(self.ends.values()) <= {1}, "a turn with two terminals"


async def _trio_tasks_left() -> int:
    """Tasks of the trio run other than the guest's own (its hot task, parked workers)."""
    root = trio.lowlevel.current_root_task()
    assert root is not None
    found = 0
    stack = [root]
    while stack:
        task = stack.pop()
        found += 1
        stack.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return found


def test_a_thousand_callers_over_ten_branches_are_each_answered_once() -> None:
    async def main() -> None:
        terminals = Terminals()
        async with pride.aio.open_session() as team:
            team.observe(RunStart, RunEnd, RunFailed, handler=terminals)
            for index in range(10):
                await team.spawn(branch(f"b{index}"))
            answers = await asyncio.gather(
                *(team.ask(f"b{i % 10}", Chat(f"caller {i}")) for i in range(1000))
            )
        assert answers == [f"CALLER {i}" for i in range(1000)]
        assert len(terminals.starts) == 1000
        terminals.check()

    run(main)


def test_cancelling_the_asyncio_caller_cancels_the_running_turn() -> None:
    async def main() -> None:
        terminals = Terminals()
        async with pride.aio.open_session() as team:
            team.observe(RunStart, RunEnd, RunFailed, handler=terminals)
            await team.spawn(branch("slow", waiting()))
            started = asyncio.Event()
            team.observe(RunStart, handler=lambda s: started.set())
            task = asyncio.create_task(team.ask("slow", Chat("forever")))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The trio call ended before the cancellation went on; the turn ends promptly.
            assert not team.calls
            async with asyncio.timeout(1):
                await terminals.settled()
            assert team.session.statistics().turns_failed == 1
        terminals.check()
        assert len(terminals.starts) == 1

    run(main)


def test_a_timeout_raises_timeouterror_and_the_turn_ends() -> None:
    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("slow", waiting()))
            with pytest.raises(TimeoutError):
                await team.ask("slow", Chat("forever"), timeout=0.01)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.01):
                    await team.ask("slow", Chat("forever"))
            assert team.session.statistics().turns_failed == 2

    run(main)


def test_asks_past_a_full_mailbox_wait_in_line_and_one_given_up_never_starts() -> None:
    gate = Gate()

    async def main() -> None:
        terminals = Terminals()
        async with pride.aio.open_session() as team:
            team.observe(RunStart, RunEnd, RunFailed, handler=terminals)
            await team.spawn(branch("small", gate.model, mailbox_size=1))
            running = asyncio.create_task(team.ask("small", Chat("running")))
            await team.run(gate.started.wait)
            texts = ("queued", "lined", "given up")
            asks = {text: asyncio.create_task(team.ask("small", Chat(text))) for text in texts}
            timed_out = asyncio.create_task(team.ask("small", Chat("timed out"), timeout=0.01))
            await asyncio.sleep(0)  # one loop pass: each task delivers before its first await
            assert team.session.statistics().queued == 4  # one in the mailbox, three in line
            with pytest.raises(TimeoutError) as info:
                await timed_out
            assert isinstance(info.value.__cause__, pride.TurnCancelled)
            asks["given up"].cancel()
            with pytest.raises(asyncio.CancelledError):
                await asks["given up"]
            assert team.session.statistics().queued == 2
            for text in ("running", "queued", "lined"):
                gate.release(text)
            assert await running == "reply to running"
            assert [await asks[text] for text in ("queued", "lined")] == [
                "reply to queued",
                "reply to lined",
            ]
            assert not team.calls
            await terminals.settled()
        assert [text for event, text in gate.events if event == "start"] == [
            "running",
            "queued",
            "lined",
        ]
        terminals.check()
        assert len(terminals.starts) == 3

    run(main)


def test_send_to_a_full_mailbox_waits_for_room_and_a_cancelled_wait_keeps_the_outcome() -> None:
    gate = Gate()

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("small", gate.model, mailbox_size=1))
            running = await team.send("small", Chat("running"))
            await team.run(gate.started.wait)
            queued = await team.send("small", Chat("queued"))
            third = asyncio.create_task(team.send("small", Chat("third")))
            await asyncio.sleep(0)  # one loop pass: the send finds the mailbox full
            await team.run(trio.testing.wait_all_tasks_blocked)
            assert not third.done()  # backpressure: it waits for room
            gate.release("running")
            sent = await third
            waiter = asyncio.create_task(queued.result())
            await asyncio.sleep(0)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            gate.release("queued")
            gate.release("third")
            assert await queued.result() == "reply to queued"  # the outcome was kept
            assert await sent.result() == "reply to third"
            assert await running.result() == "reply to running"
            with pytest.raises(pride.ReplyConsumedError):
                await running.result()

    run(main)


def test_waits_given_up_on_a_sent_command_leave_nothing_behind() -> None:
    """A ``Sent.result()`` abandoned again and again (a poll with a timeout) holds
    nothing of the command's: each wait leaves when its caller does."""
    gate = Gate()

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("slow", gate.model))
            sent = await team.send("slow", Chat("stuck"))
            for _ in range(200):
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(sent.result(), 1e-6)
            assert not team.calls
            gc.collect()
            abandoned = [o for o in gc.get_objects() if isinstance(o, asyncio.Future) and o.done()]
            assert len(abandoned) < 20, f"{len(abandoned)} futures of abandoned waits kept"
            gate.release("stuck")
            assert await sent.result() == "reply to stuck"

    run(main)


def test_a_closing_team_answers_its_asks_into_another_teams_branch_teamclosed() -> None:
    """Asks of a team that closes, waiting on a branch it does not own (running,
    queued, in line for room), are answered TeamClosed, whatever state they were in."""
    gate = Gate()

    async def main() -> None:
        asking = await pride.aio.open_session()
        owning = await pride.aio.open_session()
        target = await owning.spawn(branch("theirs", gate.model, mailbox_size=1))
        asks = [asyncio.create_task(asking.ask(target, Chat(text))) for text in ("a", "b", "c")]
        await asyncio.sleep(0)  # one loop pass: each delivers
        await owning.run(gate.started.wait)
        await asking.aclose()
        answers = await asyncio.gather(*asks, return_exceptions=True)
        assert [type(answer).__name__ for answer in answers] == ["TeamClosed"] * 3, answers
        await owning.aclose()

    run(main)


@pytest.mark.parametrize("seed", range(3))
def test_callers_cancelled_at_random_points_leave_one_terminal_per_turn(seed: int) -> None:
    """Queued, running and streaming callers cancelled anywhere: every turn that started
    ends with exactly one terminal, and no work is left in trio or asyncio."""
    rng = random.Random(seed)
    produced: list[int] = []

    async def asker(team: pride.aio.Team, name: str) -> None:
        await team.ask(name, Chat("hi"))

    async def streamer(team: pride.aio.Team, name: str) -> None:
        async with team.stream(name, pride.Call("counted", n=50)) as items:
            async for _ in items:
                await asyncio.sleep(0)

    async def main() -> None:
        terminals = Terminals()
        async with pride.aio.open_session() as team:
            team.observe(RunStart, RunEnd, RunFailed, handler=terminals)
            for index in range(4):
                model = waiting(seconds=0.002) if index % 2 else None
                member = branch(f"b{index}", model)
                member.register_operation("counted", functools.partial(counted, produced=produced))
                await team.spawn(member)
            tasks = []
            for index in range(60):
                name = f"b{index % 4}"
                work = streamer if index % 3 == 0 else asker
                tasks.append(asyncio.create_task(work(team, name)))
            for task in rng.sample(tasks, 40):
                # A random number of loop passes (not of seconds): the point each caller is
                # cancelled at (queued, running, streaming) varies by seed, not by load.
                for _ in range(rng.randrange(12)):
                    await asyncio.sleep(0)
                task.cancel()
            outcomes = await asyncio.gather(*tasks, return_exceptions=True)
            kinds = {type(outcome).__name__ for outcome in outcomes}
            assert kinds <= {"NoneType", "CancelledError"}, outcomes
            assert "CancelledError" in kinds
            assert not team.calls
            async with asyncio.timeout(5):
                await terminals.settled()
            assert team.session.statistics().queued == 0
            left = await team.run(_trio_tasks_left)
            left_again = await team.run(_trio_tasks_left)
            assert left == left_again  # nothing is still winding down
        terminals.check()

    run(main)


def test_a_failure_on_the_trio_side_arrives_as_prides_own_class() -> None:
    async def boom() -> None:
        async with trio.open_nursery() as nursery:  # a group raised by the user's own nursery
            nursery.start_soon(trio.sleep, 1)
            raise KeyError("inside")

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))
            with pytest.raises(pride.UnknownBranch):
                await team.ask("nobody", Chat("hi"))
            with pytest.raises(pride.BudgetExceeded):
                await team.ask("echo", Chat("hi", budget=pride.Budget(max_model_calls=0)))
            with pytest.raises(ExceptionGroup) as group:  # run(): the fn's own nursery
                await team.run(boom)
            assert group.group_contains(KeyError)

    run(main)


async def _passes_until(condition: Callable[[], bool]) -> None:
    """Let the loop run one pass at a time until ``condition()`` holds: a caller
    answered in a pass is woken in the next one, so this acts between the two."""
    while not condition():
        await asyncio.sleep(0)


def test_a_result_wait_cancelled_as_the_outcome_arrives_leaves_it_for_the_next() -> None:
    """``await handle.result()`` cancelled after the outcome arrived but before the
    waiting task woke leaves the outcome for a later wait: it was taken out of the
    command at its arrival, and the later wait raised ReplyConsumedError."""
    gate = Gate()

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("slow", gate.model))
            sent = await team.send("slow", Chat("answered"))
            waiter = asyncio.create_task(sent.result())
            await team.run(gate.started.wait)
            gate.release("answered")
            await _passes_until(lambda: sent.done)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert await sent.result() == "reply to answered"

    run(main)


def test_a_stream_item_whose_caller_is_cancelled_as_it_arrives_comes_next() -> None:
    """An ``anext(items)`` cancelled after its item arrived but before its task woke
    (a keep-alive timeout around each item, running out as one comes) leaves the item
    for the next one: it was taken from the turn and lost, and the stream went on."""
    produced: list[int] = []

    async def main() -> list[Any]:
        async with pride.aio.open_session() as team:
            member = branch("counter")
            member.register_operation("counted", functools.partial(counted, produced=produced))
            await team.spawn(member)
            async with team.stream("counter", pride.Call("counted", n=3)) as items:
                holding = len(team.calls)  # the stream's own call, open for the block
                first = asyncio.create_task(anext(items))
                await _passes_until(lambda: len(team.calls) > holding)  # asking for it
                await _passes_until(lambda: len(team.calls) == holding)  # answered
                first.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await first
                got = [item async for item in items]
            return got

    assert run(main) == [0, 1, 2]


def test_a_send_cancelled_as_its_command_is_queued_leaves_nothing_queued() -> None:
    """``team.send`` waiting for room, cancelled in the loop pass that queued its
    command, drops the command: it ran, though its sender got CancelledError and no
    handle (a cancelled call leaves no work behind)."""
    gate = Gate()

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("small", gate.model, mailbox_size=1))
            running = await team.send("small", Chat("running"))
            await team.run(gate.started.wait)
            queued = await team.send("small", Chat("queued"))
            late = asyncio.create_task(team.send("small", Chat("late")))
            await _passes_until(lambda: bool(team.calls))  # waiting for room, in trio
            gate.release("running")
            await _passes_until(lambda: not team.calls)  # queued: its caller not woken yet
            late.cancel()
            with pytest.raises(asyncio.CancelledError):
                await late
            assert await running.result() == "reply to running"
            gate.release("queued")
            assert await queued.result() == "reply to queued"
            gate.release("late")
            assert team.session.statistics().queued == 0
        assert [text for event, text in gate.events if event == "start"] == ["running", "queued"]

    run(main)


def test_a_run_function_s_nursery_cancelled_by_the_close_answers_teamclosed() -> None:
    """A ``team.run`` function with a nursery of its own, cancelled because the team
    closed, answers TeamClosed: its nursery's group of ``trio.Cancelled`` reached the
    asyncio caller as it was (an exception group of trio's cancellations)."""

    async def with_children(started: trio.Event) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            started.set()
            await trio.sleep_forever()

    async def main() -> None:
        team = await pride.aio.open_session()
        started = trio.Event()
        running = asyncio.create_task(team.run(with_children, started))
        await team.run(started.wait)
        await team.aclose()
        with pytest.raises(pride.aio.TeamClosed):
            await running

    run(main)


@pytest.mark.parametrize("seed", range(3))
def test_a_stream_read_with_a_timeout_around_each_item_loses_no_item(seed: int) -> None:
    """Each ``anext(items)`` cancelled after a random number of loop passes (a keep-alive
    timeout around each item), then asked again: the items come in order, none lost.
    An item the turn handed over in trio just before the cancellation took effect was
    the lost call's, as was one that came with the cancellation."""
    rng = random.Random(seed)
    produced: list[int] = []

    async def main() -> int:
        given_up = 0
        async with pride.aio.open_session() as team:
            member = branch("counter")
            member.register_operation("counted", functools.partial(counted, produced=produced))
            await team.spawn(member)
            for _ in range(5):
                got: list[int] = []
                async with team.stream("counter", pride.Call("counted", n=40)) as items:
                    while True:
                        asking = asyncio.create_task(anext(items))
                        for _ in range(rng.randrange(4)):
                            await asyncio.sleep(0)
                        asking.cancel()
                        try:
                            got.append(await asking)
                        except asyncio.CancelledError:
                            given_up += 1
                        except StopAsyncIteration:
                            break
                assert got == list(range(40))
        return given_up

    assert run(main) > 0


def _loop_passes(passes: int) -> pride.ScriptedModel:
    """A model whose every answer takes ``passes`` passes of the asyncio loop: a turn
    does not end before a caller woken as it was queued has run (a real model's answer
    takes far longer)."""

    async def reply(request: Any) -> str:
        loop = asyncio.get_running_loop()  # trio code runs in the loop's thread
        for _ in range(passes):
            passed = trio.Event()
            loop.call_soon(passed.set)
            await passed.wait()
        return str(request.messages[-1]["content"]).upper()

    return pride.ScriptedModel(reply)


@pytest.mark.parametrize("seed", range(3))
def test_sends_cancelled_at_random_points_leave_no_command_behind(seed: int) -> None:
    """Sends waiting for room in a full mailbox, cancelled at random points: only the
    commands of sends that returned a handle run. One queued by trio just before the
    cancellation took effect ran, its sender having got CancelledError."""
    rng = random.Random(seed)

    async def main() -> None:
        async with pride.aio.open_session() as team:
            member = await team.spawn(branch("small", _loop_passes(5), mailbox_size=1))
            handed: set[str] = set()
            for round_ in range(20):
                texts = [f"{round_}.{i}" for i in range(40)]
                sends = [asyncio.create_task(team.send("small", ChatAndRecord(t))) for t in texts]
                for task in rng.sample(sends, 25):
                    for _ in range(rng.randrange(30)):
                        await asyncio.sleep(0)
                    task.cancel()
                outcomes = await asyncio.gather(*sends, return_exceptions=True)
                for text, outcome in zip(texts, outcomes, strict=True):
                    if isinstance(outcome, pride.aio.Sent):
                        handed.add(text)
                        await outcome.result()
                    else:
                        assert isinstance(outcome, asyncio.CancelledError), outcome
            asked = [m.instruction for m in member.messages if m.role == "user"]
            answered = [m.text for m in member.messages if m.role == "assistant"]
            # A command queued for a cancelled sender is dropped, or cancelled if its turn
            # had begun (its instruction is recorded first): it never gets its answer.
            assert sorted(answered) == sorted(handed), set(answered) ^ handed
            assert len(asked) == len(set(asked)) and set(asked) >= handed

    run(main)
