"""Attacks on the commit hand-off (issue 19): a turn of a branch with a store is ended
by its commit's completion, which trio hands back outside any task (a
``run_sync_soon`` callback), so whatever ends the turn there must neither
crash the run nor leave its caller unanswered, and must see what it saw in
the turn's own task.

Commits are held up by a second SQLite connection holding the write lock (see
test_commit_handoff.py).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    Budget,
    BudgetExceeded,
    ChatAndRecord,
    Detach,
    Instruction,
    Reply,
    RunEnd,
    RunFailed,
    RunStart,
    Session,
    StoreError,
    send,
)
from pride.store import BranchStore

from ..cli.driver import CLI, cli_env, request
from ..helpers import echo_model, holding_write_lock


async def _texts(path: Path, branch: str) -> list[str]:
    async with BranchStore(path) as store:
        return [message.text for message in await store.load_messages(branch)]


async def _release(db: sqlite3.Connection) -> None:
    """Let the held-up commit go once everything else waits (the store's close, say)."""
    await trio.testing.wait_all_tasks_blocked()
    db.execute("ROLLBACK")


class Boom(BaseException):
    """What a handler should never raise, and sometimes does."""


async def test_a_terminal_handler_raising_a_base_exception_is_contained(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A sync RunEnd handler that raises a BaseException, run by the commit's
    completion (outside any task), is logged; the run goes on, the caller is
    answered and the branch keeps serving."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))

        def rude(signal: Any) -> None:
            raise Boom("no")

        session.observe(RunEnd, handler=rude)
        with caplog.at_level(logging.ERROR):
            assert await ada.chat_and_record("one") == "re: one"
            assert await ada.chat_and_record("two") == "re: two"
        assert any(r.exc_info and r.exc_info[0] is Boom for r in caplog.records)
    assert await _texts(path, "ada") == ["one", "re: one", "two", "re: two"]


async def test_an_async_terminal_subscriber_after_the_session_stopped_still_answers(
    tmp_path: Path,
) -> None:
    """A turn whose commit ends after its session's members stopped (the session
    closing flushes the store) still answers its caller, even though its async
    RunEnd subscriber has no nursery left to run in."""
    path = tmp_path / "store.db"
    called: list[str] = []

    async def slow(signal: Any) -> None:
        called.append(signal.branch_name)

    reply: Reply | None = None
    with trio.fail_after(10):
        with contextlib.ExitStack() as stack:
            async with trio.open_nursery() as nursery:
                async with Session(store=path) as session:
                    ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
                    session.observe(RunEnd, handler=slow)
                    db = stack.enter_context(holding_write_lock(path))
                    reply = await send(ada, ChatAndRecord("one"))
                    await trio.testing.wait_all_tasks_blocked()
                    assert not reply.done
                    nursery.start_soon(_release, db)
        assert reply is not None
        assert await reply.result() == "re: one"
    assert called == ["ada"]
    assert await _texts(path, "ada") == ["one", "re: one"]


async def test_a_traced_turn_handed_to_its_commit_restores_the_actors_trace_context(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A traced turn ended by its commit ends its span, and leaves the actor's task
    as it found it: OpenTelemetry's context is restored in the task that set it
    (restoring it from the commit's callback fails, logged as "Failed to detach
    context", and leaves the turn's span current in the actor's task)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import pride.telemetry

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pride.telemetry.instrument(provider, capture_content=False)

    try:
        path = tmp_path / "store.db"
        with caplog.at_level(logging.ERROR):
            async with Session(store=path) as session:
                ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
                assert await ada.chat_and_record("one") == "re: one"
                assert await ada.chat_and_record("two") == "re: two"
        assert not [r for r in caplog.records if "detach" in r.getMessage().lower()]
        turns = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent ada"]
        assert len(turns) == 2
    finally:
        pride.telemetry.uninstrument()
        provider.shutdown()


async def test_a_terminal_handler_sends_by_name_in_its_session(tmp_path: Path) -> None:
    """A sync RunEnd handler runs in the turn's context, as it did when the actor
    waited for its commit: a name it sends to resolves in the turn's session."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        log_branch = await session.spawn(Branch(name="log", chat_model=echo_model()))
        sent: list[Reply] = []

        def forward(signal: Any) -> None:
            if signal.branch_name == "ada":
                sent.append(pride.send_nowait("log", ChatAndRecord(f"ended {signal.turn_id}")))

        session.observe(RunEnd, handler=forward)
        await ada.chat_and_record("one")
        assert len(sent) == 1
        assert (await sent[0].result()).startswith("re: ended ")
        assert len(log_branch.messages) == 2


async def test_two_callers_of_an_unwatched_branch_are_answered_in_mailbox_order(
    tmp_path: Path,
) -> None:
    """With nobody watching, turns of two callers queued back to back while their
    commits wait on the disk are answered in the order they were served: when
    one is answered, every earlier one already was (each with its own answer)."""
    path = tmp_path / "store.db"
    replies: list[Reply] = []
    answered: dict[str, Any] = {}
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("kept")

        async def ask(index: int) -> None:
            reply = replies[index]
            answered["abcd"[index]] = await reply.result()
            assert all(earlier.done for earlier in replies[:index])

        async with trio.open_nursery() as nursery:
            with holding_write_lock(path):
                for text in ("a", "b", "c", "d"):
                    replies.append(await send(ada, ChatAndRecord(text)))
                    nursery.start_soon(ask, len(replies) - 1)
                    await trio.testing.wait_all_tasks_blocked()
                assert answered == {}
    assert answered == {text: f"re: {text}" for text in "abcd"}
    assert await _texts(path, "ada") == ["kept", "re: kept"] + [
        m for text in "abcd" for m in (text, f"re: {text}")
    ]


async def test_stop_with_no_grace_while_a_commit_is_in_flight(tmp_path: Path) -> None:
    """session.stop(grace=0) while a turn waits for its commit: the stop does not
    hang, the caller is answered (ok only once its rows are written), and the
    file holds every turn answered ok."""
    path = tmp_path / "store.db"
    replies: list[Reply] = []
    seen: list[str] = []

    async def watch(signal: Any) -> None:
        seen.append(signal.branch_name)

    with trio.fail_after(10):
        with contextlib.ExitStack() as stack:
            async with trio.open_nursery() as nursery:
                async with Session(store=path) as session:
                    ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
                    session.observe(RunStart, handler=lambda signal: None)
                    session.observe(RunEnd, handler=watch)
                    db = stack.enter_context(holding_write_lock(path))
                    replies.append(await send(ada, ChatAndRecord("one")))
                    await trio.testing.wait_all_tasks_blocked()
                    replies.append(await send(ada, ChatAndRecord("two")))  # queued
                    await session.stop(grace=0)  # the first turn's commit still waits
                    nursery.start_soon(_release, db)
        outcomes: list[Any] = []
        for reply in replies:
            try:
                outcomes.append(await reply.result())
            except Exception as exc:
                outcomes.append(exc)
    assert outcomes[0] == "re: one"
    assert seen == ["ada"]  # its async subscriber ran, in trio's own nursery
    stored = await _texts(path, "ada")
    for text, outcome in zip(("one", "two"), outcomes, strict=True):
        if outcome == f"re: {text}":
            assert f"re: {text}" in stored


async def test_a_commit_waiter_that_raises_anything_is_logged_and_the_others_called(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A waiter given to `BranchStore.after_commit` is called outside any task: one
    that raises, even a BaseException, is logged; the next waiter is still
    called and the store keeps committing."""
    path = tmp_path / "store.db"
    called: list[Any] = []

    def rude(failure: Any) -> None:
        raise Boom("no")

    async with BranchStore(path) as store:
        await store.save_branch("ada", "id", {}, [])
        store.append("ada", Instruction(instruction="one"))
        assert store.after_commit("ada", rude)
        assert store.after_commit("ada", called.append)
        with caplog.at_level(logging.ERROR, logger="pride.store"):
            await store.flush("ada")
        assert called == [None]
        assert any(r.exc_info and r.exc_info[0] is Boom for r in caplog.records)
        store.append("ada", Instruction(instruction="two"))
        await store.flush()
    assert await _texts(path, "ada") == ["one", "two"]


async def test_a_commit_whose_worker_thread_cannot_start_fails_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit whose worker thread cannot be started (the process is out of
    threads) fails its waiters with StoreError instead of crashing the run; its
    rows stay queued and the next commit writes them."""
    path = tmp_path / "store.db"
    failures: list[Any] = []

    def no_thread(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")

    async with BranchStore(path) as store:
        await store.save_branch("ada", "id", {}, [])
        store.append("ada", Instruction(instruction="one"))
        with monkeypatch.context() as patched:
            patched.setattr(trio.lowlevel, "start_thread_soon", no_thread)
            assert store.after_commit("ada", failures.append)
            with pytest.raises(StoreError, match="can't start new thread"):
                await store.flush("ada")
        assert len(failures) == 1 and isinstance(failures[0], StoreError)
        await store.flush("ada")
    assert await _texts(path, "ada") == ["one"]


async def test_a_detach_served_between_a_turns_hand_over_and_its_commit(tmp_path: Path) -> None:
    """An unwatched member detached while its turn waits for its commit: the turn is
    still counted on the session it ran in, and answered once durable."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        await ada.chat_and_record("kept")
        with holding_write_lock(path):
            reply = await send(ada, ChatAndRecord("one"))
            await trio.testing.wait_all_tasks_blocked()
            detached = await send(ada, Detach())
            await trio.testing.wait_all_tasks_blocked()
            assert detached.done and not reply.done  # served meanwhile
        assert await reply.result() == "re: one"
        assert session.statistics().turns_done == 2
    assert await _texts(path, "ada") == ["kept", "re: kept", "one", "re: one"]


def test_a_keyboard_interrupt_with_a_commit_in_flight(tmp_path: Path) -> None:
    """The trio run ending (a KeyboardInterrupt out of the session block) while a turn
    waits for its commit: no hang, and its caller is answered ok only if its rows
    are in the file, which opens afterwards."""
    path = tmp_path / "store.db"
    replies: list[Reply] = []

    async def main() -> None:
        async with Session(store=path) as session:
            ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
            with holding_write_lock(path):
                replies.append(await send(ada, ChatAndRecord("one")))
                await trio.testing.wait_all_tasks_blocked()
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)
    (reply,) = replies
    assert reply.done
    stored = trio.run(_texts, path, "ada")
    try:
        answer = trio.run(reply.result)
    except StoreError:
        assert "re: one" not in stored
    else:
        assert answer == "re: one"
        assert stored == ["one", "re: one"]


async def test_kill_9_while_a_turn_waits_for_its_commit(tmp_path: Path) -> None:
    """``pride run`` killed with SIGKILL while its worker thread writes a turn's rows:
    that turn was never answered, the file opens afterwards without it, and the
    next run serves the branch."""
    store = tmp_path / "agents.db"
    args = ("run", "tests.store.crashing_app:build", "--store", str(store), "--no-status")
    env = cli_env(PRIDE_TEST_HOLD_SQL="INSERT OR REPLACE INTO messages")
    async with CLI.start(*args, env=env) as cli:
        await cli.send(request("r1", "ada", "hello"))
        await cli.until(lambda: any("holding" in line for line in cli.stderr), "the hold")
        held = next(line for line in cli.stderr if "holding" in line)
        assert '"re: hello"' in held, held  # the turn's rows, in its commit
        cli.process.send_signal(signal.SIGKILL)
        assert await cli.exit_code() == -signal.SIGKILL
        assert "r1" not in cli.answers(), cli.transcript()
    assert await _texts(store, "ada") == []
    async with CLI.start(*args, "--exit-on-eof", env=cli_env()) as cli:
        await cli.send(request("r2", "ada", "again"))
        assert (await cli.answer("r2"))["ok"], cli.transcript()
        await cli.close_stdin()
        assert await cli.exit_code() == 0
    assert await _texts(store, "ada") == ["again", "re: again"]


async def test_a_budgeted_turn_with_a_store_fails_or_is_answered_by_its_commit(
    tmp_path: Path,
) -> None:
    """A turn over its budget records nothing and fails at once; a budgeted turn
    within it is handed to its commit like any other (answered once durable), and
    both are counted and signalled in order."""
    from pride.llm import ScriptedModel, ScriptedReply, Usage

    path = tmp_path / "store.db"
    seen: list[str] = []
    model = ScriptedModel(
        [
            ScriptedReply("long", usage=Usage(5, 50, cached_tokens=0, cost_usd=None)),
            ScriptedReply("short", usage=Usage(5, 5, cached_tokens=0, cost_usd=None)),
        ]
    )
    async with Session(store=path) as session:
        ada = await session.spawn(Branch(name="ada", chat_model=model))
        session.observe(
            RunEnd, RunFailed, handler=lambda signal: seen.append(type(signal).__name__)
        )
        budget = Budget(max_output_tokens=40)
        with holding_write_lock(path):
            over = await send(ada, ChatAndRecord("q", budget=budget))
            within = await send(ada, ChatAndRecord("r", budget=budget))
            await trio.testing.wait_all_tasks_blocked()
            assert over.done and not within.done
        with pytest.raises(BudgetExceeded):
            await over.result()
        assert await within.result() == "short"
        stats = session.statistics()
        assert (stats.turns_done, stats.turns_failed) == (1, 1)
    assert seen == ["RunFailed", "RunEnd"]
    assert await _texts(path, "ada") == ["r", "short"]
