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
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Branch, ChatAndRecord, Reply, RunEnd, RunStart, Session, send

from ..helpers import echo_model


@contextlib.contextmanager
def _held(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the store's write lock (a commit waits for it, up to SQLite's busy timeout)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield db
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()


async def _texts(path: Path, branch: str) -> list[str]:
    async with pride.store.BranchStore(path) as store:
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
                    db = stack.enter_context(_held(path))
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
    as it found it: its span is not current there after the turn (OpenTelemetry's
    context is restored in the task that set it, not in the commit's callback)."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import pride.telemetry

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pride.telemetry.instrument(provider, capture_content=False)
    seen: list[Any] = []

    def spy(a: int) -> int:
        """Note the span current in the actor's task."""
        seen.append(trace.get_current_span().get_span_context())
        return a

    try:
        path = tmp_path / "store.db"
        with caplog.at_level(logging.ERROR):
            async with Session(store=path) as session:
                ada = await session.spawn(Branch(name="ada", chat_model=echo_model(), tools=[spy]))
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
            with _held(path):
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
                    db = stack.enter_context(_held(path))
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
