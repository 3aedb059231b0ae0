"""Member names: unique within a session, freed by removal, kept across crashes and
restarts, and followed through a rename (the session's name index, supervisors/_roster.py)."""

from __future__ import annotations

import uuid

import pytest
import trio.testing

from pride import Branch, Call, Chat, Escalate, Session, UnknownBranch
from tests.helpers import echo_model


async def escalate(branch: Branch) -> None:
    raise Escalate("state is corrupt")


def member(name: str, *, id: uuid.UUID | None = None) -> Branch:
    return Branch(name=name, chat_model=echo_model(), id=id)


async def test_names_stay_unique_among_every_kind_of_member() -> None:
    """A branch, a child session and a second branch cannot share a name, in any order,
    nor can two branches of one batch; what was refused is not a member."""
    async with Session(name="s") as session:
        await session.spawn(member("a"))
        await session.spawn_session("team")
        for taken in ("a", "team"):
            twin = member(taken)
            with pytest.raises(ValueError, match=f"already has a member named '{taken}'"):
                await session.spawn(twin)
            assert not twin.running
        with pytest.raises(ValueError, match="'a'"):
            await session.spawn(Session("a"))
        with pytest.raises(ValueError, match="'b'"):
            await session.include(member("b"), member("b"))
        assert [branch.name for branch in session.branches] == ["a"]
        assert [child.name for child in session.sessions] == ["team"]
        assert session.get_branch("a").name == "a"


async def test_a_removed_members_name_is_free_again() -> None:
    """After remove (by branch, name or id), the name belongs to nobody: another branch
    may take it, and lookups find the new one."""
    async with Session() as session:
        first = await session.spawn(member("a"))
        await session.remove("a")
        with pytest.raises(UnknownBranch):
            session.get_branch("a")
        second = await session.spawn(member("a"))
        assert session.get_branch("a") is second
        await session.remove(second.id)
        third = await session.spawn(member("a"))
        assert session.resolve_name("a") is third
        assert (await session.ask("a", Chat("hi"))) == "re: hi"
        await session.remove(third)
        await session.spawn(first)  # the very first one may come back, too
        assert session.get_branch("a") is first


async def test_a_crashed_members_name_is_kept_until_it_is_removed() -> None:
    """A temporary member that crashed stays a (stopped) member: its name is still
    taken and it can be spawned again; once removed, its name is free."""
    async with Session() as session:
        session.register_operation("escalate", escalate)
        crashed = await session.spawn(member("t"), restart="temporary")
        with pytest.raises(Escalate):
            await session.ask("t", Call("escalate"))
        await trio.testing.wait_all_tasks_blocked()
        assert not crashed.running
        with pytest.raises(ValueError, match="'t'"):
            await session.spawn(member("t"))
        await session.spawn(crashed)  # started again, under its own name
        assert crashed.running and session.get_branch("t") is crashed
        with pytest.raises(Escalate):
            await session.ask("t", Call("escalate"))
        await trio.testing.wait_all_tasks_blocked()
        await session.remove("t")
        newcomer = await session.spawn(member("t"))
        assert session.get_branch("t") is newcomer


async def test_a_restarted_member_keeps_its_name() -> None:
    """A permanent member restarted after a crash is found under its name and id,
    and its name is still refused to others."""
    async with Session() as session:
        session.register_operation("escalate", escalate)
        branch = await session.spawn(member("p"))
        with pytest.raises(Escalate):
            await session.ask("p", Call("escalate"))
        await trio.testing.wait_all_tasks_blocked()
        assert session.statistics().restarts == 1
        assert session.get_branch("p") is session.get_branch(branch.id) is branch
        with pytest.raises(ValueError, match="'p'"):
            await session.spawn(member("p"))
        assert (await session.ask("p", Chat("back"))) == "re: back"


async def test_a_renamed_member_is_found_under_its_new_name_only() -> None:
    """Renaming a member re-keys it: the new name resolves, the old one is free; a name
    another member has is refused, and the branch keeps its own."""
    async with Session() as session:
        renamed = await session.spawn(member("old"))
        other = await session.spawn(member("other"))
        renamed.name = "new"
        assert session.get_branch("new") is renamed
        assert (await session.ask("new", Chat("hi"))) == "re: hi"
        with pytest.raises(UnknownBranch):
            session.get_branch("old")
        taker = await session.spawn(member("old"))
        assert session.get_branch("old") is taker
        with pytest.raises(ValueError, match="already has a member named 'other'"):
            renamed.name = "other"
        assert renamed.name == "new" and session.get_branch("other") is other
        with pytest.raises(ValueError, match="'new'"):
            await session.spawn(member("new"))
        await session.remove(renamed)
        renamed.name = "other"  # no longer a member: nothing to refuse
        with pytest.raises(UnknownBranch):
            session.get_branch("new")


async def test_ids_resolve_to_the_earliest_holder() -> None:
    """Two branches built with one explicit id: the earlier started one is found by the
    id (and its text) until it leaves; then the other is."""
    shared = uuid.uuid4()
    async with Session() as session:
        first = await session.spawn(member("one", id=shared))
        second = await session.spawn(member("two", id=shared))
        assert session.get_branch(shared) is first
        assert session.get_branch(str(shared)) is first
        await session.remove(first)
        assert session.get_branch(shared) is second
        await session.remove(str(shared))
        with pytest.raises(UnknownBranch):
            session.get_branch(shared)
        assert session.branches == ()
