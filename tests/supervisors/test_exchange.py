"""Exchange: a member's turn reaches other members by name, never silently dropped."""

from __future__ import annotations

import pytest
import trio.testing

import pride
from pride import Branch, Call, Chat, ReentrancyError, Session, UnknownBranch
from tests.helpers import echo_model


async def consult(branch: Branch, who: str, question: str) -> str:
    """A registered operation: ask another branch by name from inside this turn."""
    answer = await pride.ask(who, Chat(question))
    return f"{branch.name} heard: {answer}"


async def relay(branch: Branch, who: str, back: str) -> str:
    """Ask ``who`` to consult ``back`` (a cycle when ``back`` is this branch)."""
    return str(await pride.ask(who, Call("consult", who=back, question="loop?")))


def session_with_ops() -> Session:
    session = Session()
    session.register_operation("consult", consult)
    session.register_operation("relay", relay)
    return session


async def test_a_turn_asks_another_member_by_name() -> None:
    """planner's turn asks researcher by name and gets the answer."""
    async with session_with_ops() as session:
        await session.spawn(Branch(name="planner", chat_model=echo_model()))
        await session.spawn(Branch(name="researcher", chat_model=echo_model()))
        answer = await session.run_operation("consult", who="researcher", question="facts?")
    assert answer == "planner heard: re: facts?"


async def test_cycles_fail_with_reentrancy_error() -> None:
    """a asks b, b asks a: ReentrancyError at once instead of a deadlock."""
    async with session_with_ops() as session:
        await session.spawn(Branch(name="a", chat_model=echo_model()))
        await session.spawn(Branch(name="b", chat_model=echo_model()))
        with pytest.raises(ReentrancyError):
            await session.run_operation("relay", branch="a", who="b", back="a")
        assert await session.ask("a", Chat("still fine")) == "re: still fine"


async def test_undeliverable_messages_are_errors() -> None:
    """An unknown name raises UnknownBranch; a stopped member raises BranchClosed."""
    async with session_with_ops() as session:
        await session.spawn(Branch(name="a", chat_model=echo_model()))
        stopped = await session.spawn(Branch(name="gone", chat_model=echo_model()))
        with pytest.raises(UnknownBranch):
            await session.run_operation("consult", who="nobody", question="?")
        await pride.ask(stopped, pride.Stop())
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(pride.BranchClosed):
            await session.run_operation("consult", who="gone", question="?")


async def test_names_do_not_resolve_outside_a_sessions_turn() -> None:
    """Outside any member's turn, pride.ask with a name raises UnknownBranch."""
    async with Session() as session:
        await session.spawn(Branch(name="a", chat_model=echo_model()))
        with pytest.raises(UnknownBranch):
            await pride.ask("a", Chat("x"))


async def test_names_resolve_up_the_tree() -> None:
    """A branch of a child session reaches a branch of its parent by name."""
    async with session_with_ops() as root:
        await root.spawn(Branch(name="archivist", chat_model=echo_model()))
        team = await root.spawn_session("team")
        team.register_operation("consult", consult)
        await team.spawn(Branch(name="worker", chat_model=echo_model()))
        answer = await team.run_operation("consult", who="archivist", question="history?")
    assert answer == "worker heard: re: history?"


async def whoami(branch: Branch) -> str:
    """A registered operation naming the member it ran on."""
    return branch.name


async def test_run_operation_defaults_to_the_first_spawned_branch() -> None:
    """Without ``branch``, the earliest started member branch runs it: a child
    session spawned before it is not a branch, and once the first branch is
    removed the next one in start order takes its place; with none left, the
    session says it has no branches."""
    async with Session() as session:
        session.register_operation("whoami", whoami)
        with pytest.raises(UnknownBranch, match="no branches"):
            await session.run_operation("whoami")
        await session.spawn_session("team")
        first = await session.spawn(Branch(name="first", chat_model=echo_model()))
        second = await session.spawn(Branch(name="second", chat_model=echo_model()))
        assert await session.run_operation("whoami") == "first"
        await session.remove(first)
        assert await session.run_operation("whoami") == "second"
        await session.remove(second)
        with pytest.raises(UnknownBranch, match="no branches"):
            await session.run_operation("whoami")
