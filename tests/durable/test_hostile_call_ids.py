"""Issue 36, item 1: tool-call ids are model output, so hostile; a person approves
exactly the call that was shown to them, whatever ids the model gives.

The model speaks through the real loopback server (its replies name any ids we like),
and the durable runs keep their journal in a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pride
from pride import (
    Act,
    ActionCall,
    ApprovalRequested,
    ApprovalRequired,
    Approve,
    Branch,
    Deny,
    Session,
    UnknownPendingCall,
    iModel,
)
from pride.llm import RetryPolicy, ToolCall
from pride.testing import openai_server


class Tools:
    """A harmless tool and a dangerous one, both gated, and a log of what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def all(self) -> list[pride.Tool]:
        def read_inbox(folder: str) -> str:
            """Read a folder of the inbox."""
            self.ran.append(f"read {folder}")
            return f"{folder}: empty"

        def wire_money(amount: int) -> str:
            """Wire money."""
            self.ran.append(f"wire {amount}")
            return f"wired {amount}"

        return [
            pride.Tool(read_inbox, requires_approval=True),
            pride.Tool(wire_money, requires_approval=True),
        ]


def _model(server: Any) -> iModel:
    return iModel(
        "openai/gpt-test",
        base_url=server.base_url,
        api_key="sk-test",
        retry=RetryPolicy(max_retries=0),
    )


@pytest.fixture(params=["memory", "store"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    """The journal in memory, and in a real SQLite store."""
    return tmp_path / "store.db" if request.param == "store" else None


def _shown(requested: list[ApprovalRequested]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.call_id, r.function, dict(r.arguments)) for r in requested]


async def test_issue36_two_calls_with_one_id_are_each_shown_and_decided_apart(
    store: Path | None,
) -> None:
    """A reply giving a harmless and a dangerous call the same id: each gets its own
    ApprovalRequested with its own id, and approving the harmless one runs only it."""
    harmless = ToolCall("read_inbox", {"folder": "spam"}, id="dup")
    dangerous = ToolCall("wire_money", {"amount": 1_000_000}, id="dup")
    tools = Tools()
    requested: list[ApprovalRequested] = []
    async with openai_server([[harmless, dangerous], "done"]) as server:
        async with Session(store=store) as session:
            session.observe(ApprovalRequested, handler=requested.append)
            branch = await session.spawn(
                Branch(name="mailer", chat_model=_model(server), tools=tools.all())
            )
            with pytest.raises(ApprovalRequired) as info:
                await branch.operate("tidy up", actions=True)
            stopped = info.value
            pending = [(c.call_id, c.function, dict(c.arguments)) for c in stopped.pending]
            assert len({call_id for call_id, _, _ in pending}) == 2  # one id per call
            assert _shown(requested) == pending  # one announcement per pending call
            [(read_id, _, _)] = [p for p in pending if p[1] == "read_inbox"]
            [(wire_id, _, _)] = [p for p in pending if p[1] == "wire_money"]

            with pytest.raises(ApprovalRequired) as again:  # a subset decided
                await session.resolve(stopped.turn_id, {read_id: Approve()})
            assert tools.ran == ["read spam"]  # exactly the call that was shown
            assert [c.call_id for c in again.value.pending] == [wire_id]

            await session.resolve(stopped.turn_id, {wire_id: Deny("no")})
            assert tools.ran == ["read spam"]
    assert len(requested) == 2  # never announced again
    # What the model was told answers each of its calls once, under distinct ids.
    last = server.requests[-1].body["messages"]
    [assistant] = [m for m in last if m.get("tool_calls")]
    ids = [call["id"] for call in assistant["tool_calls"]]
    assert len(set(ids)) == 2
    answered = [m["tool_call_id"] for m in last if m.get("role") == "tool"]
    assert sorted(answered) == sorted(ids)


async def test_issue36_an_id_reused_in_a_later_round_is_announced_and_decided_apart(
    store: Path | None,
) -> None:
    """A later round reusing the id of a call already approved and run: the new call is
    announced under an id of its own, and the old decision never runs it."""
    first = ToolCall("read_inbox", {"folder": "spam"}, id="call_1")
    second = ToolCall("wire_money", {"amount": 5}, id="call_1")
    tools = Tools()
    requested: list[ApprovalRequested] = []
    async with openai_server([first, second, "done"]) as server:
        async with Session(store=store) as session:
            session.observe(ApprovalRequested, handler=requested.append)
            branch = await session.spawn(
                Branch(name="mailer", chat_model=_model(server), tools=tools.all())
            )
            with pytest.raises(ApprovalRequired) as info:
                await pride.ask(branch, pride.Run("tidy up"))
            turn_id = info.value.turn_id
            assert [c.call_id for c in info.value.pending] == ["call_1"]
            with pytest.raises(ApprovalRequired) as again:
                await session.resolve(turn_id, {"call_1": Approve()})
            assert tools.ran == ["read spam"]
            [waiting] = again.value.pending
            assert waiting.function == "wire_money" and waiting.call_id != "call_1"
            assert _shown(requested)[-1] == (waiting.call_id, "wire_money", {"amount": 5})
            with pytest.raises(UnknownPendingCall):  # the old id decides nothing now
                await session.resolve(turn_id, {"call_1": Approve()})
            assert tools.ran == ["read spam"]
            await session.resolve(turn_id, {waiting.call_id: Deny("no")})
    assert tools.ran == ["read spam"]
    assert len(requested) == 2


@pytest.mark.parametrize(("first", "second"), [("x", "x"), (None, "step-0")])
async def test_issue36_an_act_in_a_turn_with_one_id_twice_is_decided_apart(
    store: Path | None, first: str | None, second: str
) -> None:
    """Ids a caller gives (an Act's calls inside a turn) are held to the same rule, the
    id pride gives a call without one (``step-N``) included."""
    tools = Tools()
    requested: list[ApprovalRequested] = []
    async with Session(store=store) as session:
        session.observe(ApprovalRequested, handler=requested.append)
        branch = await session.spawn(Branch(name="mailer", tools=tools.all()))

        async def both(branch: Branch) -> Any:
            return await pride.ask(
                branch,
                Act(
                    (
                        ActionCall("read_inbox", {"folder": "spam"}, first),
                        ActionCall("wire_money", {"amount": 7}, second),
                    )
                ),
            )

        branch.register_operation("both", both)
        with pytest.raises(ApprovalRequired) as info:
            await branch.call("both")
        pending = [(c.call_id, c.function, dict(c.arguments)) for c in info.value.pending]
        assert len({call_id for call_id, _, _ in pending}) == 2
        assert _shown(requested) == pending
        [(read_id, _, _)] = [p for p in pending if p[1] == "read_inbox"]
        with pytest.raises(ApprovalRequired):
            await session.resolve(info.value.turn_id, {read_id: Approve()})
        assert tools.ran == ["read spam"]
