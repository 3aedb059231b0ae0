"""A turn of a virtual branch waiting for approval survives passivation: resolve
activates the branch and the approved call runs exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

import pride
from pride import ApprovalRequired, Approve, Branch, BranchPassivated, Operate, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from tests.helpers import Recorder

sent: list[str] = []


def send_email(to: str) -> str:
    """Send an email."""
    sent.append(to)
    return f"sent to {to}"


def reply(request: ModelRequest) -> ScriptedReply:
    last = request.messages[-1]
    if last.get("role") == "tool":
        return ScriptedReply(f"done: {last.get('content')}")
    return ScriptedReply(tool_calls=(ToolCall("send_email", {"to": "bob"}, id="call_bob"),))


def mailer(key: str) -> Branch:
    return Branch(
        chat_model=pride.ScriptedModel(reply),
        tools=[pride.Tool(send_email, requires_approval=True)],
    )


@pytest.mark.parametrize("restart", [False, True], ids=["same session", "new session"])
async def test_resolve_activates_a_passivated_branch_and_runs_the_call_once(
    tmp_path: Path, restart: bool
) -> None:
    """The suspended turn waits in the store; resolve finds it there and continues it."""
    sent.clear()
    path = tmp_path / "s.db"
    async with Session(store=path) as session:
        watch = Recorder()
        session.observe(BranchPassivated, handler=watch.dispatch)
        await session.virtual("mail", mailer)
        with pytest.raises(ApprovalRequired) as stopped:
            await session.ask("mail/ada", Operate("email bob", actions=True))
        turn_id = stopped.value.turn_id
        assert await session.passivate("mail/ada") is True
        assert session.branches == () and sent == []
        if not restart:
            result = await session.resolve(turn_id, {"call_bob": Approve()})
            assert result.output == "done: sent to bob"
    if restart:
        async with Session(store=path) as session:
            await session.virtual("mail", mailer)
            result = await session.resolve(str(turn_id), {"call_bob": Approve()})
            assert result.output == "done: sent to bob"
            assert session.get_branch("mail/ada").running
    assert sent == ["bob"]
    async with Session(store=path) as session:  # nothing left to resume or resolve
        await session.virtual("mail", mailer)
        with pytest.raises(pride.UnknownTurn):
            await session.resolve(turn_id, {"call_bob": Approve()})
        assert sent == ["bob"]
