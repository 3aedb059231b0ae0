"""Tests for ``pride.cli._status``: what ``pride run``'s status line says of the tree."""

from __future__ import annotations

import io
from pathlib import Path
from uuid import UUID, uuid4 as new_id

import pytest
import trio
import trio.testing
from rich.console import Console

from pride import Branch, Chat, ChatAndRecord, ProviderError, ScriptedModel, Session
from pride.cli._status import StatusLine, TurnsInFlight, describe_usage, turns_in_flight
from pride.llm import ModelRequest, ScriptedReply, Usage as CallUsage
from pride.messages import BranchStopped, RunEnd, RunFailed, RunStart, RunSuspended, Usage


async def test_the_status_line_names_the_turns_in_flight_and_the_cost() -> None:
    """While a turn runs its branch is named; afterwards tokens and cost are counted."""
    release = trio.Event()

    async def held(request: ModelRequest) -> ScriptedReply:
        await release.wait()
        return ScriptedReply("ok", usage=CallUsage(20, 10, cached_tokens=0, cost_usd=0.05))

    async with Session() as root:
        team = await root.spawn_session("team")
        ada = await team.spawn(Branch(name="ada", chat_model=ScriptedModel(held)))
        status = StatusLine(root, Console(file=io.StringIO(), width=200))
        reply = await root.send("ada", Chat("q"))
        await trio.testing.wait_all_tasks_blocked()  # the turn waits on the model
        assert ada.active_turn_id == reply.turn_id
        assert turns_in_flight(root) == ["ada"]
        assert "1 running (ada)" in status.render().plain
        release.set()
        await reply.result()
        line = status.render().plain
    assert "running" not in line
    assert "turns 1 done, 0 failed" in line and "tokens 30" in line and "$0.0500" in line


def test_usage_is_described_with_its_cost_only_when_known() -> None:
    """A usage reads as tokens in and out, plus the cost when a model reported one."""
    assert describe_usage(Usage(1000, 234, None)) == "1,234 tokens (1,000 in, 234 out)"
    assert describe_usage(Usage(1, 2, 0.0123)) == "3 tokens (1 in, 2 out), $0.0123"


def _held() -> tuple[ScriptedModel, dict[str, trio.Event]]:
    """A model whose call for instruction ``x`` waits until ``gates[x]`` is set;
    an instruction starting ``fail`` raises once released."""
    gates: dict[str, trio.Event] = {}

    async def reply(request: ModelRequest) -> str:
        text = str(request.messages[-1]["content"])
        gate = gates.setdefault(text, trio.Event())
        await gate.wait()
        if text.startswith("fail"):
            raise ProviderError("refused")
        return "ok"

    return ScriptedModel(reply), gates


async def test_turns_in_flight_follow_the_signals_of_concurrent_turns_and_failures() -> None:
    """Turns running at once are listed in start order, each until its terminal: a
    failed turn leaves the list as a finished one does, and a child session's too."""
    model, gates = _held()
    async with Session() as root:
        turns = TurnsInFlight(root.resolve_name)
        root.observe(*TurnsInFlight.SIGNALS, handler=turns.observe)
        team = await root.spawn_session("team")
        for name in ("ada", "bob"):
            await root.spawn(Branch(name=name, chat_model=model))
        await team.spawn(Branch(name="cy", chat_model=model))
        replies = {}
        for name, text in (("bob", "b1"), ("cy", "c1"), ("ada", "fail a1")):
            replies[name] = await root.send(name, Chat(text))
            await trio.testing.wait_all_tasks_blocked()  # its turn waits on the model
        assert turns.names() == ["bob", "cy", "ada"]
        assert turns.names() == [n for n in ("bob", "cy", "ada") if n in turns_in_flight(root)]
        gates["fail a1"].set()
        with pytest.raises(ProviderError):
            await replies["ada"].result()
        assert turns.names() == ["bob", "cy"]
        gates["c1"].set()
        await replies["cy"].result()
        assert turns.names() == ["bob"]
        gates["b1"].set()
        await replies["bob"].result()
        assert turns.names() == [] and turns_in_flight(root) == []


async def test_turns_in_flight_are_the_tree_s_running_turns_at_every_terminal(
    tmp_path: Path,
) -> None:
    """With a store (terminals sent after group commits, next turns already running),
    the list at every terminal is exactly the other turns the tree walk finds running."""
    async with Session(store=tmp_path / "store.db") as root:
        turns = TurnsInFlight(root.resolve_name)
        root.observe(*TurnsInFlight.SIGNALS, handler=turns.observe)
        seen: list[tuple[list[str], list[str]]] = []

        def compare(signal: RunEnd | RunFailed) -> None:
            # The tree walk, less the turn ending (still finalising when not handed on).
            ending = root.resolve_name(signal.branch_id)
            walked = turns_in_flight(root)
            if ending.active_turn_id == signal.turn_id:
                walked.remove(ending.name)
            seen.append((sorted(turns.names()), sorted(walked)))

        root.observe(RunEnd, RunFailed, handler=compare)  # after turns.observe
        release = trio.Event()

        async def reply(request: ModelRequest) -> str:
            if request.messages[-1]["content"] == "hold":
                await release.wait()
            for _ in range(3):  # let the other branches' turns interleave with this one
                await trio.sleep(0)
            return "ok"

        model = ScriptedModel(reply)
        team = await root.spawn_session("team")
        held = await root.spawn(Branch(name="held", chat_model=model))
        members = [await root.spawn(Branch(name=f"b{i}", chat_model=model)) for i in range(6)]
        members += [await team.spawn(Branch(name=f"t{i}", chat_model=model)) for i in range(4)]
        holding = await root.send(held, ChatAndRecord("hold"))
        replies = [
            await root.send(branch, ChatAndRecord(f"q{round}"))
            for round in range(5)
            for branch in members
        ]
        for done in replies:
            await done.result()
        release.set()
        await holding.result()
    assert len(seen) == 51
    assert all(listed == walked for listed, walked in seen), seen
    assert all("held" in listed for listed, _ in seen[:-1]) and seen[-1] == ([], [])


class _Running:
    def __init__(self, turn_id: UUID | None) -> None:
        self.active_turn_id = turn_id


def test_turns_in_flight_forget_a_branch_that_stopped_without_a_terminal() -> None:
    """A turn whose terminal never came (its actor crashed in the runtime) is dropped
    when its branch stops; a terminal for a turn never seen starting is ignored."""
    turns = TurnsInFlight()
    ada, bob = new_id(), new_id()
    first, second, third = new_id(), new_id(), new_id()
    turns.observe(RunStart(branch_id=ada, branch_name="ada", turn_id=first))
    turns.observe(RunStart(branch_id=bob, branch_name="bob", turn_id=second))
    turns.observe(RunEnd(branch_id=bob, branch_name="bob", turn_id=new_id()))  # not started
    assert turns.names() == ["ada", "bob"]
    turns.observe(BranchStopped(branch_id=ada, branch_name="ada", reason="crash"))
    assert turns.names() == ["bob"]
    # bob's next turn starts before its last one's terminal (sent after a commit).
    turns.observe(RunStart(branch_id=bob, branch_name="bob", turn_id=third))
    assert turns.names() == ["bob"]
    turns.observe(RunSuspended(branch_id=bob, branch_name="bob", turn_id=second))
    assert turns.names() == ["bob"]
    turns.observe(RunFailed(branch_id=bob, branch_name="bob", turn_id=third))
    assert turns.names() == []


def test_a_turn_its_branch_has_finished_running_is_not_listed() -> None:
    """A turn waiting only for its commit (its branch runs another turn, or none) is
    left out and forgotten; its terminal, when it comes, changes nothing."""
    ada, bob = new_id(), new_id()
    first, second, third = new_id(), new_id(), new_id()
    branches = {ada: _Running(first), bob: _Running(second)}
    turns = TurnsInFlight(branches.get)
    turns.observe(RunStart(branch_id=ada, branch_name="ada", turn_id=first))
    turns.observe(RunStart(branch_id=bob, branch_name="bob", turn_id=second))
    assert turns.names() == ["ada", "bob"]
    branches[ada].active_turn_id = None  # ada's turn has run; its commit is pending
    branches[bob].active_turn_id = third  # bob went on to its next turn
    turns.observe(RunStart(branch_id=bob, branch_name="bob", turn_id=third))
    assert turns.names() == ["bob"]
    turns.observe(RunEnd(branch_id=ada, branch_name="ada", turn_id=first))
    turns.observe(RunEnd(branch_id=bob, branch_name="bob", turn_id=second))
    assert turns.names() == ["bob"]
    branches[bob].active_turn_id = None
    assert turns.names() == []
