"""``GET /v1/branches``'s ``restarts`` and ``last_turn`` across group restarts.

A sibling halted by a ``one_for_all`` or ``rest_for_one`` restart announces
``BranchStopped(reason="shutdown")`` before it is started again. The server's
activity records took every stop that was not a crash for a branch leaving
the tree and forgot it: the sibling's restart count began again at 1 on each
restart and its last turn vanished. The server runs in the test's process
(`conftest.in_process`).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from pride import Branch, BranchStarted, Call, Chat, Escalate, ScriptedModel, Session

from .conftest import TOKEN, in_process


async def _escalate(branch: Branch) -> None:
    raise Escalate("state is corrupt")


def _echo(name: str) -> Branch:
    return Branch(name=name, chat_model=ScriptedModel(lambda request: "ok"))


def _described(tree: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in tree["branches"] if b["name"] == name)


@pytest.mark.parametrize("strategy", ["one_for_all", "rest_for_one"])
async def test_a_sibling_restarted_with_its_group_keeps_its_count_and_last_turn(
    strategy: str,
) -> None:
    session = Session("group", strategy=strategy, max_restarts=10)
    session.register_operation("escalate", _escalate)
    restarted: dict[str, int] = {}
    both_back = trio.Event()

    def on_started(signal: BranchStarted) -> None:
        if signal.restart and signal.branch_name is not None:
            restarted[signal.branch_name] = restarted.get(signal.branch_name, 0) + 1
            if restarted.get("crasher") == restarted.get("sibling") == rounds:
                both_back.set()

    rounds = 2
    session.observe(BranchStarted, handler=on_started)
    async with session:
        await session.spawn(_echo("crasher"))  # rest_for_one: the sibling comes after it
        await session.spawn(_echo("sibling"))
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                assert await session.ask("sibling", Chat("hello")) == "ok"
                for _ in range(rounds):
                    with pytest.raises(Escalate):
                        await session.ask("crasher", Call("escalate"))
                with trio.fail_after(10):
                    await both_back.wait()
                tree = (await http.get("/v1/branches")).json()["session"]
    crasher, sibling = _described(tree, "crasher"), _described(tree, "sibling")
    assert crasher["restarts"] == rounds
    assert sibling["restarts"] == rounds, "each group restart reset the sibling's count"
    assert sibling["last_turn"] is not None, "the sibling's last turn was forgotten"
    assert sibling["last_turn"]["outcome"] == "done"
    assert crasher["last_turn"]["outcome"] == "failed"


async def test_a_branch_that_left_with_its_child_session_comes_back_afresh() -> None:
    """Its records went with it (they are bounded by the tree's branches): spawned
    again, it reports no restarts and no last turn of its earlier life."""
    restarted = trio.Event()
    session = Session("root")
    session.observe(BranchStarted, handler=lambda s: s.restart and restarted.set())
    async with session:
        team = Session("team")
        team.register_operation("escalate", _escalate)
        await session.spawn(team)
        wanderer = await team.spawn(_echo("wanderer"))
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                with pytest.raises(Escalate):
                    await team.ask("wanderer", Call("escalate"))
                with trio.fail_after(10):
                    await restarted.wait()
                tree = (await http.get("/v1/branches")).json()["session"]
                assert _described(tree["sessions"][0], "wanderer")["restarts"] == 1
                await session.remove(team)
                await session.spawn(wanderer)
                tree = (await http.get("/v1/branches")).json()["session"]
    back = _described(tree, "wanderer")
    assert back["restarts"] == 0 and back["last_turn"] is None, back
