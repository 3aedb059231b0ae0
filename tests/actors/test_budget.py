"""Budgets at run time (``pride.budget.accounts``): each limit ends the turn at the right
moment, with one RunFailed, a BudgetExceeded for the caller and no partial reply recorded."""

from __future__ import annotations

import json
import pickle
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import pride
from pride import (
    Act,
    ActionCall,
    AssistantResponse,
    Branch,
    Budget,
    BudgetExceeded,
    Chat,
    ChatAndRecord,
    Run,
    RunEnd,
    RunFailed,
    RunStart,
    ScriptedModel,
    Session,
    Usage,
)
from pride.llm import ScriptedReply, ToolCall, Usage as CallUsage, iModel
from pride.testing import openai_server
from tests.helpers import Recorder


def priced(text: str, *, tokens_in: int = 10, tokens_out: int = 10, cost: float | None = None):
    """A scripted reply reporting exactly this usage."""
    return ScriptedReply(
        text, usage=CallUsage(tokens_in, tokens_out, cached_tokens=0, cost_usd=cost)
    )


def terminals(recorder: Recorder) -> list[Any]:
    return [s for s in recorder.signals if isinstance(s, RunEnd | RunFailed)]


# ------------------------------------------------------------ each limit


async def test_max_model_calls_lets_exactly_that_many_through() -> None:
    """max_model_calls=3 allows three calls; the fourth is refused before it is made."""
    model = ScriptedModel(["a", "b", "c", "d"])
    async with Branch(chat_model=model) as branch:
        budget = Budget(max_model_calls=3)
        for text in "abc":
            assert await branch.chat("x", budget=budget) == text  # a fresh allowance per turn

        async def three_calls(branch: Branch) -> None:
            for _ in range(4):
                await branch.chat("again")

        branch.register_operation("four_chats", three_calls)
        model_calls_before = len(model.calls)
        with pytest.raises(BudgetExceeded) as info:
            await branch.call("four_chats", budget=Budget(max_model_calls=0))
        assert len(model.calls) == model_calls_before  # refused before the call
    assert (info.value.limit, info.value.used, info.value.allowed) == ("max_model_calls", 1, 0)


async def test_react_loop_stopped_by_max_model_calls() -> None:
    """A ReAct loop that keeps asking for rounds stops at max_model_calls with one RunFailed."""
    always_more = json.dumps(
        {
            "analysis": "more",
            "extension_needed": True,
            "reason": {"title": "t", "content": "c", "confidence_score": 0.5},
        }
    )
    model = ScriptedModel(lambda request: always_more)
    recorder = Recorder()
    async with Branch(chat_model=model, observer=recorder) as branch:
        with pytest.raises(BudgetExceeded) as info:
            await branch.ReAct("loop", max_extensions=50, budget=Budget(max_model_calls=3))
        assert len(model.calls) == 3
        history = list(branch.messages)
    assert info.value.limit == "max_model_calls" and info.value.used == 4
    ends = terminals(recorder)
    assert [type(s) for s in ends] == [RunFailed]
    assert ends[0].error_type == "BudgetExceeded" and ends[0].model_calls == 3
    # The three rounds that ran are recorded whole; the refused fourth left nothing.
    replies = [m.assistant_response for m in history if isinstance(m, AssistantResponse)]
    assert replies == [always_more] * 3


async def test_max_output_tokens_exceeded_by_a_reply_is_not_recorded() -> None:
    """A reply whose usage passes the output limit ends the turn; nothing is recorded."""
    model = ScriptedModel([priced("long answer", tokens_out=50)])
    recorder = Recorder()
    async with Branch(chat_model=model, observer=recorder) as branch:
        with pytest.raises(BudgetExceeded) as info:
            await branch.chat_and_record("q", budget=Budget(max_output_tokens=40))
        assert len(branch.messages) == 0
        assert branch.usage.output_tokens == 50  # the call was made and is counted
    assert (info.value.limit, info.value.used, info.value.allowed) == ("max_output_tokens", 50, 40)
    assert [type(s) for s in terminals(recorder)] == [RunFailed]


async def test_max_input_tokens_is_exceeded_when_used_is_greater() -> None:
    """A limit equal to the use is not exceeded; one token more is."""
    model = ScriptedModel([priced("a", tokens_in=30), priced("b", tokens_in=30)])
    async with Branch(chat_model=model) as branch:
        assert await branch.chat("q", budget=Budget(max_input_tokens=30)) == "a"
        with pytest.raises(BudgetExceeded) as info:
            await branch.chat("q", budget=Budget(max_input_tokens=29))
    assert (info.value.limit, info.value.used) == ("max_input_tokens", 30)


async def test_max_cost_usd_ends_the_turn_at_the_call_that_passes_it() -> None:
    """The call that takes the cost past the limit ends the turn; its reply is not used."""
    model = ScriptedModel([priced(str(i), cost=0.3) for i in range(5)])

    async def chats(branch: Branch) -> list[str]:
        return [await branch.chat(f"q{i}") for i in range(5)]

    recorder = Recorder()
    async with Branch(chat_model=model, observer=recorder, budget=Budget(max_cost_usd=0.5)) as b:
        b.register_operation("chats", chats)
        with pytest.raises(BudgetExceeded) as info:
            await b.call("chats")
        assert len(model.calls) == 2
        assert b.usage.cost_usd == pytest.approx(0.6)
    assert info.value.limit == "max_cost_usd" and info.value.used == pytest.approx(0.6)
    failed = recorder.of(RunFailed)[0]
    assert failed.total_cost_usd == pytest.approx(0.6) and failed.usage.model_calls == 2


async def test_max_tool_calls_refuses_the_call_past_the_limit() -> None:
    """Exactly max_tool_calls tools run; the next one is refused and the turn ends."""
    ran: list[int] = []

    def bump(n: int) -> int:
        """Record n."""
        ran.append(n)
        return n

    calls = [ToolCall("bump", {"n": n}, id=f"c{n}") for n in range(3)]
    model = ScriptedModel([calls, "done"])
    recorder = Recorder()
    async with Branch(chat_model=model, tools=[bump], observer=recorder) as branch:
        with pytest.raises(BudgetExceeded) as info:
            await pride.ask(branch, Run("go", budget=Budget(max_tool_calls=2)))
        history = list(branch.messages)
    assert len(ran) == 2 and set(ran) <= {0, 1, 2}  # concurrent: any two of the three
    assert (info.value.limit, info.value.used, info.value.allowed) == ("max_tool_calls", 3, 2)
    # Every tool call recorded has its answer: the history stays valid for providers.
    requests = [m for m in history if type(m).__name__ == "ActionRequest"]
    responses = [m for m in history if type(m).__name__ == "ActionResponse"]
    assert len(requests) == len(responses) == 3
    assert not any(
        isinstance(m, AssistantResponse) and m.assistant_response == "done" for m in history
    )
    assert recorder.of(RunFailed)[0].tool_calls == 2


async def test_max_duration_is_the_turns_cancel_scope_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A turn past max_duration is cancelled at that moment and fails with BudgetExceeded."""
    model = ScriptedModel(["slow"], delay=100.0)
    recorder = Recorder()
    async with Branch(chat_model=model, observer=recorder) as branch:
        started = trio.current_time()
        with pytest.raises(BudgetExceeded) as info:
            await branch.chat_and_record("q", budget=Budget(max_duration=5))
        assert trio.current_time() - started == pytest.approx(5.0)
        assert len(branch.messages) == 0
    assert info.value.limit == "max_duration" and info.value.allowed == 5
    assert info.value.used == pytest.approx(5.0)
    assert [type(s) for s in terminals(recorder)] == [RunFailed]
    assert not recorder.of(RunFailed)[0].cancelled


async def test_streaming_turn_is_cut_mid_stream_when_output_tokens_run_out() -> None:
    """A streamed reply stops as soon as its text runs past max_output_tokens."""
    text = "word " * 200
    model = ScriptedModel([text], chunk_size=8)
    recorder = Recorder()
    received: list[str] = []
    async with Branch(chat_model=model, observer=recorder) as branch:
        with pytest.raises(BudgetExceeded) as info:
            async with pride.stream(branch, Run("q", budget=Budget(max_output_tokens=20))) as items:
                async for item in items:
                    if isinstance(item, str):
                        received.append(item)
        history = list(branch.messages)
    assert 0 < len("".join(received)) < len(text) // 4
    assert info.value.limit == "max_output_tokens" and info.value.used > 20
    assert not any(isinstance(m, AssistantResponse) for m in history)  # no partial reply
    assert [type(s) for s in terminals(recorder)] == [RunFailed]


# ------------------------------------------------------------ where budgets apply


async def test_branch_budget_is_a_fresh_allowance_for_each_turn() -> None:
    """Branch(budget=...) applies to every turn anew; a command's budget replaces it."""
    model = ScriptedModel(lambda request: "ok")
    async with Branch(chat_model=model, budget=Budget(max_model_calls=1)) as branch:
        for _ in range(3):
            assert await branch.chat("q") == "ok"
        with pytest.raises(BudgetExceeded):
            await branch.chat("q", budget=Budget(max_model_calls=0))
        branch.budget = Budget(max_model_calls=0)
        with pytest.raises(BudgetExceeded):
            await branch.chat("q")
        assert await branch.chat("q", budget=Budget(max_model_calls=1)) == "ok"
        assert branch.usage == Usage(
            input_tokens=branch.usage.input_tokens,
            output_tokens=branch.usage.output_tokens,
            model_calls=4,
        )


async def test_session_budget_shared_by_three_branches_stops_the_third() -> None:
    """One allowance for the whole session: the third member's call is refused."""
    recorder_calls: list[Any] = []
    async with Session(budget=Budget(max_model_calls=2)) as session:
        session.observe((RunEnd, RunFailed), handler=recorder_calls.append)
        members = [
            await session.spawn(Branch(name=f"b{i}", chat_model=ScriptedModel(lambda r: "ok")))
            for i in range(3)
        ]
        assert await session.ask("b0", Chat("q")) == "ok"
        assert await session.ask("b1", Chat("q")) == "ok"
        with pytest.raises(BudgetExceeded) as info:
            await session.ask("b2", Chat("q"))
        assert session.usage.model_calls == 2
        assert [m.usage.model_calls for m in members] == [1, 1, 0]
    assert info.value.scope == f"session {session.name}"
    assert [type(s) for s in recorder_calls] == [RunEnd, RunEnd, RunFailed]


async def test_session_token_limit_stops_turns_in_flight_on_other_branches(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """When one member passes the session's token limit, the others' running turns stop too."""
    greedy = ScriptedModel([priced("big", tokens_out=500)], delay=1.0)
    slow = ScriptedModel(["never"], delay=100.0)
    outcomes: dict[str, Any] = {}
    async with Session(budget=Budget(max_output_tokens=100)) as session:
        await session.spawn(Branch(name="greedy", chat_model=greedy))
        await session.spawn(Branch(name="slow", chat_model=slow))

        async def run(name: str) -> None:
            try:
                outcomes[name] = await session.ask(name, Chat("q"))
            except BudgetExceeded as exc:
                outcomes[name] = (exc, trio.current_time())

        started = trio.current_time()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "greedy")
            nursery.start_soon(run, "slow")
    for name in ("greedy", "slow"):
        error, when = outcomes[name]
        assert isinstance(error, BudgetExceeded) and error.limit == "max_output_tokens"
        assert when - started == pytest.approx(1.0)


async def test_session_budget_covers_child_sessions() -> None:
    """A parent session's budget is shared by the members of the sessions below it."""
    async with Session(name="top", budget=Budget(max_model_calls=1)) as top:
        child = await top.spawn_session("team")
        await child.spawn(Branch(name="worker", chat_model=ScriptedModel(lambda r: "ok")))
        assert await top.ask("worker", Chat("q")) == "ok"
        with pytest.raises(BudgetExceeded) as info:
            await top.ask("worker", Chat("q"))
        assert child.usage.model_calls == 1 and top.usage.model_calls == 1
    assert info.value.scope == "session top"


async def test_session_duration_counts_from_the_session_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A session's max_duration is a deadline for every member's turn."""
    async with Session(budget=Budget(max_duration=10)) as session:
        await session.spawn(Branch(name="b", chat_model=ScriptedModel(lambda r: "ok", delay=4)))
        assert await session.ask("b", Chat("q")) == "ok"  # t = 4
        assert await session.ask("b", Chat("q")) == "ok"  # t = 8
        with pytest.raises(BudgetExceeded) as info:
            await session.ask("b", Chat("q"))  # cut at t = 10
        assert trio.current_time() == pytest.approx(10.0)
    assert info.value.limit == "max_duration"


async def test_a_nested_command_budget_bounds_only_that_command() -> None:
    """A command run inline in its branch's own turn is bounded by its own budget."""
    model = ScriptedModel(lambda request: "ok")
    seen: list[Any] = []

    async def inner(branch: Branch) -> str:
        try:
            await branch.chat("inner", budget=Budget(max_model_calls=0))
        except BudgetExceeded as exc:
            seen.append(exc)
        return str(await branch.chat("after"))  # the turn itself goes on

    async with Branch(chat_model=model) as branch:
        branch.register_operation("inner", inner)
        assert await branch.call("inner") == "ok"
        assert branch.usage.model_calls == 1
    assert seen and seen[0].scope == "command"


async def test_act_counts_tool_calls_and_honours_its_budget() -> None:
    """An Act is not a turn, but its tool calls count and its budget applies."""

    def ping() -> str:
        """Pong."""
        return "pong"

    async with Branch(chat_model=ScriptedModel(), tools=[ping]) as branch:
        await branch.act([ActionCall("ping"), ActionCall("ping")])
        assert branch.usage.tool_calls == 2
        with pytest.raises(BudgetExceeded):
            await pride.ask(
                branch,
                Act((ActionCall("ping"),), strategy="sequential", budget=Budget(max_tool_calls=0)),
            )
        assert branch.usage.tool_calls == 2


async def test_run_end_reports_tool_calls_and_usage() -> None:
    """RunEnd carries the turn's usage as a pride.Usage, tool calls included."""

    def ping() -> str:
        """Pong."""
        return "pong"

    model = ScriptedModel([ToolCall("ping", {}, id="c1"), priced("done", cost=0.25)])
    recorder = Recorder()
    async with Branch(chat_model=model, tools=[ping], observer=recorder) as branch:
        await pride.ask(branch, Run("go"))
    end = recorder.of(RunEnd)[0]
    assert end.tool_calls == 1 and end.usage.model_calls == 2
    assert end.usage.cost_usd == pytest.approx(0.25)
    assert recorder.kinds()[0] == RunStart.__name__


async def test_a_replys_usage_is_the_turns_and_the_branchs_kind_with_every_token_kind() -> None:
    """One Usage from the model to the session: a reply's usage (cache and reasoning
    tokens included) sums into RunEnd.usage, branch.usage and session.usage, each a
    pride.Usage that keeps the token details and counts the calls."""
    reply_usage = CallUsage(
        100, 20, 0.5, cached_tokens=30, cache_write_tokens=10, reasoning_tokens=5
    )
    model = ScriptedModel([ScriptedReply("one", usage=reply_usage)] * 2)
    ends: list[Any] = []
    async with Session() as session:
        session.observe(RunEnd, handler=ends.append)
        branch = await session.spawn(Branch(chat_model=model, name="b"))
        await session.ask("b", Chat("q"))
        await session.ask("b", Chat("q"))
    twice = Usage(200, 40, 1.0, 2, 0, cached_tokens=60, cache_write_tokens=20, reasoning_tokens=10)
    assert branch.usage == twice and session.usage == twice
    assert [end.usage for end in ends] == [attrs.evolve(reply_usage, model_calls=1)] * 2
    assert all(type(end.usage) is pride.llm.Usage for end in ends)


async def test_a_budget_error_reaches_the_caller_after_exactly_one_run_failed() -> None:
    """The caller gets BudgetExceeded only after the turn's single terminal signal."""
    order: list[str] = []
    recorder = Recorder(lambda signal: order.append(type(signal).__name__))
    async with Branch(chat_model=ScriptedModel(), observer=recorder) as branch:
        with pytest.raises(BudgetExceeded):
            await pride.ask(branch, ChatAndRecord("q", budget=Budget(max_model_calls=0)))
        order.append("caller")
    assert order == ["RunStart", "RunFailed", "caller"]


def test_budget_exceeded_survives_pickling() -> None:
    """The error keeps its figures across a process boundary (Ray pickles errors)."""
    error = BudgetExceeded("max_cost_usd", 0.6, 0.5, scope="session s")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.limit, copy.used, copy.allowed) == ("max_cost_usd", 0.6, 0.5)
    assert copy.scope == "session s"
    assert str(copy) == str(error) and isinstance(copy, pride.PrideError)


async def test_max_cost_usd_counts_cache_writes_at_their_own_price() -> None:
    """An Anthropic cache write costs 1.25x input, and the budget counts it so: a call
    whose prompt is all cache writes costs $3.75 per million on claude-sonnet-4, past
    a $3.50 limit that the same tokens priced as fresh input ($3.00) would not pass."""
    usage = CallUsage(input_tokens=1_000_000, cache_write_tokens=1_000_000)
    async with openai_server([ScriptedReply("x", usage=usage)]) as server:
        model = iModel(
            "anthropic/claude-sonnet-4-20250514", base_url=server.base_url, api_key="sk-ant-x"
        )
        async with Branch(chat_model=model, budget=Budget(max_cost_usd=3.5)) as branch:
            with pytest.raises(BudgetExceeded) as info:
                await branch.chat("q")
    assert info.value.used == pytest.approx(3.75)
