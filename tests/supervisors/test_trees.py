"""Supervisor trees: sessions nest, fail upwards, restart downwards, stop children-first."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchStopped,
    Call,
    Chat,
    ChatAndRecord,
    Escalate,
    MembershipError,
    RunEnd,
    Session,
    SessionFailed,
    SupervisorFailed,
    TurnCancelled,
    UnknownBranch,
)
from tests.helpers import Gate, Recorder, echo_model


async def escalate(branch: Branch) -> None:
    raise Escalate("state is corrupt")


def tree(**options: Any) -> tuple[Session, Recorder]:
    root = Session(name="root", **options)
    recorder = Recorder()
    root.observe(handler=recorder.dispatch)
    return root, recorder


async def test_child_signals_reach_the_parent_and_names_resolve_down_the_tree() -> None:
    """The root observes grandchildren's turns and resolves their names; get_branch does not."""
    root, recorder = tree()
    async with root:
        team = await root.spawn_session("team")
        worker = await team.spawn(Branch(name="worker", chat_model=echo_model()))
        assert await root.ask("worker", Chat("hi")) == "re: hi"
        assert root.sessions == (team,) and team.branches == (worker,)
        with pytest.raises(UnknownBranch):
            root.get_branch("worker")
        stats = root.statistics()
        assert (stats.branches, stats.sessions, stats.turns_done) == (1, 1, 1)
    assert any(isinstance(s, RunEnd) and s.branch_name == "worker" for s in recorder.signals)


async def test_child_session_failure_is_a_crash_for_the_parent() -> None:
    """A child past its intensity fails; the parent restarts it and its branches come back."""
    root, recorder = tree()
    async with root:
        team = await root.spawn_session("team", max_restarts=0)
        team.register_operation("escalate", escalate)
        worker = await team.spawn(Branch(name="worker", chat_model=echo_model()))
        await worker.chat_and_record("remember me")
        with pytest.raises(Escalate):
            await team.ask("worker", Call("escalate"))
        await trio.testing.wait_all_tasks_blocked()
        assert root.statistics().restarts == 1
        assert team.running and worker.running
        assert await team.ask("worker", ChatAndRecord("again")) == "re: again"
    assert [m.text for m in worker.messages][::2] == ["remember me", "again"]
    assert len(recorder.of(SessionFailed)) == 1
    team_stops = [s for s in recorder.of(BranchStopped) if s.branch_name == "team"]
    assert [s.reason for s in team_stops] == ["crash", "shutdown"]
    assert team_stops[0].error is not None and "SupervisorFailed" in team_stops[0].error


async def test_failure_propagates_to_the_root() -> None:
    """A root with no restarts left fails because its child session failed."""
    root, _ = tree(max_restarts=0)
    with pytest.raises(SupervisorFailed) as info:
        async with root:
            team = await root.spawn_session("team", max_restarts=0)
            team.register_operation("escalate", escalate)
            await team.spawn(Branch(name="worker", chat_model=echo_model()))
            with pytest.raises(Escalate):
                await team.ask("worker", Call("escalate"))
            await trio.sleep_forever()
    assert isinstance(info.value.__cause__, SupervisorFailed)
    assert isinstance(info.value.__cause__.__cause__, Escalate)


async def test_shutdown_stops_the_tree_children_first_in_reverse_start_order() -> None:
    """Leaving the root stops p2, then team's members (c2, c1), then team, then p1."""
    root, recorder = tree()
    async with root:
        await root.spawn(Branch(name="p1", chat_model=echo_model()))
        team = await root.spawn_session("team")
        await team.spawn(Branch(name="c1", chat_model=echo_model()))
        await team.spawn(Branch(name="c2", chat_model=echo_model()))
        await root.spawn(Branch(name="p2", chat_model=echo_model()))
    assert [s.branch_name for s in recorder.of(BranchStopped)] == ["p2", "c2", "c1", "team", "p1"]
    assert {s.reason for s in recorder.of(BranchStopped)} == {"shutdown"}


async def test_one_for_all_suspends_a_child_session_keeping_its_queues() -> None:
    """A sibling session is halted with the group: turns cancelled (restart), queues kept."""
    gate = Gate()
    root, _ = tree(strategy="one_for_all")
    root.register_operation("escalate", escalate)
    async with root:
        await root.spawn(Branch(name="p", chat_model=echo_model()))
        team = await root.spawn_session("team")
        worker = await team.spawn(Branch(name="worker", chat_model=gate.model))
        running = await pride.send(worker, Chat("busy"))
        queued = await pride.send(worker, Chat("queued"))
        await gate.started.wait()
        with pytest.raises(Escalate):
            await root.ask("p", Call("escalate"))
        with pytest.raises(TurnCancelled) as info:
            await running.result()
        assert info.value.reason == "restart"
        gate.release("queued")
        assert await queued.result() == "reply to queued"
        assert team.running and worker.owner_id == team.id


async def test_membership_of_sessions_is_exclusive() -> None:
    """A session running on its own, or under another parent, cannot be spawned."""
    async with Session(name="a") as a, Session(name="b") as b:
        with pytest.raises(RuntimeError, match="already running"):
            await a.spawn(b)
        child = await a.spawn_session("child")
        other = Session(name="other")
        async with other:
            with pytest.raises(MembershipError):
                await other.spawn(child)


async def test_removing_a_child_session_releases_its_branches() -> None:
    """remove(child_session) stops it; its branches are detached and free to join elsewhere."""
    async with Session(name="root") as root:
        team = await root.spawn_session("team")
        worker = await team.spawn(Branch(name="worker", chat_model=echo_model()))
        await root.remove(team)
        assert root.sessions == ()
        assert not worker.running and worker.owner_id is None
        await root.include(worker)
        assert await root.ask("worker", Chat("moved")) == "re: moved"
