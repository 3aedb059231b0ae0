"""Issue 30: a team's life on an asyncio loop: opening, sharing the guest run, closing, errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

import pride
import pride.aio
from pride import Chat, Escalate, SupervisorFailed
from tests.helpers import Gate

from .kit import DEADLINE, branch, run, waiting


async def _token() -> Any:
    return trio.lowlevel.current_trio_token()


def test_a_call_after_the_block_raises_teamclosed() -> None:
    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))
        with pytest.raises(pride.aio.TeamClosed, match="closed"):
            await team.ask("echo", Chat("late"))
        with pytest.raises(pride.aio.TeamClosed):
            async with team.stream("echo", Chat("late")):
                pass
        with pytest.raises(pride.aio.TeamClosed, match="open it first"):
            await pride.aio.open_session().ask("echo", Chat("early"))

    run(main)


def test_a_call_from_another_thread_raises_wrongloop() -> None:
    errors: list[BaseException] = []

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))

            def elsewhere() -> None:
                try:
                    asyncio.run(team.ask("echo", Chat("from a thread")))
                except BaseException as exc:
                    errors.append(exc)
                try:
                    team.ref("echo")
                except BaseException as exc:
                    errors.append(exc)

            await asyncio.to_thread(elsewhere)
            assert await team.ask("echo", Chat("still fine")) == "STILL FINE"

    run(main)
    assert [type(e) for e in errors] == [pride.aio.WrongLoop, pride.aio.WrongLoop]
    assert "run_coroutine_threadsafe" in str(errors[0])
    assert "another loop" in str(errors[0]) and "without a running loop" in str(errors[1])


def test_an_exception_in_the_block_propagates_after_the_shutdown() -> None:
    seen: list[str] = []

    async def main() -> None:
        team = pride.aio.open_session(grace=30)
        with pytest.raises(KeyError, match="block"):
            async with team:
                member = await team.spawn(branch("slow", waiting()))
                team.observe(pride.RunFailed, handler=lambda s: seen.append(s.error_type))
                started = asyncio.Event()
                team.observe(pride.RunStart, handler=lambda s: started.set())
                task = asyncio.create_task(team.ask("slow", Chat("never answered")))
                await started.wait()
                raise KeyError("block")
        # Left at once (not after the 30 s grace), the turn cancelled and answered:
        assert not member.running
        with pytest.raises(pride.TurnCancelled):
            await task

    run(main)
    assert seen == ["TurnCancelled"]


def test_cancelling_the_block_shuts_the_session_down_first() -> None:
    stopped: list[str] = []

    async def main() -> None:
        inside = asyncio.Event()

        async def block() -> None:
            async with pride.aio.open_session() as team:
                team.observe(pride.BranchStopped, handler=lambda s: stopped.append(s.reason))
                await team.spawn(branch("echo"))
                inside.set()
                await asyncio.Event().wait()

        task = asyncio.create_task(block())
        await inside.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(main)
    assert stopped == ["shutdown"]


def test_teams_on_one_loop_share_one_guest_run_which_ends_with_the_last() -> None:
    async def main() -> None:
        async with pride.aio.open_session(name="a") as a:
            async with pride.aio.open_session(name="b") as b:
                assert await a.run(_token) is await b.run(_token)
                await a.spawn(branch("x"))
                await b.spawn(branch("x"))  # separate sessions: the same name twice
                assert await a.ask("x", Chat("a")) == "A"
            assert await a.ask("x", Chat("still")) == "STILL"
            first = await a.run(_token)
        async with pride.aio.open_session() as c:
            assert await c.run(_token) is not first  # a new run for the next team

    run(main)


def test_a_failed_session_cancels_the_block_and_raises_supervisorfailed() -> None:
    async def crash(branch: pride.Branch) -> None:
        raise Escalate("state is corrupt")

    async def main() -> None:
        member = branch("fragile")
        member.register_operation("crash", crash)
        with pytest.raises(SupervisorFailed):
            async with pride.aio.open_session(max_restarts=0) as team:
                await team.spawn(member)
                with pytest.raises(Escalate):
                    await team.ask("fragile", pride.Call("crash"))
                await asyncio.Event().wait()  # cancelled when the session fails
        with pytest.raises(pride.aio.TeamClosed):
            await team.ask("fragile", Chat("after"))

    run(main)


def test_opening_with_bad_session_arguments_raises_their_error() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="grace"):
            async with pride.aio.open_session(grace=-1):
                pass
        with pytest.raises(TypeError):
            async with pride.aio.open_session(colour="blue"):
                pass
        async with pride.aio.open_session() as team:  # the guest run is still healthy
            await team.spawn(branch("echo"))
            assert await team.ask("echo", Chat("ok")) == "OK"

    run(main)


def test_a_loop_that_already_hosts_trio_is_refused_clearly() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        # A guest shares the host's thread: the host may set a trio Event directly.
        release = trio.Event()

        trio.lowlevel.start_guest_run(
            release.wait,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )
        try:
            with pytest.raises(RuntimeError, match="already runs trio"):
                async with pride.aio.open_session():
                    pass
        finally:
            release.set()
            (await done).unwrap()

    run(main)


def test_a_team_lives_across_the_cells_of_a_loop_that_was_already_running() -> None:
    """What a notebook does: the loop runs for good, each cell is a task on it, and a team
    opened by one cell (``team = await open_session()``) serves the next ones."""
    cells: list[Any] = []
    namespace: dict[str, Any] = {}

    async def cell_1() -> None:
        namespace["team"] = team = await pride.aio.open_session(name="notebook")
        await team.spawn(branch("echo"))

    async def cell_2() -> None:
        cells.append(await namespace["team"].ask("echo", Chat("top-level await")))

    async def cell_3() -> None:
        await namespace["team"].aclose()
        await namespace["team"].aclose()  # idempotent

    def kernel() -> None:
        loop = asyncio.new_event_loop()
        try:

            async def serve() -> None:  # the kernel: runs cells as they come, idles between
                for cell in (cell_1, cell_2, cell_3):
                    await loop.create_task(cell())
                    await asyncio.sleep(0.01)
                loop.stop()

            loop.call_soon(loop.create_task, serve())
            loop.run_forever()
        finally:
            loop.close()

    kernel()
    assert cells == ["TOP-LEVEL AWAIT"]


def test_it_runs_under_uvloop() -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> list[Any]:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))
            answer = await team.ask("echo", Chat("uv"))
            async with team.stream("echo", pride.ChatAndRecord("streamed")) as items:
                chunks = [chunk async for chunk in items]
            task = asyncio.create_task(team.ask("echo", Chat("cancelled")))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return [answer, "".join(chunks), type(asyncio.get_running_loop()).__module__]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == ["UV", "STREAMED", "uvloop"]


def test_a_call_awaited_in_trio_code_raises_wrongloop_and_does_nothing() -> None:
    """A team's coroutine awaited in trio code (a tool, an operation, a ``team.run``
    function) raises WrongLoop naming the trio API, before it delivers or spawns
    anything: it used to do the work and then fail at its first asyncio await."""

    async def main() -> None:
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))

            async def in_trio() -> list[BaseException]:
                errors: list[BaseException] = []
                calls: list[Callable[[], Awaitable[Any]]] = [
                    lambda: team.ask("echo", Chat("asked from trio")),
                    lambda: team.send("echo", Chat("sent from trio")),
                    lambda: team.spawn(branch("spawned from trio")),
                    lambda: team.run(trio.sleep, 0),
                ]
                for call in calls:
                    try:
                        await call()
                    except BaseException as exc:
                        errors.append(exc)
                try:
                    async with team.stream("echo", pride.ChatAndRecord("streamed from trio")):
                        pass
                except BaseException as exc:
                    errors.append(exc)
                return errors

            errors = await team.run(in_trio)
            assert [type(e) for e in errors] == [pride.aio.WrongLoop] * 5, errors
            assert all("team.session" in str(e) for e in errors), errors[0]
            stats = team.session.statistics()
            assert (stats.branches, stats.queued, stats.turns_done) == (1, 0, 0)
            assert await team.ask("echo", Chat("still open")) == "STILL OPEN"

    run(main)


def test_aclose_awaited_in_trio_code_raises_wrongloop_and_the_team_still_closes() -> None:
    """``team.aclose()`` awaited in trio code raises WrongLoop and leaves the team
    as it was: it used to start the close and fail at its first asyncio await,
    and the real close then waited for that one forever."""

    async def main() -> None:
        team = await pride.aio.open_session()
        with pytest.raises(pride.aio.WrongLoop, match=r"team\.session"):
            await team.run(team.aclose)
        assert "open" in repr(team)
        closing = asyncio.create_task(team.aclose())
        done, _ = await asyncio.wait((closing,), timeout=DEADLINE / 3)
        assert closing in done, "the close hung"

    run(main)


def test_a_graceful_close_cancelled_stops_the_session_at_once() -> None:
    """A close waiting out its grace for a running turn (the block left normally,
    ``aclose()``), cancelled (Ctrl-C under asyncio.run, a shutdown timeout), stops
    the session at once, then raises CancelledError: it waited out the whole grace."""
    gate = Gate()

    async def main() -> None:
        team = await pride.aio.open_session(grace=2 * DEADLINE / 3)
        await team.spawn(branch("slow", gate.model))
        asked = asyncio.create_task(team.ask("slow", Chat("never answered")))
        await team.run(gate.started.wait)
        closing = asyncio.create_task(team.aclose())
        await asyncio.sleep(0)  # one loop pass: the close has begun, with its grace
        assert "closing" in repr(team)
        closing.cancel()
        done, _ = await asyncio.wait((closing,), timeout=DEADLINE / 6)
        assert closing in done, "the cancelled close waited out its grace"
        assert closing.cancelled()
        with pytest.raises(pride.TurnCancelled):
            await asked

    run(main)


def test_a_team_left_open_when_its_loop_stopped_is_named_by_the_next_refusal() -> None:
    """A team never closed when its loop stopped leaves its trio run in the thread for
    good, so no team (no trio) can start there again: the refusal says that is what
    happened and how to avoid it, where it said the thread "already runs trio"."""
    errors: list[BaseException] = []

    async def left_open() -> None:
        team = await pride.aio.open_session(name="forgotten")
        await team.spawn(branch("echo"))

    async def next_program() -> None:
        async with pride.aio.open_session():
            pass

    def in_a_thread_of_its_own() -> None:  # the thread is spoilt for trio: not the test's
        asyncio.run(left_open())
        try:
            asyncio.run(next_program())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=in_a_thread_of_its_own, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    assert [type(e) for e in errors] == [RuntimeError], errors
    message = str(errors[0])
    assert "never closed" in message and "'forgotten'" in message, message
    assert "aclose()" in message, message


def test_a_team_whose_opening_was_cancelled_is_closed() -> None:
    """A team whose opening was cancelled before its trio run started is closed: its
    calls say so, not "open it first" (it stayed "opening" for good, though opening
    it again raises "a team opens once")."""

    async def main() -> None:
        team = pride.aio.open_session()
        opening = asyncio.create_task(team.__aenter__())
        await asyncio.sleep(0)  # one loop pass: it waits for its trio run to start
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert "closed" in repr(team), team
        with pytest.raises(pride.aio.TeamClosed, match="it was closed"):
            await team.ask("anyone", Chat("hi"))
        await team.aclose()  # idempotent, as for any closed team

    run(main)
