"""Virtual branches are activated on first use, from a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    ActivationFailed,
    Branch,
    BranchActivated,
    ChatAndRecord,
    Operate,
    Session,
    UnknownBranch,
    VirtualKindError,
)
from pride.llm import ToolCall
from pride.store import BranchStore
from pride.supervisors._virtual_kinds import PENDING_LIMIT
from tests.helpers import Gate, Recorder, echo_model, last_user_text


def user_branch(key: str) -> Branch:
    return Branch(system=f"you help {key}", chat_model=echo_model())


async def test_a_session_without_a_store_refuses_virtual_kinds() -> None:
    """virtual() on a storeless session raises VirtualKindError saying to give it a store."""
    async with Session() as session:
        with pytest.raises(VirtualKindError, match=r"Session\(store="):
            await session.virtual("user", user_branch)


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("", {}),
        ("a/b", {}),
        (["user"], {}),
        ("user", {"passivate_after": 0}),
        ("user", {"passivate_after": True}),
        ("user", {"max_active": 0}),
        ("user", {"max_active": 1.5}),
    ],
)
async def test_bad_kinds_and_options_are_refused(
    tmp_path: Path, kind: Any, options: dict[str, Any]
) -> None:
    """A malformed kind or option is a VirtualKindError (a ValueError), naming the problem."""
    async with Session(store=tmp_path / "s.db") as session:
        with pytest.raises(VirtualKindError):
            await session.virtual(kind, user_branch, **options)
        await session.virtual("ok", user_branch)
        with pytest.raises(VirtualKindError, match="already has a kind"):
            await session.virtual("ok", user_branch)


async def test_first_ask_activates_and_the_conversation_is_stored(tmp_path: Path) -> None:
    """session.ask to kind/key builds the branch with factory(key), named, and stores it."""
    keys: list[str] = []

    def factory(key: str) -> Branch:
        keys.append(key)
        return user_branch(key)

    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        seen = Recorder()
        session.observe(BranchActivated, handler=seen.dispatch)
        await session.virtual("user", factory)
        assert session.branches == ()
        answer = await session.ask("user/ada", ChatAndRecord("hello"))
        assert answer == "re: hello"
        branch = session.get_branch("user/ada")
        assert branch.name == "user/ada"
        assert [m.text for m in branch.messages] == ["you help ada", "hello", "re: hello"]
        await session.ask("user/ada", ChatAndRecord("again"))
        assert keys == ["ada"]
        [activated] = seen.of(BranchActivated)
        assert activated.branch_name == "user/ada" and activated.restored is False
        stats = session.statistics()
        assert (stats.virtual_active, stats.activations) == (1, 1)
    async with BranchStore(path) as store:
        assert [m.text for m in await store.load_messages("user/ada")][1:] == [
            "hello",
            "re: hello",
            "again",
            "re: again",
        ]


async def test_the_stored_conversation_is_restored_on_activation(tmp_path: Path) -> None:
    """A name the store holds comes back with its id and messages."""
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        await session.virtual("user", user_branch)
        await session.ask("user/ada", ChatAndRecord("remember me"))
        first_id = session.get_branch("user/ada").id
    prompts: list[list[str]] = []

    def factory(key: str) -> Branch:
        def reply(request: Any) -> str:
            prompts.append([m["content"] for m in request.messages])
            return f"re: {last_user_text(request)}"

        return Branch(system=f"you help {key}", chat_model=pride.ScriptedModel(reply))

    async with Session(store=path) as session:
        seen = Recorder()
        session.observe(BranchActivated, handler=seen.dispatch)
        await session.virtual("user", factory)
        await session.ask("user/ada", ChatAndRecord("and now?"))
        assert session.get_branch("user/ada").id == first_id
        assert seen.of(BranchActivated)[0].restored is True
    assert prompts == [["you help ada", "remember me", "re: remember me", "and now?"]]


async def test_async_factories_work_too(tmp_path: Path) -> None:
    """An async factory is awaited."""

    async def factory(key: str) -> Branch:
        await trio.lowlevel.checkpoint()
        return user_branch(key)

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        assert await session.ask("user/bo", ChatAndRecord("hi")) == "re: hi"


async def test_concurrent_first_messages_activate_once_and_keep_their_order(
    tmp_path: Path,
) -> None:
    """Ten callers at once make one factory call, and are served in the order they sent."""
    calls = 0
    gate = trio.Event()

    async def factory(key: str) -> Branch:
        nonlocal calls
        calls += 1
        await gate.wait()  # every caller arrives while the activation runs
        return Branch(chat_model=echo_model())

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        replies = []
        for index in range(10):
            replies.append(await session.send("user/ada", ChatAndRecord(f"m{index}")))
        gate.set()
        assert [await reply.result() for reply in replies] == [f"re: m{i}" for i in range(10)]
        branch = session.get_branch("user/ada")
        assert [m.text for m in branch.messages][::2] == [f"m{i}" for i in range(10)]
    assert calls == 1


async def test_concurrent_asks_from_many_tasks_make_one_activation(tmp_path: Path) -> None:
    """Callers racing from separate tasks make one factory call and all get answers."""
    calls = 0

    def factory(key: str) -> Branch:
        nonlocal calls
        calls += 1
        return Branch(chat_model=echo_model())

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        answers: list[str] = []

        async def one(index: int) -> None:
            answers.append(await session.ask("user/ada", ChatAndRecord(f"m{index}")))

        async with trio.open_nursery() as nursery:
            for index in range(20):
                nursery.start_soon(one, index)
    assert calls == 1
    assert sorted(answers) == sorted(f"re: m{i}" for i in range(20))


async def test_a_ref_activates_through_pride_ask_send_and_stream(tmp_path: Path) -> None:
    """session.ref(name) is a target for pride.ask, pride.send and pride.stream."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", user_branch)
        ref = session.ref("user/ada")
        assert session.branches == ()
        assert await pride.ask(ref, ChatAndRecord("one")) == "re: one"
        reply = await pride.send(ref, ChatAndRecord("two"))
        assert await reply.result() == "re: two"
        assert reply.branch is session.get_branch("user/ada")
        await session.passivate("user/ada")
        async with pride.stream(ref, pride.Run("three")) as items:
            streamed = [item async for item in items]
        assert streamed
        async with session.stream("user/bo", pride.Run("four")) as items:
            assert [item async for item in items]
        assert {b.name for b in session.branches} == {"user/ada", "user/bo"}


async def test_an_ask_from_another_branchs_tool_activates(tmp_path: Path) -> None:
    """A member's tool asking a kind/key name by pride.ask activates it."""

    async def ask_helper(question: str) -> str:
        """Ask the helper of ada."""
        return str(await pride.ask("helper/ada", ChatAndRecord(question)))

    calls = iter([[ToolCall("ask_helper", {"question": "why?"}, id="call_1")], "done"])
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("helper", user_branch)
        front = await session.spawn(
            Branch(
                name="front",
                chat_model=pride.ScriptedModel(lambda request: next(calls)),
                tools=[ask_helper],
            )
        )
        await session.ask(front, Operate("go", actions=True))
        helper = session.get_branch("helper/ada")
        assert [m.text for m in helper.messages][1:] == ["why?", "re: why?"]


async def test_a_failing_factory_fails_its_callers_and_the_next_message_tries_again(
    tmp_path: Path,
) -> None:
    """ActivationFailed names the branch for every waiting caller; nothing is kept."""
    attempts = 0
    gate = trio.Event()

    async def factory(key: str) -> Branch:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            await gate.wait()  # both messages arrive during this activation
            raise RuntimeError("no model for you")
        return user_branch(key)

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        first = await session.send("user/ada", ChatAndRecord("one"))
        second = await session.send("user/ada", ChatAndRecord("two"))
        gate.set()
        for reply in (first, second):
            with pytest.raises(ActivationFailed, match="user/ada") as caught:
                await reply.result()
            assert caught.value.branch_name == "user/ada"
            assert isinstance(caught.value.__cause__, RuntimeError)
        assert session.branches == ()
        assert await session.ask("user/ada", ChatAndRecord("three")) == "re: three"
        assert attempts == 2
        stats = session.statistics()
        assert (stats.failed_activations, stats.activations) == (1, 1)


@pytest.mark.parametrize(
    "made",
    [lambda key: "not a branch", lambda key: None],
)
async def test_a_factory_returning_no_branch_fails_the_activation(
    tmp_path: Path, made: Any
) -> None:
    """A factory must return an unstarted Branch; anything else is an ActivationFailed."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", made)
        with pytest.raises(ActivationFailed, match="not a Branch"):
            await session.ask("user/ada", ChatAndRecord("x"))


async def test_a_running_branch_from_the_factory_is_refused(tmp_path: Path) -> None:
    """A branch already serving elsewhere is not taken over by an activation."""
    async with Branch(chat_model=echo_model()) as running:
        async with Session(store=tmp_path / "s.db") as session:
            await session.virtual("user", lambda key: running)
            with pytest.raises(ActivationFailed, match="unstarted"):
                await session.ask("user/ada", ChatAndRecord("x"))


async def test_an_unreadable_store_fails_the_activation(tmp_path: Path) -> None:
    """A stored row that does not read back fails the activation with the StoreError as cause."""
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        await session.virtual("user", user_branch)
        await session.ask("user/ada", ChatAndRecord("x"))
        await session.passivate("user/ada")
        async with session.store._reading:  # type: ignore[union-attr]
            pass
        writer = session.store._writer.db  # type: ignore[union-attr]
        writer.execute("UPDATE messages SET data='{not json' WHERE branch_name='user/ada'")
        writer.commit()
        with pytest.raises(ActivationFailed, match="user/ada") as caught:
            await session.ask("user/ada", ChatAndRecord("y"))
        assert isinstance(caught.value.__cause__, pride.StoreError)


async def test_malformed_keys_and_unknown_kinds_are_unknown_branches(tmp_path: Path) -> None:
    """An empty, huge or control-character key, or an unregistered kind, is UnknownBranch."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", user_branch)
        for name in ("user/", "user/" + "k" * 5000, "user/a\nb", "nobody/ada"):
            with pytest.raises(UnknownBranch):
                await session.ask(name, ChatAndRecord("x"))
        assert session.branches == ()


async def test_a_virtual_name_cannot_be_spawned_by_hand(tmp_path: Path) -> None:
    """A kind's names belong to its factory: spawning one is a ValueError."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", user_branch)
        with pytest.raises(ValueError, match="virtual branch"):
            await session.spawn(Branch(name="user/ada", chat_model=echo_model()))


async def test_a_cancelled_first_caller_is_not_served_and_others_are(tmp_path: Path) -> None:
    """A caller cancelled while the activation runs accepted nothing; the others go on."""
    gate = trio.Event()

    async def factory(key: str) -> Branch:
        await gate.wait()
        return Branch(chat_model=echo_model())

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        with trio.move_on_after(1) as scope:
            scope.deadline = trio.current_time()  # cancelled once it waits
            await session.ask("user/ada", ChatAndRecord("dropped"))
        assert scope.cancelled_caught
        reply = await session.send("user/ada", ChatAndRecord("kept"))
        gate.set()
        assert await reply.result() == "re: kept"
        branch = session.get_branch("user/ada")
        assert [m.text for m in branch.messages] == ["kept", "re: kept"]


async def test_get_branch_finds_a_live_virtual_branch_only(tmp_path: Path) -> None:
    """get_branch raises UnknownBranch before activation and after passivation."""
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", user_branch)
        with pytest.raises(UnknownBranch):
            session.get_branch("user/ada")
        await session.ask("user/ada", ChatAndRecord("x"))
        assert session.get_branch("user/ada").running
        assert await session.passivate("user/ada") is True
        with pytest.raises(UnknownBranch):
            session.get_branch("user/ada")
        assert await session.passivate("user/ada") is False


async def test_a_gated_turn_keeps_later_messages_queued_in_order(tmp_path: Path) -> None:
    """Messages sent while a virtual branch's first turn runs are served after it, in order."""
    gate = Gate()
    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", lambda key: Branch(chat_model=gate.model))
        replies = [await session.send("user/ada", ChatAndRecord(f"m{i}")) for i in range(3)]
        for index in range(3):
            gate.release(f"m{index}")
        assert [await r.result() for r in replies] == [f"reply to m{i}" for i in range(3)]
        assert gate.events == [(e, f"m{i}") for i in range(3) for e in ("start", "end")]


async def test_send_nowait_queues_for_the_activation_it_starts(tmp_path: Path) -> None:
    """pride.send_nowait to a name that is not live queues the envelope and activates;
    past the activation's queue limit it raises MailboxFull, nothing queued."""
    gate = trio.Event()

    async def factory(key: str) -> Branch:
        await gate.wait()
        return Branch(chat_model=echo_model(), mailbox_size=2000)

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        ref = session.ref("user/ada")
        replies = [pride.send_nowait(ref, ChatAndRecord(f"m{i}")) for i in range(PENDING_LIMIT)]
        with pytest.raises(pride.MailboxFull):
            pride.send_nowait(ref, ChatAndRecord("one too many"))
        gate.set()
        assert await replies[0].result() == "re: m0"
        assert await replies[-1].result() == f"re: m{PENDING_LIMIT - 1}"


async def test_activate_returns_the_live_branch_or_raises_the_failure(tmp_path: Path) -> None:
    """session.activate activates without sending; a failure raises ActivationFailed."""

    def factory(key: str) -> Branch:
        if key == "broken":
            raise LookupError("no such user")
        return user_branch(key)

    async with Session(store=tmp_path / "s.db") as session:
        await session.virtual("user", factory)
        branch = await session.activate("user/ada")
        assert branch is session.get_branch("user/ada") and branch.running
        assert await session.activate("user/ada") is branch
        with pytest.raises(ActivationFailed, match="no such user"):
            await session.activate("user/broken")
        with pytest.raises(UnknownBranch):
            await session.activate("nobody/ada")


async def test_a_ref_from_the_parent_to_a_child_sessions_live_kind_outlives_passivation(
    tmp_path: Path,
) -> None:
    """``parent.ref("user/ada")`` of a kind registered on a child session is the
    branch's address even while it is live: asked after a passivation, it
    activates the branch again (it was a BranchRef to the live branch, and
    raised UnknownBranch once that one was passivated)."""
    async with BranchStore(tmp_path / "desk.db") as store, Session() as parent:
        child = await parent.spawn_session("desk", store=store)
        await child.virtual("user", user_branch)
        assert await parent.ask("user/ada", ChatAndRecord("one")) == "re: one"
        ref = parent.ref("user/ada")  # taken while the branch is live
        assert await child.passivate("user/ada")
        assert await pride.ask(ref, ChatAndRecord("two")) == "re: two"
        texts = [m.text for m in child.get_branch("user/ada").messages]
        assert texts == ["you help ada", "one", "re: one", "two", "re: two"]
