"""Tests for ``pride.telemetry``: the span tree of turns, model calls and tool calls."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

import pride
import pride.telemetry
import pride.testing
from pride import (
    Act,
    ActionCall,
    Branch,
    Budget,
    BudgetExceeded,
    Chat,
    RateLimited,
    Run,
    ScriptedModel,
    Session,
)
from pride.llm import RetryPolicy, ScriptedReply, ToolCall, Usage as CallUsage
from pride.messages.codec import parse_json
from tests.telemetry.conftest import Spans


def search(query: str) -> str:
    """Search the archive."""
    return f"three papers on {query}"


async def test_span_tree_of_a_supervisor_tree_turn(spans: Spans) -> None:
    """Planner asks researcher (in a child session), who calls a tool: one nested tree."""
    researcher_model = ScriptedModel(
        [ToolCall("search", {"query": "trio"}, id="r1"), "trio is structured concurrency"]
    )
    planner_model = ScriptedModel(
        [ToolCall("ask_researcher", {"question": "what is trio?"}, id="p1"), "plan: use trio"]
    )

    async def ask_researcher(question: str) -> str:
        """Ask the researcher."""
        items = await pride.ask("researcher", Run(question))
        return str(items[-1].assistant_response)

    async with Session(name="org") as org:
        team = await org.spawn_session("research")
        researcher = await team.spawn(
            Branch(name="researcher", chat_model=researcher_model, tools=[search])
        )
        planner = await org.spawn(
            Branch(name="planner", chat_model=planner_model, tools=[ask_researcher])
        )
        reply = await org.send("planner", Run("make a plan"))
        await reply.result()

    root = spans.one("invoke_agent planner")
    assert spans.tree(root) == [
        "invoke_agent planner",
        "  chat scripted",
        "  execute_tool ask_researcher",
        "    invoke_agent researcher",
        "      chat scripted",
        "      execute_tool search",
        "      chat scripted",
        "  chat scripted",
    ]
    assert root.parent is None and root.kind is SpanKind.INTERNAL
    assert root.attributes is not None
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "planner"
    assert root.attributes["gen_ai.conversation.id"] == str(planner.id)
    assert root.attributes["pride.turn_id"] == str(reply.turn_id)
    assert root.attributes["pride.command"] == "Run"
    assert root.attributes["pride.outcome"] == "completed"
    assert root.attributes["pride.usage.model_calls"] == 2
    assert root.attributes["pride.usage.tool_calls"] == 1

    inner = spans.one("invoke_agent researcher")
    assert inner.attributes is not None
    assert inner.attributes["gen_ai.conversation.id"] == str(researcher.id)
    assert inner.attributes["pride.turn_id"] != root.attributes["pride.turn_id"]
    assert {span.context.trace_id for span in spans.all} == {root.context.trace_id}

    for chat in spans.named("chat scripted"):
        assert chat.kind is SpanKind.CLIENT and chat.attributes is not None
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        owner = spans.parent_of(chat)
        assert owner is not None and owner.name.startswith("invoke_agent")
        assert chat.attributes["pride.turn_id"] == owner.attributes["pride.turn_id"]  # type: ignore[index]
    finishes = [
        span.attributes["gen_ai.response.finish_reasons"] for span in spans.named("chat scripted")
    ]  # type: ignore[index]
    assert ("tool_calls",) in finishes and ("stop",) in finishes

    tool = spans.one("execute_tool search")
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.name"] == "search"
    assert tool.attributes["gen_ai.tool.call.id"] == "r1"
    assert tool.attributes["gen_ai.tool.description"] == "Search the archive."
    assert tool.attributes["gen_ai.conversation.id"] == str(researcher.id)
    assert "gen_ai.tool.call.arguments" not in tool.attributes  # content only when asked


async def test_no_span_leaks_between_100_concurrent_turns(
    spans: Spans, autojump_clock: trio.testing.MockClock
) -> None:
    """100 turns running at once: each turn's calls are children of that turn only."""

    async with Session() as session:
        branches = [
            await session.spawn(
                Branch(
                    name=f"b{i}",
                    tools=[search],
                    chat_model=ScriptedModel(
                        [ToolCall("search", {"query": f"q{i}"}, id=f"c{i}"), f"done {i}"],
                        delay=1.0,
                    ),
                )
            )
            for i in range(100)
        ]
        replies = [await pride.send(branch, Run("go")) for branch in branches]
        for reply in replies:
            await reply.result()

    turns = [span for span in spans.all if span.name.startswith("invoke_agent")]
    assert len(turns) == 100
    assert len({span.context.trace_id for span in turns}) == 100  # each its own trace
    by_turn = {span.attributes["pride.turn_id"]: span for span in turns}  # type: ignore[index]
    assert set(by_turn) == {str(reply.turn_id) for reply in replies}
    for span in spans.all:
        if span.name.startswith("invoke_agent"):
            continue
        owner = by_turn[span.attributes["pride.turn_id"]]  # type: ignore[index]
        assert spans.parent_of(span) is owner, f"{span.name} leaked out of its turn"
        assert span.context.trace_id == owner.context.trace_id
    assert all(len(spans.children(turn)) == 3 for turn in turns)


async def test_a_cancelled_turns_span_ends_with_an_error_status(
    spans: Spans, autojump_clock: trio.testing.MockClock
) -> None:
    """A turn cancelled by its caller: its span (and its model call's) end, status ERROR."""
    async with Branch(name="slow", chat_model=ScriptedModel(["late"], delay=60.0)) as branch:
        with pytest.raises(trio.TooSlowError):
            await pride.ask(branch, Chat("q"), timeout=5)
    turn = spans.one("invoke_agent slow")
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes is not None
    assert turn.attributes["pride.outcome"] == "cancelled"
    assert turn.attributes["error.type"] == "TurnCancelled"
    assert turn.end_time is not None
    chat = spans.one("chat scripted")
    assert chat.status.status_code is StatusCode.ERROR and spans.parent_of(chat) is turn


async def test_a_turn_stopped_by_its_budget_says_so_on_its_span(spans: Spans) -> None:
    """BudgetExceeded is the turn span's error, with the usage so far."""
    async with Branch(name="b", chat_model=ScriptedModel(lambda r: "x")) as branch:
        with pytest.raises(BudgetExceeded):
            await branch.chat("q", budget=Budget(max_model_calls=0))
    turn = spans.one("invoke_agent b")
    assert turn.status.status_code is StatusCode.ERROR
    assert turn.attributes is not None
    assert turn.attributes["error.type"] == "BudgetExceeded"
    assert turn.attributes["pride.outcome"] == "failed"
    assert not spans.named("chat scripted")  # the refused call was never made


async def test_message_content_is_recorded_only_when_asked(spans: Spans) -> None:
    """With capture_content the prompt, reply and tool arguments and results are on the spans."""
    model = ScriptedModel([ToolCall("search", {"query": "otel"}, id="c1"), "summary", "again"])
    async with Branch(name="b", chat_model=model, tools=[search], system="be brief") as branch:
        await pride.ask(branch, Run("find it"))
        assert all("gen_ai.input.messages" not in (s.attributes or {}) for s in spans.all)
        pride.telemetry.instrument(spans_provider(spans), capture_content=True)
        await pride.ask(branch, Run("again", tools=False))
    chat = spans.named("chat scripted")[-1]
    assert chat.attributes is not None
    sent = json.loads(str(chat.attributes["gen_ai.input.messages"]))
    assert sent[-1] == {"role": "user", "parts": [{"type": "text", "content": "again"}]}
    assert any(part.get("type") == "tool_call_response" for m in sent for part in m["parts"])
    replied = json.loads(str(chat.attributes["gen_ai.output.messages"]))
    assert replied[0]["parts"][0]["type"] == "text"


def spans_provider(spans: Spans) -> TracerProvider:
    """A provider exporting to the same in-memory exporter as the fixture's."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans.exporter))
    return provider


async def test_tool_content_is_recorded_when_asked(spans: Spans) -> None:
    """Tool arguments and results are recorded under capture_content."""
    pride.telemetry.instrument(spans_provider(spans), capture_content=True)
    model = ScriptedModel([ToolCall("search", {"query": "otel"}, id="c1"), "summary"])
    async with Branch(name="b", chat_model=model, tools=[search]) as branch:
        await pride.ask(branch, Run("find it"))
    tool = spans.one("execute_tool search")
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"query": "otel"}
    assert json.loads(str(tool.attributes["gen_ai.tool.call.result"])) == "three papers on otel"


async def test_the_envelope_carries_the_senders_trace_context(spans: Spans) -> None:
    """A send made inside a span puts its traceparent in the envelope; the turn is its child."""
    tracer = spans_provider(spans).get_tracer("app")
    async with Branch(name="b", chat_model=ScriptedModel(lambda r: "x")) as branch:
        with tracer.start_as_current_span("request") as request:
            reply = await pride.send(branch, Chat("q"))
            await reply.result()
        assert reply.trace is not None and "traceparent" in reply.trace
        trace_id = format(request.get_span_context().trace_id, "032x")
        assert reply.trace["traceparent"].split("-")[1] == trace_id
        # An envelope from another process: only its carrier crosses, and it is enough.
        foreign = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        outside = pride.Reply(branch, Chat("from afar"))
        outside.trace = {"traceparent": foreign}
        await branch.deliver(outside)
        await outside.result()
    turn = spans.named("invoke_agent b")[0]
    assert spans.parent_of(turn) is spans.one("request")
    far = spans.named("invoke_agent b")[1]
    assert format(far.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert far.parent is not None and format(far.parent.span_id, "016x") == "00f067aa0ba902b7"


async def test_an_actor_spawned_inside_a_span_does_not_parent_later_turns(spans: Spans) -> None:
    """The actor loop inherits its spawner's context; its turns still take the envelope's."""
    tracer = spans_provider(spans).get_tracer("app")
    async with Session() as session:
        with tracer.start_as_current_span("startup"):
            await session.spawn(Branch(name="b", chat_model=ScriptedModel(lambda r: "x")))
        await session.ask("b", Chat("q"))  # sent from outside any span
    turn = spans.one("invoke_agent b")
    assert turn.parent is None
    assert turn.context.trace_id != spans.one("startup").context.trace_id


async def test_an_act_traces_its_tool_calls_under_the_sender(spans: Spans) -> None:
    """An Act has no span of its own; its tool spans are children of the sender's span."""
    tracer = spans_provider(spans).get_tracer("app")
    async with Branch(name="b", chat_model=ScriptedModel(), tools=[search]) as branch:
        with tracer.start_as_current_span("request"):
            await pride.ask(branch, Act((ActionCall("search", {"query": "x"}),)))
    tool = spans.one("execute_tool search")
    assert spans.parent_of(tool) is spans.one("request")
    assert not [s for s in spans.all if s.name.startswith("invoke_agent")]


async def test_retries_are_events_of_the_model_call_span(
    spans: Spans, autojump_clock: trio.testing.MockClock
) -> None:
    """A retried call is one chat span with a pride.retry event per retry."""
    model = ScriptedModel(
        [RateLimited("slow down", status=429), "ok"],
        retry=RetryPolicy(max_retries=2, base_delay=1.0, jitter=0),
    )
    async with Branch(name="b", chat_model=model) as branch:
        assert await branch.chat("q") == "ok"
    chat = spans.one("chat scripted")
    assert [event.name for event in chat.events] == ["pride.retry"]
    event = chat.events[0].attributes
    assert event is not None
    assert event["http.response.status_code"] == 429 and event["pride.retry.number"] == 1
    assert event["error.type"] == "RateLimited" and event["pride.retry.delay_s"] == 1.0


async def test_usage_and_cost_are_on_the_spans(spans: Spans) -> None:
    """Token usage, cached tokens and cost reach the chat span and the turn's totals."""
    reply = ScriptedReply("x", usage=CallUsage(100, 20, cached_tokens=40, cost_usd=0.5))
    async with Branch(name="b", chat_model=ScriptedModel([reply])) as branch:
        await branch.chat("q", request_options={"temperature": 0.2, "max_tokens": 64})
    chat = spans.one("chat scripted").attributes
    assert chat is not None
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (100, 20)
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 40
    assert chat["pride.usage.cost_usd"] == 0.5
    assert chat["gen_ai.request.temperature"] == 0.2 and chat["gen_ai.request.max_tokens"] == 64
    turn = spans.one("invoke_agent b").attributes
    assert turn is not None and turn["pride.usage.cost_usd"] == 0.5
    assert "gen_ai.usage.cache_creation.input_tokens" not in chat  # none: not said
    assert "gen_ai.usage.reasoning.output_tokens" not in chat


async def test_cache_writes_and_reasoning_tokens_are_on_the_chat_span(spans: Spans) -> None:
    """Cache writes and reasoning tokens go under the GenAI conventions' own names."""
    usage = CallUsage(
        100, 20, cached_tokens=40, cost_usd=None, cache_write_tokens=30, reasoning_tokens=12
    )
    async with Branch(name="b", chat_model=ScriptedModel([ScriptedReply("x", usage=usage)])) as b:
        await b.chat("q")
    chat = spans.one("chat scripted").attributes
    assert chat is not None
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 40
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 30
    assert chat["gen_ai.usage.reasoning.output_tokens"] == 12
    assert chat["gen_ai.usage.output_tokens"] == 20  # reasoning is part of the output


async def test_a_failing_tracer_never_breaks_a_turn(
    spans: Spans, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception inside the tracer is logged; the turn goes on untraced."""
    tracer = pride.telemetry.instrumented()
    assert tracer is not None

    def broken() -> Any:
        raise RuntimeError("exporter on fire")

    monkeypatch.setattr(tracer, "_active", broken)
    async with Branch(name="b", chat_model=ScriptedModel(lambda r: "fine")) as branch:
        assert await branch.chat("q") == "fine"
    assert "exporter on fire" in caplog.text
    assert not spans.all


async def test_without_a_configured_provider_nothing_is_traced() -> None:
    """Instrumented but with no SDK provider set, turns run untraced and envelopes carry nothing."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    pride.telemetry.instrument()
    try:
        async with Branch(name="b", chat_model=ScriptedModel(lambda r: "x")) as branch:
            reply = await pride.send(branch, Chat("q"))
            assert await reply.result() == "x"
            assert reply.trace is None
    finally:
        pride.telemetry.uninstrument()
    assert pride.telemetry.instrumented() is None


async def test_without_a_provider_an_envelope_still_carries_a_propagated_span() -> None:
    """With no SDK, OpenTelemetry still propagates a trace context an application
    extracted (a non-recording span): the envelope carries it on; baggage alone
    (no span) is not a trace context and the envelope carries nothing."""
    from opentelemetry import baggage, context as otel_context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    remote = SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    pride.telemetry.instrument()
    try:
        async with Branch(name="b", chat_model=ScriptedModel(lambda r: "x")) as branch:
            token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(remote)))
            try:
                reply = await pride.send(branch, Chat("q"))
            finally:
                otel_context.detach(token)
            assert await reply.result() == "x"
            assert reply.trace is not None
            assert reply.trace["traceparent"] == (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            )
            token = otel_context.attach(baggage.set_baggage("tenant", "t1"))
            try:
                reply = await pride.send(branch, Chat("q"))
            finally:
                otel_context.detach(token)
            assert await reply.result() == "x"
            assert reply.trace is None
    finally:
        pride.telemetry.uninstrument()


def test_a_global_provider_set_after_instrument_is_found_once_a_second() -> None:
    """instrument() before the application sets its global provider: turns until
    then are untraced and do not look the provider up each time; the first turn
    a second after the last look records, and so does every turn after it.
    (A subprocess: OpenTelemetry's global provider can be set once per process.)"""
    code = (
        "import trio, pride, pride.telemetry\n"
        "import pride.telemetry._tracer as tracing\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import"
        " InMemorySpanExporter\n"
        "now = [100.0]\n"
        "tracing._clock = lambda: now[0]\n"
        "looks = []\n"
        "real = trace.get_tracer_provider\n"
        "def counted():\n"
        "    looks.append(now[0])\n"
        "    return real()\n"
        "tracing.trace.get_tracer_provider = counted\n"
        "pride.telemetry.instrument()\n"
        "exporter = InMemorySpanExporter()\n"
        "async def main():\n"
        "    async with pride.Branch(name='b', chat_model=pride.ScriptedModel()) as b:\n"
        "        for _ in range(3):\n"
        "            await b.chat('untraced, no provider')\n"
        "        provider = TracerProvider()\n"
        "        provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "        trace.set_tracer_provider(provider)\n"
        "        await b.chat('within the second: still untraced')\n"
        "        now[0] += 1.0\n"
        "        await b.chat('traced')\n"
        "        await b.chat('traced')\n"
        "trio.run(main)\n"
        "names = [span.name for span in exporter.get_finished_spans()]\n"
        "assert looks == [100.0, 101.0], looks\n"
        "assert names.count('invoke_agent b') == 2, names\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_import_pride_imports_no_opentelemetry() -> None:
    """``import pride`` (and running a turn) never imports OpenTelemetry."""
    code = (
        "import sys, trio, pride\n"
        "async def main():\n"
        "    async with pride.Branch(chat_model=pride.ScriptedModel()) as b:\n"
        "        await b.chat('hi')\n"
        "trio.run(main)\n"
        "leaked = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not leaked, leaked\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def spread() -> list[float]:
    """Figures a numeric tool may well return."""
    return [math.nan, math.inf, 1.5]


async def test_issue36_recorded_content_is_strict_json(spans: Spans) -> None:
    """A tool's NaN is null in the recorded result: every content attribute is strict JSON."""
    pride.telemetry.instrument(spans_provider(spans), capture_content=True)
    model = ScriptedModel([ToolCall("spread", {}, id="c1"), "summary"])
    async with Branch(name="b", chat_model=model, tools=[spread]) as branch:
        await pride.ask(branch, Run("figures"))
    tool = spans.one("execute_tool spread")
    assert tool.attributes is not None
    assert parse_json(str(tool.attributes["gen_ai.tool.call.result"])) == [None, None, 1.5]
    for span in spans.all:
        for name, value in (span.attributes or {}).items():
            if name.startswith("gen_ai.") and isinstance(value, str) and value[:1] in "[{":
                parse_json(value)


def lookup(query: str) -> str:
    """Look the query up (a tool whose error says what it was given, as many do)."""
    raise LookupError(f"nothing found for {query!r}")


def _hostile_reply(function: str, arguments: str) -> dict[str, Any]:
    """A chat completion whose every free-text field is 100,000 characters long."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m" * 100_000,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c" * 100_000,
                            "type": "function",
                            "function": {"name": function, "arguments": arguments},
                        }
                    ],
                },
                "finish_reason": "f" * 100_000,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


async def test_values_from_a_provider_are_bounded_on_the_spans(spans: Spans) -> None:
    """Every byte a provider sends is hostile, and spans go to a collector: a model
    name, a finish reason and a tool call's id the reply made 100,000 characters long
    were put on the spans whole (content capture off), and a tool's error quoting its
    100,000-character argument was put whole in the span's status and in its exception
    event, three times over. Each is now cut (`pride.telemetry.VALUE_LIMIT` for a name
    or an id, `pride.telemetry.ERROR_LIMIT` for an error's text)."""
    arguments = json.dumps({"query": "q" * 100_000})
    script = [
        pride.testing.Fault.raw(_hostile_reply("lookup", arguments)),
        pride.testing.Fault.raw(_hostile_reply("missing", "{}")),
        "done",
    ]
    async with pride.testing.openai_server(script) as server:
        model = pride.iModel("openai/m", base_url=server.base_url, api_key="k")
        async with Branch(name="b", chat_model=model, tools=[lookup]) as branch:
            await pride.ask(branch, Run("find it"))
    bound = pride.telemetry.CONTENT_LIMIT + 100  # a cut text says how much it left out
    tool = spans.one("execute_tool lookup")
    assert tool.status.status_code is StatusCode.ERROR
    assert "nothing found for 'qqq" in str(tool.status.description)
    assert len(str(tool.status.description)) < pride.telemetry.ERROR_LIMIT + 100
    short = pride.telemetry.VALUE_LIMIT + 100
    assert len(str((tool.attributes or {})["gen_ai.tool.call.id"])) < short
    chat = dict(spans.named("chat m")[0].attributes or {})
    assert len(str(chat["gen_ai.response.model"])) < short
    assert all(len(reason) < short for reason in chat["gen_ai.response.finish_reasons"])
    for span in spans.all:
        assert len(span.name) < 300
        assert len(span.status.description or "") < bound, span.name
        for name, value in (span.attributes or {}).items():
            assert len(str(value)) < bound, f"{span.name}: {name}"
        for event in span.events:
            for name, value in (event.attributes or {}).items():
                assert len(str(value)) < bound, f"{span.name}: {event.name} {name}"
            if event.name == "exception":
                message = str((event.attributes or {})["exception.message"])
                assert len(message) < pride.telemetry.ERROR_LIMIT + 100


@pride.tool(requires_approval=True)
def wipe(path: str) -> str:
    """Wipe the path (only once a person approved)."""
    return f"wiped {path}"


async def test_a_turn_suspended_for_approval_is_not_a_failure_and_its_resumption_links_it(
    spans: Spans,
) -> None:
    """A turn that stops for a person's approval waits; it has not failed. Its span ended
    with pride.outcome "failed", an ERROR status and an ApprovalRequired exception event,
    so every approval counted in a collector's error rate; and the continued turn (the
    same turn id) began a new trace with nothing leading back to it. Now the span says
    "suspended" (status unset, no exception), and the continued turn's span links it."""
    model = ScriptedModel([ToolCall("wipe", {"path": "/tmp/x"}, id="c1"), "done"])
    async with Session() as session:
        await session.spawn(Branch(name="a", chat_model=model, tools=[wipe]))
        with pytest.raises(pride.ApprovalRequired) as info:
            await session.ask("a", Run("clean up"))
        await session.resolve(info.value.turn_id, {"c1": pride.Approve()})
    suspended, resumed = spans.named("invoke_agent a")
    assert suspended.attributes is not None and resumed.attributes is not None
    assert suspended.attributes["pride.outcome"] == "suspended"
    assert suspended.status.status_code is StatusCode.UNSET
    assert not [event for event in suspended.events if event.name == "exception"]
    assert "error.type" not in suspended.attributes
    assert resumed.attributes["pride.outcome"] == "completed"
    assert resumed.attributes["pride.turn_id"] == suspended.attributes["pride.turn_id"]
    assert [link.context.span_id for link in resumed.links] == [suspended.context.span_id]
    assert spans.one("execute_tool wipe").parent is not None
