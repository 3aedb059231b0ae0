"""Issue 19, approvals: tool calls that wait for a person, within a process and across one
restart (the second process is `test_cli_durable`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import trio

import pride
from pride import (
    ApprovalPending,
    ApprovalRequested,
    ApprovalRequired,
    Approve,
    Branch,
    Deny,
    Operate,
    Resume,
    RunStart,
    RunSuspended,
    ScriptedModel,
    Session,
    UnknownPendingCall,
    UnknownTurn,
)
from pride.llm import ModelRequest, ToolCall


class Mailer:
    """Tools that record every call that ran, and a model that records every request."""

    def __init__(self, *replies: Any) -> None:
        self.ran: list[str] = []
        self.requests: list[ModelRequest] = []
        self._replies = list(replies)

    def model(self) -> ScriptedModel:
        def reply(request: ModelRequest) -> Any:
            self.requests.append(request)
            return self._replies.pop(0)

        return ScriptedModel(reply)

    def tools(self) -> list[pride.Tool]:
        def send_email(to: str) -> str:
            """Send an email."""
            self.ran.append(f"email {to}")
            return f"sent to {to}"

        def wire_money(amount: int) -> str:
            """Wire money."""
            self.ran.append(f"wire {amount}")
            return f"wired {amount}"

        def lookup(name: str) -> str:
            """Look someone up."""
            self.ran.append(f"lookup {name}")
            return f"{name}@example.org"

        return [
            pride.Tool(send_email, requires_approval=True),
            pride.Tool(wire_money, requires_approval=True),
            pride.Tool(lookup, idempotent=True),
        ]

    def branch(self, name: str = "mailer") -> Branch:
        return Branch(name=name, chat_model=self.model(), tools=self.tools())


EMAIL = ToolCall("send_email", {"to": "bob"}, id="call_email")
WIRE = ToolCall("wire_money", {"amount": 5}, id="call_wire")
LOOKUP = ToolCall("lookup", {"name": "bob"}, id="call_lookup")


def _tool_results(request: ModelRequest) -> list[str]:
    return [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]


@pytest.fixture(params=["memory", "store"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    """Approvals work the same with a store and without one (in memory)."""
    return tmp_path / "store.db" if request.param == "store" else None


async def test_issue19_approve_runs_the_call_and_the_turn_goes_on(store: Path | None) -> None:
    mailer = Mailer([LOOKUP, EMAIL], "emailed bob")
    signals: list[Any] = []
    async with Session(store=store) as session:
        session.observe(lambda s: True, handler=signals.append)
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await session.ask(branch, Operate("email bob", actions=True))
        stopped = info.value
        assert [(c.call_id, c.function, dict(c.arguments)) for c in stopped.pending] == [
            ("call_email", "send_email", {"to": "bob"})
        ]
        assert mailer.ran == ["lookup bob"]  # the other call of the batch ran
        assert list(branch.messages) == []  # as it was before the turn
        [suspended] = session.suspended_turns()
        assert suspended.turn_id == stopped.turn_id and suspended.branch_name == "mailer"

        result = await session.resolve(stopped.turn_id, {"call_email": Approve()})
        assert result.output == "emailed bob"
        assert mailer.ran == ["lookup bob", "email bob"]  # each once
        assert len(mailer.requests) == 2  # the first call was answered from the journal
        assert _tool_results(mailer.requests[1]) == ["bob@example.org", "sent to bob"]
        assert [m.role for m in branch.messages] == [
            "user", "action", "action", "action", "action", "assistant",
        ]  # fmt: skip
        assert session.suspended_turns() == []
    turn = [s for s in signals if getattr(s, "turn_id", None) == stopped.turn_id]
    kinds = [type(s).__name__ for s in turn if not isinstance(s, pride.MessageAdded)]
    assert kinds == [
        "RunStart", "ApprovalRequested", "RunSuspended", "RunStart", "RunEnd",
    ]  # fmt: skip
    starts = [s for s in turn if type(s) is RunStart]
    assert [s.resumed for s in starts] == [False, True]
    assert {s.command for s in starts} == {"Operate"}
    [requested] = [s for s in turn if isinstance(s, ApprovalRequested)]
    assert (requested.call_id, requested.function) == ("call_email", "send_email")
    assert requested.arguments == {"to": "bob"}
    [suspension] = [s for s in turn if isinstance(s, RunSuspended)]
    assert suspension.pending == ("call_email",) and suspension.error_type == "ApprovalRequired"
    assert session.statistics().turns_suspended == 1


async def test_issue19_deny_tells_the_model_and_never_runs_the_call(store: Path | None) -> None:
    mailer = Mailer([EMAIL], "I did not email bob")
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
        result = await session.resolve(info.value.turn_id, {"call_email": Deny("not today")})
        assert result.output == "I did not email bob"
        assert mailer.ran == []
        assert "denied: not today" in _tool_results(mailer.requests[1])[0]
        [response] = [m for m in branch.messages if isinstance(m, pride.ActionResponse)]
        assert response.error == "denied: not today"


async def test_issue19_two_pending_calls_resolved_separately(store: Path | None) -> None:
    mailer = Mailer([EMAIL, WIRE], "both done")
    requested: list[Any] = []
    async with Session(store=store) as session:
        session.observe(ApprovalRequested, handler=requested.append)
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob and wire 5", actions=True)
        turn_id = info.value.turn_id
        assert [c.call_id for c in info.value.pending] == ["call_email", "call_wire"]

        with pytest.raises(ApprovalRequired) as again:  # one decided, one still waits
            await session.resolve(turn_id, {"call_wire": Approve()})
        assert again.value.turn_id == turn_id
        assert [c.call_id for c in again.value.pending] == ["call_email"]
        assert mailer.ran == ["wire 5"]
        assert list(branch.messages) == []

        result = await session.resolve(turn_id, {"call_email": Approve()})
        assert result.output == "both done"
        assert mailer.ran == ["wire 5", "email bob"]
        assert len(mailer.requests) == 2
    assert [r.call_id for r in requested] == ["call_email", "call_wire"]  # once per call


async def test_issue19_other_work_is_refused_while_a_turn_waits(store: Path | None) -> None:
    """The conversation must stay sendable: while a turn's tool calls wait, every
    other command is refused (ApprovalPending naming the turn); resolved, the branch
    serves again."""
    mailer = Mailer([EMAIL], "emailed", "hello")
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
        for command in (pride.ChatAndRecord("hi"), pride.Chat("hi"), pride.Act(())):
            with pytest.raises(ApprovalPending) as refused:
                await session.ask(branch, command)
            assert refused.value.turn_id == info.value.turn_id
            assert [c.call_id for c in refused.value.pending] == ["call_email"]
            assert "resolve that turn first" in str(refused.value)
        assert branch.running and list(branch.messages) == []
        await session.resolve(info.value.turn_id, {"call_email": Approve()})
        assert await branch.chat_and_record("hi") == "hello"


async def test_issue19_bad_resolutions_are_typed_errors_and_change_nothing(
    store: Path | None,
) -> None:
    mailer = Mailer([EMAIL], "emailed")
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
        turn_id = info.value.turn_id
        with pytest.raises(UnknownTurn):
            await session.resolve(pride.messages._ids.new_id(), {"call_email": Approve()})
        with pytest.raises(UnknownTurn):
            await session.resolve("not a turn id", {})
        with pytest.raises(UnknownPendingCall, match="call_nope") as unknown:
            await session.resolve(turn_id, {"call_nope": Approve(), "call_email": Approve()})
        assert unknown.value.call_ids == ("call_nope",)
        with pytest.raises(UnknownTurn):  # straight to the branch, too
            await session.ask(branch, Resume(pride.messages._ids.new_id()))
        assert mailer.ran == []  # nothing changed: the turn still waits, whole
        result = await session.resolve(turn_id, {"call_email": Approve()})
        assert result.output == "emailed" and mailer.ran == ["email bob"]
        with pytest.raises(UnknownTurn):  # over now
            await session.resolve(turn_id, {"call_email": Approve()})


async def test_issue19_abandon_a_suspended_turn(store: Path | None) -> None:
    """``Resume(turn_id, abandon=reason)`` drops a waiting turn: TurnAbandoned, the
    conversation as before the turn, the branch free again."""
    mailer = Mailer([EMAIL], "hello")
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
        with pytest.raises(pride.TurnAbandoned, match="changed my mind"):
            await session.ask(branch, Resume(info.value.turn_id, abandon="changed my mind"))
        assert mailer.ran == [] and list(branch.messages) == []
        assert await branch.chat_and_record("hi") == "hello"


async def test_issue19_a_hook_can_defer_a_call_for_approval() -> None:
    """A before_tool_call hook returning Defer makes any call wait like a
    requires_approval tool; approved, it runs without being deferred again."""
    mailer = Mailer([LOOKUP], "found")
    deferred: list[str] = []
    async with Session() as session:

        @session.hooks.on("before_tool_call")
        def guard(payload: Any) -> Any:
            deferred.append(payload["call"].function)
            return pride.Defer("lookups need a person")

        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("find bob", actions=True)
        assert mailer.ran == []
        result = await session.resolve(info.value.turn_id, {"call_lookup": Approve()})
        assert result.output == "found" and mailer.ran == ["lookup bob"]
        assert deferred == ["lookup", "lookup"]  # asked again, deferring ignored once approved


async def test_issue19_a_standalone_branch_resumes_through_its_mailbox() -> None:
    mailer = Mailer([EMAIL], "emailed")
    async with mailer.branch() as branch:
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
        result = await pride.ask(branch, Resume(info.value.turn_id, {"call_email": Approve()}))
        assert result.output == "emailed" and mailer.ran == ["email bob"]


async def test_issue19_a_pending_approval_survives_closing_the_store(tmp_path: Path) -> None:
    """The turn waits in the store: a later session on it lists it and resolves it
    (the same from another process: test_cli_durable)."""
    path = tmp_path / "store.db"
    first = Mailer([EMAIL])
    async with Session(store=path) as session:
        branch = await session.spawn(first.branch())
        with pytest.raises(ApprovalRequired) as info:
            await branch.operate("email bob", actions=True)
    second = Mailer("emailed bob")  # the first model call is not made again
    async with Session(store=path) as session:
        branch = await session.spawn(second.branch())
        [waiting] = session.suspended_turns()
        assert waiting.turn_id == info.value.turn_id
        assert [c.call_id for c in waiting.pending] == ["call_email"]
        with pytest.raises(ApprovalPending):
            await branch.chat("hi")
        result = await session.resolve(waiting.turn_id, {"call_email": Approve()})
        assert result.output == "emailed bob"
        assert first.ran + second.ran == ["email bob"]
        assert len(first.requests) + len(second.requests) == 2
    async with Session(store=path) as session:
        branch = await session.spawn(Mailer().branch())
        assert session.suspended_turns() == []
        assert [m.role for m in branch.messages] == ["user", "action", "action", "assistant"]


async def test_issue19_resume_keeps_streaming(store: Path | None) -> None:
    """A Resume streams like the command it continues (a Run's messages)."""
    mailer = Mailer([EMAIL], "emailed")
    async with Session(store=store) as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired) as info:
            async with pride.stream(branch, pride.Run("email bob")) as items:
                async for _ in items:
                    pass
        seen = []
        async with pride.stream(
            branch, Resume(info.value.turn_id, {"call_email": Approve()})
        ) as items:
            async for item in items:
                seen.append(type(item).__name__)
        assert "ActionResponse" in seen and mailer.ran == ["email bob"]
        with trio.fail_after(5):
            assert branch.messages[-1].text == "emailed"


async def test_issue19_a_stream_refused_while_a_turn_waits_raises_at_once() -> None:
    """A streamed command refused before it starts (ApprovalPending, a bad Resume)
    ends its stream with the error; the consumer never hangs."""
    mailer = Mailer([EMAIL])
    async with Session() as session:
        branch = await session.spawn(mailer.branch())
        with pytest.raises(ApprovalRequired):
            await branch.operate("email bob", actions=True)
        with trio.fail_after(5):
            with pytest.raises(ApprovalPending):
                async with pride.stream(branch, pride.ChatAndRecord("hello")) as items:
                    async for _ in items:
                        pass
            with pytest.raises(UnknownTurn):
                async with pride.stream(branch, Resume(uuid4())) as items:
                    async for _ in items:
                        pass
