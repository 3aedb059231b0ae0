"""pride's flagship demo: a small team of agents, each one an actor, cooperating by name.

    make demo                                                   # scripted model, no API key
    PRIDE_CHAT_MODEL=openai/gpt-4.1-mini OPENAI_API_KEY=... make demo   # a real model

The team is a supervisor tree::

    studio                Session: supervises, observes, stops everything in order
    ├── researcher        tool: search_notes(query)
    ├── critic            reviews drafts
    └── planner           tools: ask_researcher(question), ask_critic(draft)

You ask the planner for a brief. The planner's tools ask its teammates *by
name* (``pride.ask("researcher", ...)``) from inside its own turn: each
branch is an actor with a mailbox, serving one turn at a time, so the three
conversations never interleave. The planner's answer streams to your
terminal as it is produced (``pride.stream``).

The same team runs as a long-running process, taking requests on stdin::

    pride run examples/demo.py:spawn_team
"""

from __future__ import annotations

import os
import sys

import trio

import pride
from pride import (
    ActionRequest,
    AssistantResponse,
    Branch,
    MessageAdded,
    Run,
    RunEnd,
    ScriptedModel,
    Session,
    iModel,
)
from pride.llm import ModelRequest, ToolCall

TASK = "Write a short brief for a new engineer: why does pride run each agent as an actor?"

# With PRIDE_CHAT_MODEL set, every branch talks to that model; otherwise each
# runs on a scripted stand-in (below) that plays its part without a network.
REAL_MODEL = os.environ.get("PRIDE_CHAT_MODEL", "").strip()


# ------------------------------------------------------------------ the tools

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


async def ask_researcher(question: str) -> str:
    """Ask the researcher, who can search the team's notes.

    Args:
        question: What to find out.
    """
    return await consult("researcher", question)


async def ask_critic(draft: str) -> str:
    """Ask the critic to review a draft.

    Args:
        draft: The text to review.
    """
    return await consult("critic", draft)


async def consult(teammate: str, prompt: str) -> str:
    """Ask a teammate by name and return its final answer.

    This runs inside the planner's turn, so the name resolves in the
    planner's session; the teammate serves it as a turn of its own.
    """
    items = await pride.ask(teammate, Run(prompt))
    return next(item.text for item in reversed(items) if isinstance(item, AssistantResponse))


# ------------------------------------------------------------------ the team


def model(stand_in: ScriptedModel) -> iModel:
    """The real model when PRIDE_CHAT_MODEL names one, else the scripted stand-in."""
    return iModel.from_spec(REAL_MODEL) if REAL_MODEL else stand_in


async def spawn_team(session: Session) -> None:
    """Spawn the researcher, the critic and the planner into ``session``."""
    await session.spawn(
        Branch(
            name="researcher",
            system="You are the researcher. Use search_notes, then answer in two sentences "
            "using only what the notes say.",
            chat_model=model(ScriptedModel(researcher)),
            tools=[search_notes],
        )
    )
    await session.spawn(
        Branch(
            name="critic",
            system="You are the critic. Review a draft in two sentences: "
            "one strength, one concrete improvement.",
            chat_model=model(ScriptedModel(critic)),
        )
    )
    await session.spawn(
        Branch(
            name="planner",
            system="You are the planner. Ask the researcher for facts, draft a brief, ask the "
            "critic to review it, then write the final brief in under 120 words.",
            chat_model=model(ScriptedModel(planner)),
            tools=[ask_researcher, ask_critic],
        )
    )


# ------------------------------------------------- scripted stand-ins (no key)


def tool_results(request: ModelRequest) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def researcher(request: ModelRequest) -> ToolCall | str:
    results = tool_results(request)
    if not results:
        question = request.messages[-1]["content"]
        return ToolCall("search_notes", {"query": question}, id="search")
    return "The notes say: " + " ".join(results[-1].splitlines())


def critic(request: ModelRequest) -> str:
    return (
        "Strong: it is concrete. Better: say what the reader gains, namely that one "
        "agent's failure or shutdown never corrupts another's conversation."
    )


def planner(request: ModelRequest) -> ToolCall | str:
    results = tool_results(request)
    if not results:
        question = "What do our notes say about actors, trio and cancellation?"
        return ToolCall("ask_researcher", {"question": question}, id="research")
    if len(results) == 1:
        draft = f"pride runs each agent as an actor. {results[0]}"
        return ToolCall("ask_critic", {"draft": draft}, id="review")
    return (
        "Brief: in pride every agent conversation is an actor, a trio task that owns its "
        "history and serves one message at a time from its mailbox. Turns never interleave, "
        "so no locks guard the conversation, and agents cooperate by asking each other by "
        "name. Sessions supervise the actors the way trio's nurseries supervise tasks: a "
        "crash is restarted by policy, cancellation reaches a whole tree, and shutdown is "
        "orderly. What you gain: one agent's failure or shutdown never corrupts another's "
        "conversation."
    )


# ------------------------------------------------------------------- the run

# The scripted model replies instantly; on a terminal, pace its tokens a little
# so you can watch them stream in.
PACE = 0.015 if sys.stdout.isatty() and not REAL_MODEL else 0.0


def show_teamwork(signal: MessageAdded) -> None:
    """Print what the researcher and the critic do inside the planner's turn."""
    message = signal.message
    if signal.branch_name == "planner":
        return
    if isinstance(message, ActionRequest):
        arguments = ", ".join(f"{key}={value!r}" for key, value in message.arguments.items())
        print(f"      {signal.branch_name} calls {message.function}({arguments})")
    elif isinstance(message, AssistantResponse):
        print(f"      {signal.branch_name}: {message.text}")


async def main() -> None:
    print(f"pride demo: a planner, a researcher and a critic, on {REAL_MODEL or 'scripted models'}")
    tokens = 0

    def count_tokens(signal: RunEnd) -> None:
        nonlocal tokens
        tokens += signal.input_tokens + signal.output_tokens

    async with Session(name="studio") as studio:
        studio.observe(MessageAdded, handler=show_teamwork)
        studio.observe(RunEnd, handler=count_tokens)
        await spawn_team(studio)

        planner_branch = studio.get_branch("planner")
        print(f"\nyou -> planner: {TASK}\n")
        answering = False
        async with pride.stream(planner_branch, Run(TASK)) as items:
            async for item in items:
                if isinstance(item, str):  # a token chunk of the planner's reply
                    if not answering:
                        print("\nplanner: ", end="")
                        answering = True
                    print(item, end="", flush=True)
                    await trio.sleep(PACE)
                elif isinstance(item, ActionRequest):
                    print(f"  planner calls {item.function}")
                elif isinstance(item, AssistantResponse):
                    print()
                    answering = False
        stats = studio.statistics()

    print(
        f"\n{stats.branches} branches served {stats.turns_done} turns "
        f"({tokens:,} tokens), each in its own actor, under one supervisor."
    )
    if REAL_MODEL:
        return
    print(
        "\nThat ran on pride's scripted model, with no API key. The same team on a real model:\n"
        "\n    PRIDE_CHAT_MODEL=openai/gpt-4.1-mini OPENAI_API_KEY=sk-... make demo\n"
        "\n(any provider/model works, e.g. anthropic/claude-sonnet-4-5 with ANTHROPIC_API_KEY.)"
        "\nNext: `pride chat`, `pride run examples/demo.py:spawn_team`, docs/getting-started.md"
    )


if __name__ == "__main__":
    trio.run(main)
