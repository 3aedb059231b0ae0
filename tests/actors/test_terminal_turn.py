"""A terminal's subscribers run as part of the turn they are told about, with a
store or without one: ``pride.current_turn()`` is that turn (finalising), so a
handler reads the turn it is told about the same way in both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Branch, ChatAndRecord, RunEnd, RunFailed, ScriptedModel, Session
from tests.helpers import echo_model


@pytest.mark.parametrize("stored", [False, True], ids=["no store", "store"])
async def test_a_terminal_handler_sees_the_turn_it_is_told_about(
    tmp_path: Path, stored: bool
) -> None:
    seen: list[tuple[str, Any, Any]] = []

    def on_terminal(signal: Any) -> None:
        scope = pride.current_turn()
        seen.append(
            (
                type(signal).__name__,
                signal.turn_id,
                None if scope is None else (scope.turn_id, scope.context.phase),
            )
        )

    async def on_terminal_async(signal: Any) -> None:
        on_terminal(signal)

    store = tmp_path / "store.db" if stored else None
    async with Session(store=store) as session:
        session.observe(RunEnd, RunFailed, handler=on_terminal)
        session.observe(RunEnd, handler=on_terminal_async)
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        bob = await session.spawn(
            Branch(name="bob", chat_model=ScriptedModel([RuntimeError("model down")]))
        )
        reply = await pride.send(ada, ChatAndRecord("hi"))
        assert await reply.result() == "re: hi"
        failed = await pride.send(bob, ChatAndRecord("hi"))
        with pytest.raises(RuntimeError, match="model down"):
            await failed.result()
        assert pride.current_turn() is None
    assert seen == [
        ("RunEnd", reply.turn_id, (reply.turn_id, "finalizing")),
        ("RunEnd", reply.turn_id, (reply.turn_id, "finalizing")),
        ("RunFailed", failed.turn_id, (failed.turn_id, "finalizing")),
    ]


@pytest.mark.parametrize("stored", [False, True], ids=["no store", "store"])
async def test_every_turn_ends_the_same_way_its_caller_after_the_terminal(
    tmp_path: Path, stored: bool
) -> None:
    """One end-of-turn path (`TurnEnd`), whether the driver ends the turn at once or its
    commit does: an async subscriber of the terminal holds the answer back until it
    returns, and the branch's next turn starts only after that terminal."""
    release, seen = trio.Event(), trio.Event()
    order: list[str] = []

    async def slow_terminal(signal: Any) -> None:
        order.append(f"{type(signal).__name__} seen")
        seen.set()
        await release.wait()
        order.append(f"{type(signal).__name__} done")

    async with Session(store=tmp_path / "store.db" if stored else None) as session:
        session.observe(RunEnd, handler=slow_terminal)
        session.observe(pride.RunStart, handler=lambda signal: order.append("RunStart"))
        ada = await session.spawn(Branch(name="ada", chat_model=echo_model()))
        first = await pride.send(ada, ChatAndRecord("one"))
        second = await pride.send(ada, ChatAndRecord("two"))
        await seen.wait()  # (a store commits on a thread: no wait_all_tasks_blocked before)
        await trio.testing.wait_all_tasks_blocked()
        assert order == ["RunStart", "RunEnd seen"]
        assert first.state != "done" and second.turn_id is None
        release.set()
        assert await first.result() == "re: one"
        assert await second.result() == "re: two"
    assert order == [
        "RunStart",
        "RunEnd seen",
        "RunEnd done",
        "RunStart",
        "RunEnd seen",
        "RunEnd done",
    ]
