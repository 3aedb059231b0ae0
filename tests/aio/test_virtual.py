"""Virtual branches through pride.aio: a ``kind/key`` name given to the team's verbs
activates the branch, as the session's own verbs do (docs/virtual.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pride
import pride.aio
from pride import Branch, BranchActivated, ChatAndRecord

from .kit import echo, run


def user(key: str) -> Branch:
    return Branch(system=f"you help {key}", chat_model=echo())


async def _virtual_team(team: pride.aio.Team) -> list[str]:
    """Register the ``user`` kind on the team's session; the names it activates."""
    activated: list[str] = []
    team.observe(BranchActivated, handler=lambda signal: activated.append(signal.branch_name))
    await team.run(team.session.virtual, "user", user)
    return activated


def test_ask_send_and_stream_of_a_virtual_name_activate_it(tmp_path: Path) -> None:
    async def main() -> tuple[list[Any], list[str]]:
        async with pride.aio.open_session(store=tmp_path / "s.db") as team:
            activated = await _virtual_team(team)
            answers = [await team.ask("user/ada", ChatAndRecord("hello"))]
            sent = await team.send("user/bo", ChatAndRecord("hi"))
            answers.append(await sent.result())
            async with team.stream("user/cy", ChatAndRecord("hey")) as chunks:
                answers.append("".join([chunk async for chunk in chunks]))
            live = sorted(b.name for b in team.session.branches)
            assert live == ["user/ada", "user/bo", "user/cy"], live
        return answers, activated

    answers, activated = run(main)
    assert answers == ["HELLO", "HI", "HEY"]
    assert activated == ["user/ada", "user/bo", "user/cy"]


def test_a_ref_of_a_virtual_name_reaches_it_live_or_passivated(tmp_path: Path) -> None:
    """``team.ref("user/ada")`` is the branch's address, as ``session.ref``'s is: it
    activates the branch when it is not live, and outlives a passivation."""

    async def main() -> tuple[list[Any], list[str]]:
        async with pride.aio.open_session(store=tmp_path / "s.db") as team:
            activated = await _virtual_team(team)
            ref = team.ref("user/ada")  # not live yet
            answers = [await team.ask(ref, ChatAndRecord("one"))]
            live = team.ref("user/ada")  # live now
            assert await team.run(team.session.passivate, "user/ada")
            answers.append(await team.ask(live, ChatAndRecord("two")))
            async with team.stream(live, ChatAndRecord("three")) as chunks:
                answers.append("".join([chunk async for chunk in chunks]))
            texts = [m.text for m in team.session.get_branch("user/ada").messages]
        return answers, [*activated, *texts]

    answers, seen = run(main)
    assert answers == ["ONE", "TWO", "THREE"]
    assert seen == [
        "user/ada",
        "user/ada",
        "you help ada",
        "one",
        "ONE",
        "two",
        "TWO",
        "three",
        "THREE",
    ]
