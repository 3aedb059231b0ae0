"""Membership by control messages: spawn/include send Attach, remove sends Detach."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchRef,
    BranchStopped,
    Chat,
    ChatAndRecord,
    MembershipError,
    RunEnd,
    RunStart,
    Session,
    UnknownBranch,
)
from pride.memory import InMemoryStore
from tests.helpers import Gate, Recorder, echo_model


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def noop(branch: Branch) -> str:
    return branch.name


class TestSpawn:
    """spawn/include wire the session's references into the branch between turns."""

    async def test_spawn_returns_after_attach_was_applied(self) -> None:
        """On return the branch is owned, observed and has the session's registry behind its own."""
        async with Session(name="s") as session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            assert branch.owner_id == session.id
            assert branch.operations.shared is session.operations
            assert branch.running
            recorder = Recorder()
            session.observe(handler=recorder.dispatch)
            await branch.chat("hi")
        assert recorder.kinds()[:2] == ["RunStart", "RunEnd"]

    async def test_spawn_needs_a_running_session(self) -> None:
        """Outside `async with` spawn is a RuntimeError saying how to start the session."""
        with pytest.raises(RuntimeError, match="async with"):
            await Session().spawn(Branch(chat_model=echo_model()))

    async def test_a_session_runs_once(self) -> None:
        """Entering a finished session again is refused."""
        session = Session()
        async with session:
            pass
        with pytest.raises(RuntimeError, match="once"):
            async with session:
                pass

    async def test_member_names_are_unique(self) -> None:
        """A second member with a taken name is a ValueError; nothing is started."""
        async with Session() as session:
            await session.spawn(Branch(name="a", chat_model=echo_model()))
            twin = Branch(name="a", chat_model=echo_model())
            with pytest.raises(ValueError, match="'a'"):
                await session.spawn(twin)
            assert not twin.running

    async def test_memory_default_is_adopted_only_when_unclaimed(self) -> None:
        """A branch without a store adopts the session's; one with its own keeps it."""
        own = InMemoryStore()
        async with Session() as session:
            bare = await session.spawn(Branch(chat_model=echo_model()))
            mine = await session.spawn(Branch(chat_model=echo_model(), memory=own))
        assert bare.memory is session.memory
        assert mine.memory is own


class TestInclude:
    """include adopts branches; ownership is exclusive and checked for the whole batch."""

    async def test_batch_with_a_foreign_branch_changes_nothing(self) -> None:
        """One branch owned elsewhere: MembershipError, and the free one is not included."""
        async with Session(name="one") as one, Session(name="two") as two:
            taken = await one.spawn(Branch(name="taken", chat_model=echo_model()))
            free = Branch(name="free", chat_model=echo_model())
            with pytest.raises(MembershipError, match="one"):
                await two.include(free, taken)
            assert free.owner_id is None and not free.running
            assert two.branches == ()
            assert taken.owner_id == one.id

    async def test_include_adopts_a_running_standalone_branch(self) -> None:
        """A branch running under `async with` moves into the session, keeping its history."""
        async with Branch(name="solo", chat_model=echo_model()) as solo:
            await solo.chat_and_record("before")
            async with Session() as session:
                await session.include(solo)
                assert solo.owner_id == session.id
                assert await session.ask("solo", ChatAndRecord("after")) == "re: after"
            assert not solo.running
        assert [m.role for m in solo.messages] == ["user", "assistant"] * 2
        assert solo.owner_id is None

    async def test_an_adopted_branch_outlives_its_standalone_block(self) -> None:
        """Once a session took a branch over, leaving the branch's own block leaves it running."""
        async with Session() as session:
            async with Branch(name="solo", chat_model=echo_model()) as solo:
                await session.include(solo)
            assert solo.running
            assert await session.ask("solo", Chat("still here")) == "re: still here"
        assert not solo.running

    async def test_attach_waits_for_the_running_turn(self) -> None:
        """A standalone branch mid-turn is adopted after that turn; its signals stay local."""
        gate = Gate()
        local = Recorder()
        session_signals = Recorder()
        async with Branch(name="solo", chat_model=gate.model, observer=local) as solo:
            async with Session() as session:
                session.observe(handler=session_signals.dispatch)
                reply = await pride.send(solo, Chat("long"))
                await gate.started.wait()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.include, solo)
                    await trio.testing.wait_all_tasks_blocked()
                    assert solo.owner_id is None  # not mid-turn
                    gate.release("long")
                assert await reply.result() == "reply to long"
                gate.release("next")
                await solo.chat("next")
        assert local.kinds() == ["RunStart", "RunEnd"]
        assert session_signals.kinds() == ["BranchStarted", "RunStart", "RunEnd", "BranchStopped"]


class TestRemove:
    """remove sends Detach then Stop and keeps the conversation."""

    async def test_remove_keeps_the_conversation_and_detaches(self) -> None:
        """Messages, tools and models stay; owner and observer go; the registry is fresh."""
        recorder = Recorder()
        model = echo_model()
        async with Session() as session:
            session.observe(handler=recorder.dispatch)
            session.register_operation("noop", noop)
            branch = await session.spawn(Branch(name="a", chat_model=model, tools=[add]))
            await branch.chat_and_record("hi")
            await session.remove(branch)
            assert not branch.running
            assert branch.owner_id is None
            assert "noop" not in branch.operations
            assert session.branches == ()
            with pytest.raises(UnknownBranch):
                session.get_branch("a")
        assert len(branch.messages) == 2
        assert "add" in branch.tools and branch.chat_model is model
        assert recorder.of(BranchStopped)[-1].reason == "normal"
        async with branch:  # usable standalone again
            assert await branch.chat("x") == "re: x"

    async def test_detach_during_a_long_turn_applies_after_it(self) -> None:
        """The turn's signals reach the session's observer until its terminal; then Detach."""
        gate = Gate()
        recorder = Recorder()
        async with Session() as session:
            session.observe(handler=recorder.dispatch)
            branch = await session.spawn(Branch(name="a", chat_model=gate.model))
            reply = await pride.send(branch, ChatAndRecord("long"))
            await gate.started.wait()
            removed = trio.Event()

            async def remove() -> None:
                await session.remove(branch)
                removed.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(remove)
                await trio.testing.wait_all_tasks_blocked()
                assert branch.owner_id == session.id and not removed.is_set()
                gate.release("long")
            assert await reply.result() == "reply to long"
        turn = [s for s in recorder.signals if getattr(s, "turn_id", None) == reply.turn_id]
        assert [type(s).__name__ for s in turn] == [
            "RunStart",
            "MessageAdded",
            "MessageAdded",
            "RunEnd",
        ]
        assert recorder.kinds()[-1] == "BranchStopped"

    async def test_queued_envelopes_get_branch_closed_on_remove(self) -> None:
        """Work queued behind the running turn is answered BranchClosed, never dropped."""
        gate = Gate()
        async with Session() as session:
            branch = await session.spawn(Branch(chat_model=gate.model))
            first = await pride.send(branch, Chat("first"))
            queued = await pride.send(branch, Chat("queued"))
            await gate.started.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.remove, branch)
                await trio.testing.wait_all_tasks_blocked()
                gate.release("first")
            await first.result()
            with pytest.raises(pride.BranchClosed):
                await queued.result()

    async def test_remove_unknown_member(self) -> None:
        """Removing a non-member raises UnknownBranch."""
        async with Session() as session:
            with pytest.raises(UnknownBranch):
                await session.remove(Branch(chat_model=echo_model()))


class TestLookupAndExchange:
    """get_branch, send/ask by name, operations and statistics."""

    async def test_get_branch_by_name_or_id(self) -> None:
        """Ids (UUID or str) and names resolve; others raise a LookupError."""
        async with Session() as session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            assert session.get_branch("a") is branch
            assert session.get_branch(branch.id) is branch
            assert session.get_branch(str(branch.id)) is branch
            with pytest.raises(LookupError):
                session.get_branch("b")

    async def test_send_and_ask_resolve_names_ids_and_refs(self) -> None:
        """session.ask/send accept a Branch, a name, an id or a BranchRef."""
        async with Session() as session:
            branch = await session.spawn(Branch(name="a", chat_model=echo_model()))
            assert await session.ask("a", Chat("1")) == "re: 1"
            assert await session.ask(branch.id, Chat("2")) == "re: 2"
            assert await session.ask(BranchRef(branch.id, "a"), Chat("3")) == "re: 3"
            reply = await session.send(branch, Chat("4"))
            assert await reply.result() == "re: 4"
            with pytest.raises(UnknownBranch):
                await session.ask("nobody", Chat("x"))

    async def test_run_operation_defaults_to_the_first_member(self) -> None:
        """run_operation sends Call to the first spawned branch unless told otherwise."""
        async with Session() as session:
            with pytest.raises(UnknownBranch):
                await session.run_operation("noop")
            session.register_operation("noop", noop)
            await session.spawn(Branch(name="first", chat_model=echo_model()))
            await session.spawn(Branch(name="second", chat_model=echo_model()))
            assert await session.run_operation("noop") == "first"
            assert await session.run_operation("noop", branch="second") == "second"
            with pytest.raises(pride.UnknownOperation):
                await session.run_operation("missing")

    async def test_a_members_own_operations_survive_attachment(self) -> None:
        """A branch's own registry and the session's both serve: the branch's first.

        Regression: Attach used to replace the branch's registry with the
        session's, so operations registered on the branch were lost.
        """

        async def mine(branch: Branch) -> str:
            return f"{branch.name}'s own"

        async def shared(branch: Branch) -> str:
            return "the session's"

        branch = Branch(name="a", chat_model=echo_model())
        branch.register_operation("mine", mine)
        branch.register_operation("both", mine)
        async with Session() as session:
            session.register_operation("shared", shared)
            session.register_operation("both", shared)
            await session.spawn(branch)
            assert await session.run_operation("mine") == "a's own"
            assert await session.run_operation("shared") == "the session's"
            assert await session.run_operation("both") == "a's own"
            assert await pride.ask(branch, pride.Call("mine")) == "a's own"
            assert branch.get_operation("shared") is shared
            assert {"mine", "both", "shared"} <= set(branch.operations)
            # Registered on the branch while attached: its own, not the session's.
            branch.register_operation("later", mine)
            assert "later" not in session.operations
            await session.remove(branch)
        assert branch.get_operation("mine") is mine
        assert branch.get_operation("both") is mine
        assert branch.get_operation("later") is mine
        assert branch.get_operation("shared") is None

    async def test_statistics_count_members_turns_and_queue(self) -> None:
        """statistics() reports members, running actors, queued work and turns."""
        gate = Gate()
        async with Session() as session:
            a = await session.spawn(Branch(name="a", chat_model=gate.model))
            await session.spawn(Branch(name="b", chat_model=echo_model()))
            first = await pride.send(a, Chat("first"))
            await pride.send(a, Chat("second"))
            await gate.started.wait()
            stats = session.statistics()
            assert (stats.branches, stats.running, stats.queued) == (2, 2, 1)
            gate.release("first")
            gate.release("second")
            await first.result()
            await session.ask("b", Chat("x"))
        stats = session.statistics()
        assert (stats.turns_done, stats.turns_failed, stats.restarts) == (3, 0, 0)
        assert stats.running == 0


async def test_observer_sees_lifecycle_around_turns() -> None:
    """BranchStarted precedes the member's turns; BranchStopped(shutdown) ends them."""
    recorder = Recorder()
    session = Session()
    session.observe(handler=recorder.dispatch)
    async with session:
        await session.spawn(Branch(chat_model=echo_model()))
        await session.run_operation("chat", instruction="hi")
    assert recorder.kinds() == ["BranchStarted", "RunStart", "RunEnd", "BranchStopped"]
    assert recorder.of(BranchStopped)[0].reason == "shutdown"
    assert isinstance(recorder.signals[1], RunStart) and isinstance(recorder.signals[2], RunEnd)
