"""``GET /v1/turns/{turn_id}`` of a sent turn that waits for approval, however it is resolved.

The record learned a turn's outcome only from the server's own replies: a
turn the application resolved itself (``session.resolve``) stayed
``suspended`` there for good, and one whose resolve was refused (an unknown
call id) was reported ``failed`` though it still waited. The server runs in
the test's process (`conftest.in_process`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import typer.main

from pride import (
    ApprovalRequested,
    ApprovalRequired,
    Approve,
    Branch,
    RunEnd,
    ScriptedModel,
    Session,
    cli,
    tool,
)
from pride.llm import ModelRequest, ToolCall

from .conftest import TOKEN, in_process


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch at a target (needs a person's approval)."""
    return f"launched at {target}"


def _script(request: ModelRequest) -> Any:
    """Two launches, each to approve (``call-1``, then ``call-2``), then ``done``."""
    answered = sum(1 for m in request.messages if m.get("role") == "tool")
    if answered < 2:
        return ToolCall(name="launch", arguments={"target": "moon"}, id=f"call-{answered + 1}")
    return "done"


def pilot() -> Branch:
    return Branch(name="pilot", chat_model=ScriptedModel(_script), tools=[launch])


SEND = {"command": {"type": "Operate", "instruction": "launch twice", "actions": True}}


async def _state(http: httpx.AsyncClient, turn_id: str, *, leaving: str) -> dict[str, Any]:
    """The turn's record once its state is no longer ``leaving``."""
    with trio.fail_after(30):
        while True:
            record = (await http.get(f"/v1/turns/{turn_id}")).json()
            if record["state"] != leaving:
                return record
            await trio.sleep(0.01)


def _pending(record: dict[str, Any]) -> list[str]:
    return [call["call_id"] for call in record["error"]["pending"]]


@contextlib.asynccontextmanager
async def serving_pilot() -> AsyncIterator[tuple[Session, httpx.AsyncClient]]:
    """A session serving `pilot` in this process, and a client of its server."""
    async with Session("records") as session:
        await session.spawn(pilot())
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                yield session, http


async def test_a_turn_the_application_resolves_is_followed_to_its_end() -> None:
    async with serving_pilot() as (session, http):
        sent = await http.post("/v1/branches/pilot/send", json=SEND)
        assert sent.status_code == 202, sent.text
        turn_id = sent.json()["turn_id"]
        record = await _state(http, turn_id, leaving="running")
        assert record["state"] == "suspended" and _pending(record) == ["call-1"]

        # The application resolves the first call: the turn reaches the second.
        with pytest.raises(ApprovalRequired):
            await session.resolve(record["error"]["turn_id"], {"call-1": Approve()})
        record = await _state(http, turn_id, leaving="running")
        assert record["state"] == "suspended", record
        assert _pending(record) == ["call-2"], "the record still showed call-1"

        # ... and the second: the turn ends, its result given to the resolver.
        waiting = session.suspended_turns()[0]
        result = await session.resolve(waiting.turn_id, {"call-2": Approve()})
        assert result is not None
        record = await _state(http, turn_id, leaving="suspended")
        assert record["state"] == "done", "a turn resolved elsewhere stayed suspended"
        assert record["result"] is None and "resolved outside this server" in record["note"]
        # The note names real ways to resolve a turn (it named a `pride approve` there is not).
        named = set(re.findall(r"\bpride ([a-z]+)", record["note"]))
        assert named <= set(typer.main.get_command(cli.app).commands), record["note"]


async def test_a_refused_resolve_leaves_the_turn_waiting_and_a_good_one_ends_it() -> None:
    async with serving_pilot() as (_, http):
        sent = await http.post("/v1/branches/pilot/send", json=SEND)
        turn_id = sent.json()["turn_id"]
        await _state(http, turn_id, leaving="running")
        wrong = {"decisions": {"call-9": {"type": "Approve"}}}
        refused = await http.post(f"/v1/turns/{turn_id}/resolve", json=wrong)
        assert refused.status_code >= 400, refused.text
        record = (await http.get(f"/v1/turns/{turn_id}")).json()
        assert record["state"] == "suspended", "a refused resolve marked it failed"
        assert _pending(record) == ["call-1"]

        for call in ("call-1", "call-2"):
            decision = {"decisions": {call: {"type": "Approve"}}}
            await http.post(f"/v1/turns/{turn_id}/resolve", json=decision)
        record = (await http.get(f"/v1/turns/{turn_id}")).json()
        assert record["state"] == "done" and "note" not in record, record
        assert record["result"] is not None


async def test_a_turn_an_approver_resolves_at_once_is_not_left_suspended() -> None:
    """An approver acting on ``ApprovalRequested`` at once can resume the turn before
    the server has recorded it as suspended: the record said ``suspended`` for good."""
    async with serving_pilot() as (session, http), trio.open_nursery() as approvals:
        ended = trio.Event()

        def approve(signal: Any) -> None:
            decision = {signal.call_id: Approve()}
            approvals.start_soon(_quietly, session.resolve(signal.turn_id, decision))

        session.observe(ApprovalRequested, handler=approve)
        session.observe(RunEnd, handler=lambda _: ended.set())
        sent = await http.post("/v1/branches/pilot/send", json=SEND)
        turn_id = sent.json()["turn_id"]
        with trio.fail_after(30):
            await ended.wait()
        record = await _state(http, turn_id, leaving="running")
        assert record["state"] == "done", record


async def _quietly(resolving: Any) -> None:
    with contextlib.suppress(ApprovalRequired):  # the first approval reaches the second call
        await resolving
