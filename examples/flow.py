"""The demo team as a flow: the orchestration is a graph, not the planner's tool calls.

    python examples/flow.py                                        # scripted models, no key
    PRIDE_CHAT_MODEL=openai/gpt-4.1-mini OPENAI_API_KEY=... python examples/flow.py

In examples/demo.py the planner orchestrates by calling tools that ask its
teammates. Here the same three agents do the same job, and the order of the
work is written down once, as a ``pride.Flow``::

    research ──> draft ──> review ─(when the critic asks for a change)─> final

Each node is an ordinary turn of its branch; the draft is built from the
research, the review from the draft (late-bound commands), and the final
brief is written only if the review asks for an improvement (an edge
condition). The run streams its node signals as they happen, and the flow
draws itself as a Mermaid diagram.

A second flow grows while it runs: the planner decides which topics to
research, adds one research node per topic to its own running flow, and a
summary node after them (``pride.current_flow().add``).
"""

from __future__ import annotations

import os
from typing import Any

import trio

import pride
from pride import (
    AssistantResponse,
    Branch,
    Call,
    Chat,
    Flow,
    NodeCompleted,
    NodeFailed,
    NodeSkipped,
    NodeStarted,
    Run,
    ScriptedModel,
    Session,
    iModel,
)
from pride.llm import ModelRequest, ToolCall

REAL_MODEL = os.environ.get("PRIDE_CHAT_MODEL", "").strip()

NOTES = {
    "actors": "An actor owns its state and takes one message at a time from its mailbox.",
    "trio": "trio runs every task inside a nursery; no task outlives the block that started it.",
    "cancellation": "A cancel scope stops a whole subtree of tasks; cleanup runs shielded.",
}


def search_notes(query: str) -> str:
    """Search the team's notes.

    Args:
        query: The topics to look up.
    """
    found = [text for topic, text in NOTES.items() if topic in query.lower()]
    return "\n".join(found) or "Nothing in the notes about that."


# ------------------------------------------------- scripted stand-ins (no key)


def last_user(request: ModelRequest) -> str:
    return next(str(m["content"]) for m in reversed(request.messages) if m["role"] == "user")


def researcher(request: ModelRequest) -> ToolCall | str:
    last = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
    results = [m["content"] for m in request.messages[last:] if m["role"] == "tool"]
    if not results:
        return ToolCall("search_notes", {"query": last_user(request)}, id="search")
    return "The notes say: " + " ".join(str(results[-1]).splitlines())


def critic(request: ModelRequest) -> str:
    return (
        "Strong: it is concrete. Better: say what the reader gains, namely that one "
        "agent's failure or shutdown never corrupts another's conversation."
    )


def planner(request: ModelRequest) -> str:
    prompt = last_user(request)
    if prompt.startswith("Draft"):
        return "pride runs each agent as an actor: " + prompt.split(":", 1)[1].strip()
    return (
        "Brief: in pride every agent conversation is an actor that owns its history and "
        "serves one message at a time, so turns never interleave and no locks guard the "
        "conversation. Sessions supervise actors the way trio's nurseries supervise tasks. "
        "What you gain: one agent's failure or shutdown never corrupts another's conversation."
    )


def model(stand_in: ScriptedModel) -> iModel:
    return iModel.from_spec(REAL_MODEL) if REAL_MODEL else stand_in


def make_team() -> list[Branch]:
    return [
        Branch(
            name="researcher",
            system="You are the researcher. Use search_notes, then answer in two sentences.",
            chat_model=model(ScriptedModel(researcher)),
            tools=[search_notes],
        ),
        Branch(
            name="critic",
            system="You are the critic: one strength, one concrete improvement.",
            chat_model=model(ScriptedModel(critic)),
        ),
        Branch(
            name="planner",
            system="You are the planner. Write briefs for new engineers, under 120 words.",
            chat_model=model(ScriptedModel(planner)),
        ),
    ]


# ------------------------------------------------------------------- the flows


def answer(messages: list[Any]) -> str:
    """The text of a Run's last assistant message."""
    return next(m.text for m in reversed(messages) if isinstance(m, AssistantResponse))


def brief_flow() -> Flow:
    """research -> draft -> review -> final (only if the critic asks for a change)."""
    flow = Flow("brief")
    research = flow.add(
        "researcher",
        Run("What do our notes say about actors, trio and cancellation?"),
        name="research",
    )
    draft = flow.add(
        "planner",
        lambda up: Chat(f"Draft a brief from these facts: {answer(up['research'])}"),
        depends_on=research,
        name="draft",
    )
    review = flow.add(
        "critic",
        lambda up: Chat(f"Review this draft: {up['draft']}"),
        depends_on=draft,
        name="review",
    )
    flow.add(
        "planner",
        lambda up: Chat(f"Write the final brief.\nDraft: {up['draft']}\nReview: {up['review']}"),
        depends_on=review,
        when=lambda up: "Better:" in up["review"],
        name="final",
    )
    return flow


async def research_plan(branch: Branch, topics: list[str]) -> str:
    """A planner's operation that grows its own running flow: one research node per
    topic, then a summary after all of them."""
    run = pride.current_flow()
    assert run is not None, "research_plan runs as a node of a flow"
    found = [
        run.add("researcher", Run(f"What do the notes say about {topic}?"), name=topic)
        for topic in topics
    ]
    run.add(
        "planner",
        lambda up: Chat("Draft a brief from: " + " ".join(answer(up[n.name]) for n in found)),
        depends_on=found,
        name="summary",
    )
    return f"research planned on {', '.join(topics)}"


def describe(event: Any) -> str | None:
    if isinstance(event, NodeStarted):
        return f"  {event.elapsed * 1000:7.1f} ms  start    {event.node} ({event.branch_name})"
    if isinstance(event, NodeCompleted):
        return f"  {event.elapsed * 1000:7.1f} ms  done     {event.node}"
    if isinstance(event, NodeSkipped):
        return f"  {event.elapsed * 1000:7.1f} ms  skipped  {event.node}: {event.reason}"
    if isinstance(event, NodeFailed):
        return f"  {event.elapsed * 1000:7.1f} ms  failed   {event.node}: {event.error_message}"
    return None


async def main() -> None:
    async with Session(name="studio") as session:
        for branch in make_team():
            await session.spawn(branch)
        session.register_operation("research_plan", research_plan)

        flow = brief_flow()
        print("The flow, as Mermaid (paste it into any Mermaid viewer):\n")
        print(flow.to_mermaid())
        print("Running it:")
        async with session.flow_stream(flow) as events:
            async for event in events:
                line = describe(event)
                if line:
                    print(line)
        result = events.result
        assert result is not None
        result.raise_for_failure()
        print(f"\nplanner: {result['final']}\n")
        print(f"outcomes: {dict(result.outcomes)}")
        print(
            f"usage: {result.usage.model_calls} model calls, {result.usage.tool_calls} tool calls"
        )

        print("\nA flow that grows while it runs:")
        growing = Flow("research")
        growing.add("planner", Call("research_plan", topics=["actors", "trio"]), name="plan")
        grown = await session.flow(growing, max_concurrent=3)
        for name, node in grown.nodes.items():
            spawned = f" (added by {node.node.spawned_by})" if node.node.spawned_by else ""
            print(f"  {name}: {node.outcome}{spawned}")
        print(f"\nplanner: {grown['summary']}\n")
        print("How it ran, as Mermaid:\n")
        print(grown.to_mermaid())


if __name__ == "__main__":
    try:
        trio.run(main)
    except pride.ProviderError as exc:  # no API key, a provider down: the one line that matters
        raise SystemExit(f"flow: {exc}") from None
