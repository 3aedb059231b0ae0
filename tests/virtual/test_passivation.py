"""Virtual branches leave memory when idle, by hand, past max_active, on a crash and at
shutdown, and come back from the store."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import (
    Branch,
    BranchActivated,
    BranchPassivated,
    BranchStopped,
    ChatAndRecord,
    Operate,
    Session,
    UnknownBranch,
)
from pride.llm import ModelRequest, ToolCall
from pride.store import BranchStore
from pride.supervisors._virtual_kinds import Live, make_kind
from tests.helpers import Gate, Recorder, echo_model, last_user_text, saving_garbage

PASSIVATE_AFTER = 60.0


def user_branch(key: str) -> Branch:
    return Branch(system=f"you help {key}", chat_model=echo_model())


class Watch:
    """Records activations and passivations with their (virtual) times."""

    def __init__(self, session: Session) -> None:
        self.events: list[tuple[str, str, Any, float]] = []
        self.passivated = trio.Event()
        session.observe(BranchActivated, BranchPassivated, handler=self._seen)

    def _seen(self, signal: Any) -> None:
        if isinstance(signal, BranchPassivated):
            self.events.append(("passivated", signal.branch_name, signal.reason, _now()))
            self.passivated.set()
        else:
            self.events.append(("activated", signal.branch_name, signal.restored, _now()))

    async def next_passivation(self) -> tuple[str, str, Any, float]:
        await self.passivated.wait()
        self.passivated = trio.Event()
        return next(e for e in reversed(self.events) if e[0] == "passivated")


def _now() -> float:
    return trio.current_time()


def checking_branches(escalate: Callable[[], bool]) -> Callable[[str], Branch]:
    """A factory of branches that call their ``check`` tool when told "check" (and say
    "checked" after), and echo anything else; ``check`` escalates while ``escalate()``."""

    def check(x: str) -> str:
        """Check something."""
        if escalate():
            raise pride.Escalate("state not to be trusted")
        return "fine"

    def reply(request: ModelRequest) -> Any:
        if request.messages[-1].get("role") == "tool":
            return "checked"
        if last_user_text(request) == "check":
            return [ToolCall("check", {"x": "1"}, id="c1")]
        return f"re: {last_user_text(request)}"

    def factory(key: str) -> Branch:
        return Branch(chat_model=pride.ScriptedModel(reply), tools=[check])

    return factory


async def test_an_idle_branch_is_passivated_and_comes_back_with_its_history(
    tmp_path: Path, idle_clock: trio.testing.MockClock
) -> None:
    """Idle for passivate_after seconds, it leaves the session; the next ask restores it."""
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        watch = Watch(session)
        await session.virtual("user", user_branch, passivate_after=PASSIVATE_AFTER)
        await session.ask("user/ada", ChatAndRecord("one"))
        idle_from = _now()
        _, name, reason, at = await watch.next_passivation()
        assert (name, reason) == ("user/ada", "idle")
        assert at - idle_from >= PASSIVATE_AFTER
        assert session.branches == ()
        with pytest.raises(UnknownBranch):
            session.get_branch("user/ada")
        stats = session.statistics()
        assert (stats.virtual_active, stats.passivations, stats.branches) == (0, 1, 0)
        assert await session.ask("user/ada", ChatAndRecord("two")) == "re: two"
        branch = session.get_branch("user/ada")
        assert [m.text for m in branch.messages] == [
            "you help ada",
            "one",
            "re: one",
            "two",
            "re: two",
        ]
        assert [e[2] for e in watch.events if e[0] == "activated"] == [False, True]


async def test_each_use_moves_the_idle_deadline(
    tmp_path: Path, idle_clock: trio.testing.MockClock
) -> None:
    """A branch used every half period is never passivated; it is once the uses stop."""
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        await session.virtual("user", user_branch, passivate_after=PASSIVATE_AFTER)
        for index in range(6):
            await session.ask("user/ada", ChatAndRecord(f"m{index}"))
            await trio.sleep(PASSIVATE_AFTER / 2)  # virtual time passing, not a synchronisation
        assert [e for e in watch.events if e[0] == "passivated"] == []
        last = _now()
        _, _, reason, at = await watch.next_passivation()
        assert reason == "idle" and at - last >= PASSIVATE_AFTER / 2


async def test_passivation_never_interrupts_a_turn(
    tmp_path: Path, idle_clock: trio.testing.MockClock
) -> None:
    """A turn running far past passivate_after finishes; the idle clock starts at its end."""
    gate = Gate()
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        await session.virtual(
            "user", lambda key: Branch(chat_model=gate.model), passivate_after=PASSIVATE_AFTER
        )
        reply = await session.send("user/ada", ChatAndRecord("slow"))
        await gate.started.wait()
        await trio.sleep(5 * PASSIVATE_AFTER)
        assert [e for e in watch.events if e[0] == "passivated"] == []
        gate.release("slow")
        assert await reply.result() == "reply to slow"
        ended = _now()
        _, _, reason, at = await watch.next_passivation()
        assert reason == "idle" and at - ended >= PASSIVATE_AFTER


async def test_passivation_never_interrupts_an_open_stream(
    tmp_path: Path, idle_clock: trio.testing.MockClock
) -> None:
    """A stream held open past passivate_after keeps its branch; closing it starts the clock."""
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        await session.virtual("user", user_branch, passivate_after=PASSIVATE_AFTER)
        async with session.stream("user/ada", pride.Run("hello")) as items:
            first = await items.__anext__()
            await trio.sleep(5 * PASSIVATE_AFTER)
            assert [e for e in watch.events if e[0] == "passivated"] == []
            rest = [item async for item in items]
        assert first is not None and rest is not None
        closed = _now()
        _, _, reason, at = await watch.next_passivation()
        assert reason == "idle" and at - closed >= PASSIVATE_AFTER


async def test_manual_passivation_serves_queued_work_first(tmp_path: Path) -> None:
    """session.passivate lets the running turn and the queued ones finish, then stops it."""
    gate = Gate()
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        await session.virtual("user", lambda key: Branch(chat_model=gate.model))
        replies = [await session.send("user/ada", ChatAndRecord(f"m{i}")) for i in range(3)]
        await gate.started.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.passivate, "user/ada")
            await trio.testing.wait_all_tasks_blocked()
            later = await session.send("user/ada", ChatAndRecord("after"))  # waits, reactivates
            for index in range(3):
                gate.release(f"m{index}")
            gate.release("after")
        assert [await r.result() for r in replies] == [f"reply to m{i}" for i in range(3)]
        assert await later.result() == "reply to after"
        kinds = [(e[0], e[2]) for e in watch.events]
        assert kinds == [("activated", False), ("passivated", "manual"), ("activated", True)]
        branch = session.get_branch("user/ada")
        assert [m.text for m in branch.messages][::2] == ["m0", "m1", "m2", "after"]


async def test_max_active_passivates_the_least_recently_used(tmp_path: Path) -> None:
    """With max_active=2, a third name passivates the one used longest ago."""
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        await session.virtual("user", user_branch, max_active=2)
        await session.ask("user/a", ChatAndRecord("x"))
        await session.ask("user/b", ChatAndRecord("x"))
        await session.ask("user/a", ChatAndRecord("y"))  # b is now the least recently used
        await session.ask("user/c", ChatAndRecord("x"))
        assert sorted(b.name for b in session.branches) == ["user/a", "user/c"]
        assert [(e[1], e[2]) for e in watch.events if e[0] == "passivated"] == [
            ("user/b", "max_active")
        ]
        assert session.statistics().virtual_active == 2


async def test_a_passivated_branch_leaves_no_reference_behind(tmp_path: Path) -> None:
    """After passivation nothing in the process keeps the branch object alive: it is
    freed at once, by reference counting, not at a later full collection."""
    async with Session(store=tmp_path / "s.db") as session:
        seen = Recorder()
        session.observe(lambda signal: True, handler=seen.dispatch)
        await session.virtual("user", user_branch)
        await session.ask("user/ada", ChatAndRecord("one"))
        ref = weakref.ref(session.get_branch("user/ada"))
        with saving_garbage():  # what a collection finds is kept: only counting frees
            await session.passivate("user/ada")
            seen.signals.clear()  # signals carry names and ids, never the branch
            assert ref() is None


async def test_a_crash_fails_the_turn_passivates_and_the_next_message_activates_afresh(
    tmp_path: Path,
) -> None:
    """Escalate from a tool fails the turn; the branch is passivated (crash), then restored."""
    escalate = True
    factory = checking_branches(lambda: escalate)

    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)
        stopped = Recorder()
        session.observe(BranchStopped, handler=stopped.dispatch)
        await session.virtual("user", factory)
        await session.ask("user/ada", ChatAndRecord("hello"))
        crashing = await session.send("user/ada", Operate("check", actions=True))
        behind = await session.send("user/ada", ChatAndRecord("still there?"))
        with pytest.raises(pride.Escalate):
            await crashing.result()
        assert (await watch.next_passivation())[1:3] == ("user/ada", "crash")
        # queued behind the crash: served by the next activation, from the store
        assert await behind.result() == "re: still there?"
        texts = [m.text for m in session.get_branch("user/ada").messages]
        # what the crashed turn recorded was committed with it, as for any failed turn
        assert texts[:3] == ["hello", "re: hello", "check"]
        assert texts[-2:] == ["still there?", "re: still there?"]
        await session.passivate("user/ada")
        assert session.branches == ()
        assert session.statistics().restarts == 0  # never restarted, never counted
        escalate = False
        result = await session.ask("user/ada", Operate("check", actions=True))
        assert result.output == "checked"
        branch = session.get_branch("user/ada")
        assert [m.text for m in branch.messages][:2] == ["hello", "re: hello"]
        assert [s.reason for s in stopped.of(BranchStopped)] == ["crash", "normal"]


async def test_shutdown_passivates_every_live_branch(tmp_path: Path) -> None:
    """Leaving the session passivates the live virtual branches with reason shutdown."""
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        watch = Watch(session)
        await session.virtual("user", user_branch)
        for key in ("a", "b"):
            await session.ask(f"user/{key}", ChatAndRecord("hi"))
    assert sorted((e[1], e[2]) for e in watch.events if e[0] == "passivated") == [
        ("user/a", "shutdown"),
        ("user/b", "shutdown"),
    ]
    async with BranchStore(path) as store:
        assert sorted(b.name for b in await store.branches()) == ["user/a", "user/b"]


async def test_messages_recorded_between_turns_are_committed_before_passivation(
    tmp_path: Path,
) -> None:
    """A message added outside a turn is in the store once passivate returns."""
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        await session.virtual("user", user_branch)
        await session.ask("user/ada", ChatAndRecord("one"))
        branch = session.get_branch("user/ada")
        branch.add_message(pride.Instruction(instruction="noted"))
        await session.passivate("user/ada")
        async with BranchStore(path, read_only=True) as store:
            texts = [m.text for m in await store.load_messages("user/ada")]
        assert texts[-1] == "noted"


async def test_a_child_sessions_kind_serves_the_tree_and_its_parent_stops_it(
    tmp_path: Path,
) -> None:
    """A kind registered on a child session is reached by name from the parent, and the
    parent's shutdown passivates its live branches (no activation starts meanwhile)."""
    async with BranchStore(tmp_path / "desk.db") as store, Session() as parent:
        child = await parent.spawn_session("desk", store=store)
        watch = Watch(child)
        await child.virtual("user", user_branch)
        assert await parent.ask("user/ada", ChatAndRecord("hi")) == "re: hi"
        assert child.get_branch("user/ada").running
    assert [(e[1], e[2]) for e in watch.events if e[0] == "passivated"] == [
        ("user/ada", "shutdown")
    ]


async def test_passivating_itself_from_its_own_turn_is_refused(tmp_path: Path) -> None:
    """A tool of a virtual branch passivating that branch gets ReentrancyError (it would
    wait on itself), and the branch stays live and usable."""
    session_box: list[Session] = []

    async def sleep_now() -> str:
        """Go to sleep."""
        try:
            await session_box[0].passivate("user/ada")
        except pride.ReentrancyError as exc:
            return f"refused: {type(exc).__name__}"
        return "passivated"

    def reply(request: ModelRequest) -> Any:
        if request.messages[-1].get("role") == "tool":
            return str(request.messages[-1].get("content"))
        return [ToolCall("sleep_now", {}, id="s1")]

    async with Session(store=tmp_path / "s.db") as session:
        session_box.append(session)
        await session.virtual(
            "user", lambda key: Branch(chat_model=pride.ScriptedModel(reply), tools=[sleep_now])
        )
        result = await session.ask("user/ada", Operate("sleep", actions=True))
        assert "refused: ReentrancyError" in result.output
        assert session.get_branch("user/ada").running
        assert await session.passivate("user/ada") is True


async def test_a_branch_used_while_the_reaper_passivates_another_stays_live(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Branches that expire together are passivated one after another, each waiting
    for its commit: one used in between (here from a subscriber of the first one's
    passivation, so the use falls in that window) is no longer idle and stays."""
    late: list[pride.Reply] = []
    async with Session(store=tmp_path / "s.db") as session:
        watch = Watch(session)

        async def use_bob(signal: BranchPassivated) -> None:
            if signal.branch_name == "user/ada":
                late.append(await session.send("user/bob", ChatAndRecord("late")))

        session.observe(BranchPassivated, handler=use_bob)
        await session.virtual("user", user_branch, passivate_after=PASSIVATE_AFTER)
        await session.ask("user/ada", ChatAndRecord("one"))
        await session.ask("user/bob", ChatAndRecord("one"))  # the same virtual instant
        mock_clock.jump(PASSIVATE_AFTER)
        _, name, reason, _ = await watch.next_passivation()
        assert (name, reason) == ("user/ada", "idle")
        await trio.testing.wait_all_tasks_blocked()
        assert len(late) == 1
        assert await late[0].result() == "re: late"
        assert [e[1] for e in watch.events if e[0] == "passivated"] == ["user/ada"]
        assert session.statistics().virtual_active == 1


def test_the_scan_for_an_expired_branch_ends_when_every_one_is_busy() -> None:
    """Each busy branch the scan meets goes to the end with a fresh deadline; when
    ``now + passivate_after`` rounds to ``now`` (a tiny idle limit late in a long
    run), a scan that went on while the front had expired met them again without
    end, holding the event loop. It looks at each live branch once at most."""
    kind = make_kind("user", user_branch, 1e-300, None)
    now = 1e6  # 1e6 + 1e-300 == 1e6
    for name in ("user/ada", "user/bob"):
        kind.live[name] = Live(Branch(name=name), now)
    assert kind.next_expired(now, lambda name, live: True) is None
    assert list(kind.live) == ["user/ada", "user/bob"]
    assert kind.next_expired(now, lambda name, live: name == "user/ada") == "user/bob"


async def test_work_queued_behind_a_crash_keeps_its_place_before_later_work(
    tmp_path: Path,
) -> None:
    """The work queued behind a crash goes to the next activation ahead of work sent
    after the crash (here from a subscriber of the crash's passivation, the window
    while its rows are committed): one caller's order holds across the crash."""
    factory = checking_branches(lambda: True)
    later: list[pride.Reply] = []
    async with Session(store=tmp_path / "s.db") as session:

        async def send_later(signal: BranchPassivated) -> None:
            if signal.reason == "crash":
                later.append(await session.send("user/ada", ChatAndRecord("after the crash")))

        session.observe(BranchPassivated, handler=send_later)
        await session.virtual("user", factory)
        await session.ask("user/ada", ChatAndRecord("hello"))
        crashing = await session.send("user/ada", Operate("check", actions=True))
        behind = await session.send("user/ada", ChatAndRecord("queued behind"))
        with pytest.raises(pride.Escalate):
            await crashing.result()
        assert await behind.result() == "re: queued behind"
        assert len(later) == 1
        assert await later[0].result() == "re: after the crash"
        texts = [m.text for m in session.get_branch("user/ada").messages]
        assert texts[-4:] == [
            "queued behind",
            "re: queued behind",
            "after the crash",
            "re: after the crash",
        ]
