"""Traces of a supervisor tree's turn, drawn as a span tree — runs on the scripted model.

``python examples/tracing.py``

A planner asks a researcher (in a child session) through a tool; the
researcher searches. pride.telemetry records the turn with the
OpenTelemetry SDK into an in-memory exporter, and this script draws what a
tracing backend would show: the span tree, a bar per span on a shared time
axis, and the key attributes. Point the same provider at a collector to
see it in Jaeger, Tempo or Honeycomb (docs/observability.md).
"""

from __future__ import annotations

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pride
import pride.telemetry
from pride import Branch, Run, ScriptedModel, Session
from pride.llm import ScriptedReply, ToolCall, Usage

WIDTH = 32  # characters of the time axis


async def search(query: str) -> str:
    """Search the archive for papers."""
    await trio.sleep(0.02)  # a tool that takes a moment
    return f"3 papers on {query}"


async def ask_researcher(question: str) -> str:
    """Ask the research team."""
    items = await pride.ask("researcher", Run(question))
    return str(items[-1].assistant_response)


def priced(text: str, tokens_in: int, tokens_out: int, cost: float) -> ScriptedReply:
    return ScriptedReply(text, usage=Usage(tokens_in, tokens_out, cached_tokens=0, cost_usd=cost))


async def team() -> None:
    researcher = ScriptedModel(
        [
            ToolCall("search", {"query": "structured concurrency"}, id="call_s1"),
            priced("Trio's nurseries bound every task's lifetime.", 410, 28, 0.0004),
        ],
        model="gpt-4.1-mini",
        delay=0.01,
    )
    planner = ScriptedModel(
        [
            ToolCall("ask_researcher", {"question": "what makes trio safe?"}, id="call_p1"),
            priced("Plan: build on nurseries; cancel by scope.", 620, 35, 0.0006),
        ],
        model="gpt-4.1",
        delay=0.01,
    )
    async with Session(name="org") as org:
        research = await org.spawn_session("research")
        await research.spawn(Branch(name="researcher", chat_model=researcher, tools=[search]))
        await org.spawn(Branch(name="planner", chat_model=planner, tools=[ask_researcher]))
        await org.ask("planner", Run("plan the scheduler"))


def draw(spans: list[ReadableSpan]) -> None:
    """Print the span tree with a bar per span on one time axis."""
    start = min(span.start_time or 0 for span in spans)
    end = max(span.end_time or 0 for span in spans)
    scale = WIDTH / max(end - start, 1)
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(span: ReadableSpan, prefix: str, last: bool, root: bool) -> None:
        begin = int(((span.start_time or 0) - start) * scale)
        length = max(1, int(((span.end_time or 0) - (span.start_time or 0)) * scale))
        bar = " " * begin + "█" * length
        branch = "" if root else ("└─ " if last else "├─ ")
        label = f"{prefix}{branch}{span.name}"
        millis = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        print(f"{label:<42} {bar:<{WIDTH + 1}} {millis:6.1f} ms  {facts(span)}")
        below = children.get(span.context.span_id, [])
        for index, child in enumerate(below):
            more = "" if root else ("   " if last else "│  ")
            show(child, prefix + more, index == len(below) - 1, False)

    for root in children.get(None, []):
        show(root, "", True, True)


def facts(span: ReadableSpan) -> str:
    attributes = span.attributes or {}
    if span.name.startswith("invoke_agent"):
        return (
            f"turn {str(attributes['pride.turn_id'])[:8]}  "
            f"{attributes['gen_ai.usage.input_tokens']}+{attributes['gen_ai.usage.output_tokens']} "
            f"tokens  ${attributes.get('pride.usage.cost_usd', 0):.4f}"
        )
    if span.name.startswith("chat"):
        reasons = ",".join(attributes.get("gen_ai.response.finish_reasons", ()))  # type: ignore[arg-type]
        return f"{attributes['gen_ai.usage.output_tokens']} out  {reasons}"
    return f"call {attributes.get('gen_ai.tool.call.id', '')}"


def main() -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pride.telemetry.instrument(provider)
    try:
        trio.run(team)
    finally:
        pride.telemetry.uninstrument()
    spans = list(exporter.get_finished_spans())
    draw(spans)
    print(f"\n{len(spans)} spans in one trace: {len({s.context.trace_id for s in spans}) == 1}")


if __name__ == "__main__":
    main()
