"""A terminal's subscribers run as part of the turn they are told about, with a
store or without one: ``pride.current_turn()`` is that turn (finalising), so a
handler reads the turn it is told about the same way in both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
