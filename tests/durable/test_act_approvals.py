"""Issue 19: an ``Act`` runs tools directly, bypassing the model, but never a person's approval.

A tool that ``requires_approval`` called by an ``Act`` served on its own (from
the mailbox, or a ``pride run`` request line) is refused: it does not run, and
its ActionResponse says why; the other calls of the Act run. Inside a turn
(an operation's nested ``act``) the call waits for approval like a model's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import pride
from pride import Act, ActionCall, ApprovalRequired, Approve, Session, ToolError
from tests.durable.support import pride_run, records
from tests.durable.test_approvals import Mailer

EMAIL = ActionCall("send_email", {"to": "bob"})
LOOKUP = ActionCall("lookup", {"name": "bob"})


@pytest.fixture(params=["memory", "store"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "store.db" if request.param == "store" else None


async def test_issue19_an_act_never_runs_a_tool_that_requires_approval(
    store: Path | None,
) -> None:
    mailer = Mailer()
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        responses = await session.ask(branch, Act([LOOKUP, EMAIL]))
        assert mailer.ran == ["lookup bob"]  # the other call ran; the email did not
        looked_up, refused = responses
        assert looked_up.output == "bob@example.org" and looked_up.error is None
        assert refused.output is None
        assert refused.error.startswith("denied: ")
        assert "send_email requires approval" in refused.error
        # The conversation stays sendable: the refused call has its answer.
        assert [m.role for m in branch.messages] == ["action"] * 4
        assert session.suspended_turns() == []  # nothing waits: it was refused

        with pytest.raises(ToolError, match="send_email"):
            await session.ask(branch, Act([EMAIL], suppress_errors=False))
        assert mailer.ran == ["lookup bob"]
        # The branch goes on serving.
        [again] = await session.ask(branch, Act([LOOKUP]))
        assert again.error is None and mailer.ran == ["lookup bob", "lookup bob"]


async def test_issue19_an_act_a_hook_defers_is_refused_too() -> None:
    mailer = Mailer()
    async with Session() as session:
        session.hooks.on("before_tool_call", lambda payload: pride.Defer("a person decides"))
        branch = await session.spawn(mailer.branch())
        [response] = await session.ask(branch, Act([LOOKUP]))
        assert mailer.ran == [] and response.error == "denied: a person decides"


async def test_issue19_an_act_inside_a_turn_waits_for_approval_like_a_models_call() -> None:
    """An operation's own ``act`` of an approval tool suspends its turn."""
    mailer = Mailer()

    async def send_now(branch: pride.Branch, **_: Any) -> Any:
        return await branch.act([EMAIL])

    async with Session() as session:
        session.register_operation("send_now", send_now)
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await session.ask(branch, pride.Call("send_now"))
        assert mailer.ran == []
        [pending] = info.value.pending
        assert pending.function == "send_email"
        [response] = await session.resolve(info.value.turn_id, {pending.call_id: Approve()})
        assert response.output == "sent to bob" and mailer.ran == ["email bob"]


async def test_issue19_an_act_request_line_cannot_bypass_approval(tmp_path: Path) -> None:
    """``pride run``: a hostile request line naming an approval tool directly."""
    act = {
        "type": "Act",
        "action_requests": [
            {"function": "send_email", "arguments": {"to": "eve"}},
            {"function": "lookup", "arguments": {"name": "eve"}},
        ],
    }
    status, answers = await pride_run(
        tmp_path,
        1,
        [json.dumps({"id": "a1", "to": "mailer", "command": act})],
        app="tests.durable.mailer_app:build",
    )
    assert status == 0, (tmp_path / "stderr-1.log").read_text()
    [answer] = answers
    assert answer["id"] == "a1" and answer["ok"] is True
    email, lookup = answer["result"]
    assert "send_email requires approval" in email["error"]
    assert lookup["output"] == "eve@example.org"
    assert records(tmp_path, "tools.jsonl") == [{"tool": "lookup", "arguments": {"name": "eve"}}]
