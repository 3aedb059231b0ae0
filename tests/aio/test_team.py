"""Issue 30: a pride Session used from asyncio code through pride.aio, every verb, asyncio.run."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from typing import Any

import pytest
import trio

import pride
import pride.aio
from pride import (
    ApprovalRequired,
    Approve,
    BranchRef,
    Chat,
    ChatAndRecord,
    Flow,
    MessageAdded,
    Operate,
    RunEnd,
    RunStart,
    Signal,
    UnknownBranch,
)
from pride.llm import ToolCall

from .kit import branch, counted, run, run_or_fail_on_hang, waiting


def test_ask_returns_the_answer_in_the_loops_own_thread() -> None:
    async def main() -> tuple[Any, int, int]:
        async with pride.aio.open_session(name="team") as team:
            await team.spawn(branch("echo"))
            answer = await team.ask("echo", Chat("hello"))

            async def where() -> int:
                return threading.get_ident()

            trio_thread = await team.run(where)
        return answer, trio_thread, threading.get_ident()

    answer, trio_thread, asyncio_thread = run(main)
    assert answer == "HELLO"
    assert trio_thread == asyncio_thread  # a guest: one thread for both loops


def test_send_gives_a_handle_and_one_callers_sends_are_served_in_order() -> None:
    async def main() -> tuple[list[Any], list[str]]:
        async with pride.aio.open_session() as team:
            member = await team.spawn(branch("echo"))
            handles = [await team.send("echo", ChatAndRecord(f"m{i}")) for i in range(20)]
            results = [await handle.result() for handle in handles]
            assert all(handle.turn_id is not None and handle.done for handle in handles)
            assert len({handle.turn_id for handle in handles}) == 20
            with pytest.raises(pride.ReplyConsumedError):
                await handles[0].result()
            recorded = [m.instruction for m in member.messages if m.role == "user"]
        return results, recorded

    results, recorded = run(main)
    assert results == [f"M{i}" for i in range(20)]
    assert recorded == [f"m{i}" for i in range(20)]


def test_a_sent_command_can_be_cancelled_from_its_handle() -> None:
    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("slow", waiting()))
            running = await team.send("slow", Chat("first"))
            queued = await team.send("slow", Chat("second"))
            queued.cancel()
            running.cancel()
            for handle in (running, queued):
                with pytest.raises(pride.TurnCancelled):
                    await handle.result()
            assert queued.turn_id is None  # dropped before it started

    run(main)


def test_stream_yields_the_items_in_order_and_the_result_ends_it() -> None:
    produced: list[int] = []

    async def main() -> list[Any]:
        async with pride.aio.open_session() as team:
            member = branch("counter")
            member.register_operation("counted", functools.partial(counted, produced=produced))
            await team.spawn(member)
            got = []
            async with team.stream("counter", pride.Call("counted", n=5)) as items:
                async for item in items:
                    assert len(produced) <= len(got) + 2  # zero buffer: the next one waits, no more
                    got.append(item)
                    await asyncio.sleep(0.001)  # a slow consumer
                assert items.turn_id is not None
            chunks = []
            async with team.stream("counter", ChatAndRecord("tell me a story")) as text:
                async for chunk in text:
                    chunks.append(chunk)
            assert "".join(chunks) == "TELL ME A STORY"
        return got

    assert run(main) == [0, 1, 2, 3, 4]


def test_a_slow_stream_consumer_holds_the_turn_back() -> None:
    """Backpressure: the producer never runs more than one item ahead of the loop."""
    produced: list[int] = []
    behind: list[int] = []

    async def main() -> None:
        async with pride.aio.open_session() as team:
            member = branch("counter")
            member.register_operation("counted", functools.partial(counted, produced=produced))
            await team.spawn(member)
            async with team.stream("counter", pride.Call("counted", n=200)) as items:
                taken = 0
                async for _ in items:
                    taken += 1
                    await asyncio.sleep(0)
                    behind.append(len(produced) - taken)
                    if taken == 20:
                        break  # leaving early ends the turn
            # The block's exit waited for the turn to end: nothing more will be produced.
            stats = team.session.statistics()
            assert stats.turns_done + stats.turns_failed == 1
            assert len(produced) <= 21

    run(main)
    assert max(behind) <= 1


def test_resolve_continues_a_turn_that_waits_for_approval() -> None:
    ran: list[str] = []

    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    replies: list[Any] = [ToolCall("send_email", {"to": "bob"}, id="call_email"), "emailed bob"]
    model = pride.ScriptedModel(lambda request: replies.pop(0))

    async def main() -> Any:
        async with pride.aio.open_session() as team:
            await team.spawn(
                branch("mailer", model, tools=[pride.Tool(send_email, requires_approval=True)])
            )
            with pytest.raises(ApprovalRequired) as stopped:
                await team.ask("mailer", Operate("email bob", actions=True))
            assert ran == []
            [pending] = stopped.value.pending
            return await team.resolve(stopped.value.turn_id, {pending.call_id: Approve()})

    result = run(main)
    assert result.output == "emailed bob"
    assert ran == ["bob"]


def test_flow_runs_across_the_members() -> None:
    async def main() -> pride.FlowResult:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("a"))
            await team.spawn(branch("b"))
            flow = Flow()
            first = flow.add("a", Chat("first"), name="first")
            flow.add("b", lambda upstream: Chat(upstream["first"] + " then"), depends_on=[first])
            return await team.flow(flow, max_concurrent=2)

    result = run(main)
    assert result["first"] == "FIRST"
    assert set(result.outcomes.values()) == {"completed"}


def test_observe_runs_sync_and_coroutine_handlers_on_the_asyncio_side() -> None:
    seen: list[tuple[str, str]] = []

    async def main() -> None:
        async with pride.aio.open_session() as team:
            loop = asyncio.get_running_loop()

            def plain(signal: Signal) -> None:
                assert asyncio.get_running_loop() is loop
                seen.append(("plain", type(signal).__name__))

            @team.observe(RunStart, RunEnd)
            async def coroutine(signal: Signal) -> None:
                assert asyncio.current_task() is not None  # an asyncio task, not trio's
                await asyncio.sleep(0)
                seen.append(("coroutine", type(signal).__name__))

            team.observe(RunEnd, handler=plain)
            await team.spawn(branch("echo"))
            await team.ask("echo", Chat("one"))
            await team.ask("echo", Chat("two"))
            assert team.unobserve(plain) == 1
            await team.ask("echo", Chat("three"))

    run(main)  # closing the team lets the handlers take every queued signal
    assert [kind for who, kind in seen if who == "coroutine"] == ["RunStart", "RunEnd"] * 3
    assert [kind for who, kind in seen if who == "plain"] == ["RunEnd", "RunEnd"]


def test_observe_refuses_a_bad_handler_or_filter_at_once_and_keeps_nothing() -> None:
    """A handler that cannot be called is a TypeError from ``observe``, as from the
    trio Session's (it was taken, and failed at every signal, logged); a refused
    filter leaves no handler task behind (one was left until the team closed)."""

    async def main() -> None:
        async with pride.aio.open_session() as team:
            before = asyncio.all_tasks()
            with pytest.raises(TypeError, match="handler must be callable"):
                team.observe(RunEnd, handler=42)  # type: ignore[type-var]
            with pytest.raises(TypeError, match="filters"):
                team.observe("RunEnd", handler=print)
            await asyncio.sleep(0)  # one loop pass: a consumer told to end has ended
            assert asyncio.all_tasks() == before

    run(main)


def test_a_handler_that_closes_the_team_closes_it_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An observer handler may close its team: the close does not wait for the
    handler's own task (it waited the whole drain grace for itself, logged that the
    handler did not take its signals, then cancelled it, so ``aclose`` raised
    CancelledError in the handler)."""
    outcomes: list[str] = []

    async def main() -> None:
        team = await pride.aio.open_session()
        closed = asyncio.Event()

        async def close_on_answer(signal: Signal) -> None:
            try:
                await team.aclose()
                outcomes.append("closed")
            except BaseException as exc:
                outcomes.append(type(exc).__name__)
                raise
            finally:
                closed.set()

        team.observe(RunEnd, handler=close_on_answer)
        await team.spawn(branch("echo"))
        await team.ask("echo", Chat("the last one"))
        await closed.wait()
        assert "closed" in repr(team)

    with caplog.at_level(logging.WARNING, logger="pride.aio"):
        run(main)
    assert outcomes == ["closed"]
    assert not caplog.records, caplog.records


def test_a_handler_closing_the_team_during_its_shutdown_does_not_deadlock() -> None:
    """A handler that closes the team while the team is already closing (on a
    ``RunFailed``, which the shutdown's own cancellations emit) waits for the session
    to stop, not for the handlers: the close waited for the handler, the handler for
    the close, and the block's exit never returned."""
    outcomes: list[str] = []

    async def main() -> None:
        async def close_on_failure(signal: Signal) -> None:
            await team.aclose()
            outcomes.append("closed")

        started = asyncio.Event()
        with pytest.raises(KeyError):
            async with pride.aio.open_session() as team:
                team.observe(pride.RunFailed, handler=close_on_failure)
                team.observe(RunStart, handler=lambda signal: started.set())
                await team.spawn(branch("slow", waiting()))
                asked = asyncio.create_task(team.ask("slow", Chat("cancelled by the shutdown")))
                await started.wait()
                raise KeyError("leaving at once")
        with pytest.raises(pride.TurnCancelled):
            await asked

    run_or_fail_on_hang(main)
    assert outcomes == ["closed"]


def test_a_handler_that_unobserves_itself_as_the_team_closes_leaves_the_others_drained(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler that unsubscribes itself while the closing team drains it (here: as
    the drain's grace runs out and cancels it) does not make the close skip the next
    handler, whose task was left waiting for good after the team closed."""
    seen: list[str] = []

    async def main() -> None:
        async with pride.aio.open_session() as team:

            async def stuck(signal: Signal) -> None:
                try:
                    await asyncio.Event().wait()  # until the drain's grace runs out
                finally:
                    team.unobserve(stuck)

            team.observe(RunEnd, handler=stuck)
            team.observe(RunEnd, handler=lambda signal: seen.append("next"))
            await team.spawn(branch("echo"))
            await team.ask("echo", Chat("hi"))
        # kit.run checks that no task is left on the loop

    with caplog.at_level(logging.WARNING, logger="pride.aio"):
        run(main)
    assert seen == ["next"]
    assert "did not take its last" in caplog.text


def test_a_raising_handler_is_logged_and_the_next_signal_still_comes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def fragile(signal: Signal) -> None:
        calls.append(type(signal).__name__)
        raise ValueError("handler bug")

    async def main() -> None:
        async with pride.aio.open_session() as team:
            team.observe(RunEnd, handler=fragile)
            await team.spawn(branch("echo"))
            assert await team.ask("echo", Chat("one")) == "ONE"
            assert await team.ask("echo", Chat("two")) == "TWO"

    with caplog.at_level(logging.ERROR, logger="pride.aio"):
        run(main)
    assert calls == ["RunEnd", "RunEnd"]
    assert sum("handler bug" in r.exc_text for r in caplog.records if r.exc_text) == 2


def test_a_blocking_callback_delays_the_guest_but_does_not_break_it() -> None:
    """A sync handler that blocks the loop blocks trio too (one thread), and then all goes on."""

    def blocking(signal: Signal) -> None:
        threading.Event().wait(0.05)  # blocks the loop's thread

    async def main() -> None:
        async with pride.aio.open_session() as team:
            team.observe(RunEnd, handler=blocking)
            await team.spawn(branch("echo"))
            started = asyncio.get_running_loop().time()
            answers = await asyncio.gather(*(team.ask("echo", Chat(f"q{i}")) for i in range(3)))
            assert answers == [f"Q{i}" for i in range(3)]
            # The trio side still keeps its own time: a trio sleep ends when it should.
            await team.run(trio.sleep, 0.01)
            assert asyncio.get_running_loop().time() - started >= 0.15
            assert await team.ask("echo", Chat("after")) == "AFTER"

    run(main)


def test_ref_names_a_member_and_every_verb_takes_it() -> None:
    async def main() -> None:
        async with pride.aio.open_session() as team:
            member = await team.spawn(branch("echo"))
            ref = team.ref("echo")
            assert ref == BranchRef(member.id, "echo")
            assert await team.ask(ref, Chat("by ref")) == "BY REF"
            assert await team.ask(member.id, Chat("by id")) == "BY ID"
            async with team.stream(ref, ChatAndRecord("streamed")) as items:
                assert "".join([item async for item in items]) == "STREAMED"
            with pytest.raises(UnknownBranch):
                team.ref("nobody")

    run(main)


def test_message_signals_reach_a_handler_in_turn_order() -> None:
    kinds: list[str] = []

    async def main() -> None:
        async with pride.aio.open_session() as team:
            team.observe(
                lambda s: s.branch_name == "echo",
                handler=lambda s: kinds.append(type(s).__name__),
            )
            await team.spawn(branch("echo"))
            await team.ask("echo", ChatAndRecord("hello"))

    run(main)
    turn = [k for k in kinds if k in {"RunStart", "MessageAdded", "RunEnd"}]
    assert turn == ["RunStart", "MessageAdded", "MessageAdded", "RunEnd"]
    assert MessageAdded.__name__ in kinds
