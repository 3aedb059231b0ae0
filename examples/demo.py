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
    pride run examples/demo.py:spawn_team --cluster     # in two host processes of a Ray cluster
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import trio
from rich.console import Console
from rich.live import Live
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text
from rich.tree import Tree

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
from pride.cluster import Cluster, host_cluster
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
    planner's session; the teammate serves it as a turn of its own. On a
    host process of a cluster (examples/cluster.py), the teammate may live
    in another process: the host's cluster resolves the name there.
    """
    cluster = host_cluster()
    target = teammate if cluster is None else cluster.ref(teammate)
    items = await pride.ask(target, Run(prompt))
    return next(item.text for item in reversed(items) if isinstance(item, AssistantResponse))


# ------------------------------------------------------------------ the team


def model(stand_in: ScriptedModel) -> iModel:
    """The real model when PRIDE_CHAT_MODEL names one, else the scripted stand-in."""
    return iModel.from_spec(REAL_MODEL) if REAL_MODEL else stand_in


def make_researcher(*, name: str = "researcher") -> Branch:
    return Branch(
        name=name,
        system="You are the researcher. Use search_notes, then answer in two sentences "
        "using only what the notes say.",
        chat_model=model(ScriptedModel(researcher)),
        tools=[search_notes],
    )


def make_critic(*, name: str = "critic") -> Branch:
    return Branch(
        name=name,
        system="You are the critic. Review a draft in two sentences: "
        "one strength, one concrete improvement.",
        chat_model=model(ScriptedModel(critic)),
    )


def make_planner(*, name: str = "planner") -> Branch:
    return Branch(
        name=name,
        system="You are the planner. Ask the researcher for facts, draft a brief, ask the "
        "critic to review it, then write the final brief in under 120 words.",
        chat_model=model(ScriptedModel(planner)),
        tools=[ask_researcher, ask_critic],
    )


async def spawn_team(session: Session, cluster: Cluster | None = None) -> None:
    """Spawn the researcher, the critic and the planner into ``session``.

    With a cluster (``pride run examples/demo.py:spawn_team --cluster``) they are
    placed in two host processes instead: the factories run there, imported by
    this file's module name (its directory is on the hosts' import path).
    """
    if cluster is None:
        await session.spawn(make_researcher())
        await session.spawn(make_critic())
        await session.spawn(make_planner())
        return
    module = Path(__file__).stem
    places = [
        ("make_researcher", "researcher", "library"),
        ("make_critic", "critic", "library"),
        ("make_planner", "planner", "desk"),
    ]
    # Placed at the same time: each new host is a process to start (a second or two).
    async with trio.open_nursery() as nursery:
        for factory, name, host in places:
            nursery.start_soon(partial(cluster.spawn, f"{module}:{factory}", name=name, host=host))


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

COLOURS = {"planner": "cyan", "researcher": "green", "critic": "magenta"}


class PlainView:
    """What the demo prints when its output is a pipe or a file: plain lines."""

    def header(self, on: str) -> None:
        print(f"pride demo: a planner, a researcher and a critic, on {on}")

    def ask(self, task: str) -> None:
        print(f"\nyou -> planner: {task}\n")

    def calls(self, who: str, function: str, arguments: str | None) -> None:
        indent = "  " if who == "planner" else "      "
        shown = "" if arguments is None else f"({arguments})"
        print(f"{indent}{who} calls {function}{shown}")

    def says(self, who: str, text: str) -> None:
        print(f"      {who}: {text}")

    def answer_starts(self) -> None:
        print("\nplanner: ", end="")

    def chunk(self, text: str) -> None:
        print(text, end="", flush=True)

    def answer_ends(self) -> None:
        print()

    def summary(self, line: str) -> None:
        print(f"\n{line}")

    def next_steps(self, text: str) -> None:
        print(f"\n{text}")


class TerminalView(PlainView):
    """On a terminal: colour per agent, the team as a tree, the answer in a panel."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.answer = ""
        self.live: Live | None = None

    def header(self, on: str) -> None:
        team = Tree("[bold]studio[/]  [dim]Session: supervises, observes, stops in order[/]")
        for name, tools in (
            ("researcher", "search_notes"),
            ("critic", ""),
            ("planner", "ask_researcher, ask_critic"),
        ):
            team.add(f"[{COLOURS[name]}]{name}[/]" + (f"  [dim]tools: {tools}[/]" if tools else ""))
        self.console.print(
            Panel(team, title="[bold]pride demo[/]", subtitle=f"on {on}", expand=False)
        )

    def ask(self, task: str) -> None:
        self.console.print(f"\n[bold]you → [cyan]planner[/]:[/] {task}\n")

    def calls(self, who: str, function: str, arguments: str | None) -> None:
        line = Text.assemble((who, COLOURS[who]), (" calls ", "dim"), function)
        if arguments is not None:
            line.append_text(Text.assemble("(", (arguments, "dim"), ")"))
        self.console.print(Padding(line, (0, 0, 0, 2 if who == "planner" else 6)))

    def says(self, who: str, text: str) -> None:
        self.console.print(Padding(Text.assemble((f"{who}: ", COLOURS[who]), text), (0, 0, 0, 6)))

    def answer_starts(self) -> None:
        self.answer = ""
        self.live = Live(self._panel(), console=self.console, auto_refresh=False)
        self.live.start()

    def chunk(self, text: str) -> None:
        self.answer += text
        assert self.live is not None
        self.live.update(self._panel(), refresh=True)

    def answer_ends(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def summary(self, line: str) -> None:
        self.console.print(f"\n[green]✓[/] {line}")

    def next_steps(self, text: str) -> None:
        self.console.print()
        self.console.print(Panel(text, title="next", border_style="dim", expand=False))

    def _panel(self) -> Panel:
        return Panel(self.answer, title="[cyan]planner[/]", title_align="left", padding=(0, 1))


def view() -> PlainView:
    """The terminal view when standard output is a terminal (or FORCE_COLOR says so)."""
    console = Console(highlight=False)
    return TerminalView(console) if console.is_terminal else PlainView()


# The scripted model replies instantly; on a terminal, pace its tokens a little
# so you can watch them stream in.
PACE = 0.015 if sys.stdout.isatty() and not REAL_MODEL else 0.0


async def main() -> None:
    show = view()
    show.header(REAL_MODEL or "scripted models")
    tokens = 0

    def count_tokens(signal: RunEnd) -> None:
        nonlocal tokens
        tokens += signal.input_tokens + signal.output_tokens

    def show_teamwork(signal: MessageAdded) -> None:
        """Show what the researcher and the critic do inside the planner's turn."""
        message, who = signal.message, signal.branch_name
        if who == "planner" or who is None:
            return
        if isinstance(message, ActionRequest):
            arguments = ", ".join(f"{key}={value!r}" for key, value in message.arguments.items())
            show.calls(who, message.function, arguments)
        elif isinstance(message, AssistantResponse):
            show.says(who, message.text)

    async with Session(name="studio") as studio:
        studio.observe(MessageAdded, handler=show_teamwork)
        studio.observe(RunEnd, handler=count_tokens)
        await spawn_team(studio)

        planner_branch = studio.get_branch("planner")
        show.ask(TASK)
        answering = False
        async with pride.stream(planner_branch, Run(TASK)) as items:
            async for item in items:
                if isinstance(item, str):  # a token chunk of the planner's reply
                    if not answering:
                        show.answer_starts()
                        answering = True
                    show.chunk(item)
                    await trio.sleep(PACE)
                elif isinstance(item, ActionRequest):
                    show.calls("planner", item.function, None)
                elif isinstance(item, AssistantResponse) and answering:
                    show.answer_ends()
                    answering = False
        stats = studio.statistics()

    show.summary(
        f"{stats.branches} branches served {stats.turns_done} turns "
        f"({tokens:,} tokens), each in its own actor, under one supervisor."
    )
    if REAL_MODEL:
        return
    show.next_steps(
        "That ran on pride's scripted model, with no API key. The same team on a real model:\n"
        "\n    PRIDE_CHAT_MODEL=openai/gpt-4.1-mini OPENAI_API_KEY=sk-... make demo\n"
        "\n(any provider/model works, e.g. anthropic/claude-sonnet-4-5 with ANTHROPIC_API_KEY.)"
        "\nNext: `pride chat`, `pride run examples/demo.py:spawn_team`, docs/getting-started.md"
    )


def check_model() -> None:
    """Exit with one line if PRIDE_CHAT_MODEL names a model pride cannot make.

    Checked before the team starts, so the reason is the demo's only output
    rather than the end of a traceback from inside the session.
    """
    if not REAL_MODEL:
        return
    try:
        iModel.from_spec(REAL_MODEL)
    except ValueError as exc:  # an unknown provider: the message says what to use instead
        raise SystemExit(f"demo: PRIDE_CHAT_MODEL={REAL_MODEL}: {exc}") from None


if __name__ == "__main__":
    check_model()
    try:
        trio.run(main)
    except pride.ProviderError as exc:  # no API key, a provider down: the one line that matters
        raise SystemExit(f"demo: {exc}") from None
