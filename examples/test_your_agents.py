"""Testing your own agents: the tests docs/testing.md walks through, runnable as they are.

``pytest examples/test_your_agents.py`` (``make test`` collects them). They need
pytest and pytest-trio, with ``trio_mode = true`` in the pytest configuration
(pride's pyproject.toml has it), and nothing else: no API key, no network.
Each test drives real pride parts: a ScriptedModel whose replies are a
function of the request it is sent, pride.testing's loopback HTTP server for
provider faults, a real SQLite store across a restart, and trio's MockClock
for time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import pride
from pride import (
    ApprovalRequested,
    ApprovalRequired,
    Approve,
    Branch,
    BranchRestarted,
    ChatAndRecord,
    Escalate,
    MessageAdded,
    Operate,
    RunEnd,
    RunFailed,
    ScriptedModel,
    Session,
    Signal,
)
from pride.llm import ModelRequest, RetryPolicy, ScriptedReply, ToolCall, iModel
from pride.testing import Fault, openai_server

# ------------------------------------------------------------------ a tool


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def calculator(request: ModelRequest) -> ScriptedReply:
    """A stand-in model: asks for the tool, then answers with what the tool said."""
    results = [m["content"] for m in request.messages if m["role"] == "tool"]
    if not results:
        return ScriptedReply(tool_calls=(ToolCall("add", {"a": 2, "b": 3}, id="call_1"),))
    return ScriptedReply(f"2 + 3 = {results[-1]}")


async def test_a_branch_calls_its_tool_and_answers_with_the_result() -> None:
    """The model asks for ``add``, pride runs it inside the turn, the model answers."""
    model = ScriptedModel(calculator)
    async with Branch(chat_model=model, tools=[add]) as branch:
        result = await branch.operate("What is 2 + 3?", actions=True)

    assert result.output == "2 + 3 = 5"
    [response] = result.action_responses
    assert (response.function, response.output) == ("add", 5)
    # What the model was sent: the tool's schema first, then the tool's result.
    first, second = model.calls
    assert [tool["name"] for tool in first.tools] == ["add"]
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}
    # What the branch recorded, in order (the tool call is the ActionRequest).
    kinds = [type(message).__name__ for message in branch.messages]
    assert kinds == ["Instruction", "ActionRequest", "ActionResponse", "AssistantResponse"]


# ------------------------------------------------------------ a supervisor tree


class FlakyCritic:
    """A model whose first reply says the branch's state is not to be trusted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ModelRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            raise Escalate("lost my notes")
        return "looks sound"


async def test_a_crashed_member_is_restarted_with_its_conversation() -> None:
    """One member escalates; the supervisor restarts it and its sibling; both keep going."""
    seen: list[Signal] = []
    async with Session(name="team") as team:
        team.observe(BranchRestarted, MessageAdded, handler=seen.append)
        desk = await team.spawn_session("desk", strategy="one_for_all")
        writer = await desk.spawn(Branch(name="writer", chat_model=ScriptedModel(["a draft"])))
        await desk.spawn(Branch(name="critic", chat_model=ScriptedModel(FlakyCritic())))

        assert await team.ask("writer", ChatAndRecord("write")) == "a draft"
        with pytest.raises(Escalate, match="lost my notes"):  # the caller gets the crash
            await team.ask("critic", ChatAndRecord("review"))
        assert await team.ask("critic", ChatAndRecord("review")) == "looks sound"

    restarted = sorted(s.branch_name for s in seen if isinstance(s, BranchRestarted))
    assert restarted == ["critic", "writer"]  # one_for_all: the sibling restarts too
    assert [m.text for m in writer.messages] == ["write", "a draft"]  # kept across the restart
    recorded = [s.branch_name for s in seen if isinstance(s, MessageAdded)]
    assert recorded == ["writer", "writer", "critic", "critic"]


# -------------------------------------------------------- a provider fault, retried


async def test_a_rate_limited_call_is_retried_over_http() -> None:
    """A real HTTP 429 from the loopback server is retried; the turn sees one answer."""
    ends: list[RunEnd] = []
    async with openai_server([Fault.status(429, retry_after=0), "hello"]) as server:
        model = iModel(
            "openai/test-model",
            base_url=server.base_url,
            api_key="test-key",
            retry=RetryPolicy(base_delay=0.01),
        )
        async with Session() as session:
            session.observe(RunEnd, handler=ends.append)
            await session.spawn(Branch(name="agent", chat_model=model))
            assert await session.ask("agent", ChatAndRecord("hi")) == "hello"

    assert server.request_count == 2  # the 429, then the retry
    retried = server.requests[-1]  # what went over the wire, as the provider would see it
    assert retried.headers["authorization"] == "Bearer test-key"
    assert retried.body["messages"][-1] == {"role": "user", "content": "hi"}
    [end] = ends
    assert end.model_calls == 1  # a retry is part of one model call


async def test_a_slow_model_times_out_in_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With trio's MockClock a minute-long reply costs no real time; the timeout fails the turn."""
    failed: list[RunFailed] = []
    async with Session() as session:
        session.observe(RunFailed, handler=failed.append)
        await session.spawn(Branch(name="slow", chat_model=ScriptedModel(["late"], delay=60)))
        started = trio.current_time()
        with pytest.raises(trio.TooSlowError):
            await session.ask("slow", ChatAndRecord("hurry"), timeout=10)
        assert trio.current_time() - started == pytest.approx(10)

    [failure] = failed
    assert failure.cancelled


# ------------------------------------------------------ a durable turn, restarted

sent: list[str] = []


def send_email(to: str) -> str:
    """Send an email.

    Args:
        to: Who gets it.
    """
    sent.append(to)
    return f"sent to {to}"


def mailer_model(request: ModelRequest) -> ScriptedReply:
    last = request.messages[-1]
    if last["role"] == "tool":
        return ScriptedReply(f"Done: {last['content']}")
    return ScriptedReply(tool_calls=(ToolCall("send_email", {"to": "bob"}, id="call_bob"),))


def mailer(model: ScriptedModel) -> Branch:
    """The agent as the application builds it, in every process."""
    tool = pride.Tool(send_email, requires_approval=True)
    return Branch(name="mailer", chat_model=model, tools=[tool])


async def test_a_turn_waiting_for_approval_continues_after_a_restart(tmp_path: Path) -> None:
    """The turn stops before a tool that needs approval; a new session on the same store
    finds it, a person approves, and it finishes: the tool runs once, no model call twice."""
    store = tmp_path / "team.db"
    sent.clear()
    requested: list[ApprovalRequested] = []
    first_model = ScriptedModel(mailer_model)
    async with Session(store=store) as session:
        session.observe(ApprovalRequested, handler=requested.append)
        await session.spawn(mailer(first_model))
        with pytest.raises(ApprovalRequired) as stopped:
            await session.ask("mailer", Operate("Email bob", actions=True))
    assert [r.function for r in requested] == ["send_email"]
    assert sent == []  # nothing ran before the approval

    second_model = ScriptedModel(mailer_model)  # the "new process"
    async with Session(store=store) as session:
        await session.spawn(mailer(second_model))
        [waiting] = session.suspended_turns()
        assert waiting.turn_id == stopped.value.turn_id
        result = await session.resolve(waiting.turn_id, {"call_bob": Approve()})

    assert result.output == "Done: sent to bob"
    assert sent == ["bob"]
    assert (first_model.received, second_model.received) == (1, 1)  # the plan is not asked twice
