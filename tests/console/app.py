"""The app the console tests serve: ``pride serve tests/console/app.py:build --console``.

A tree two sessions deep, every branch on a script (no network). Each model
call reports its usage and a cost of `COST` dollars. An instruction
``hold KEY`` keeps its turn running until some branch is asked ``release
KEY`` (so a test sees a turn in flight for as long as it needs, without a
sleep); ``inject`` answers with hostile markdown (`HOSTILE`); ``use the
tool`` calls ``launch``, a tool that needs a person's approval; ``consult``
calls ``consult``, a tool that asks ``scout`` (a nested ask); ``flow KEY``
calls ``run_flow``, a tool that runs a flow whose ``gather`` node holds
until ``release KEY``; anything else is echoed. ``archive`` starts with
`ARCHIVED` messages of history.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import trio

from pride import (
    AssistantResponse,
    Branch,
    ChatAndRecord,
    Flow,
    Instruction,
    ScriptedModel,
    Session,
    tool,
)
from pride.llm import ModelRequest, ScriptedReply, ToolCall, Usage

COST = 0.0125
"""Dollars each model call reports."""

ARCHIVED = 10_000
"""Messages of history ``archive`` starts with."""

HOSTILE = (
    "Here is **bold**, `code` and a [link](https://example.com/docs).\n\n"
    '<script>window.__pwned = "script"</script>\n\n'
    '<img src="x" onerror="window.__pwned = \'img\'">\n\n'
    "[click me](javascript:window.__pwned='link')\n\n"
    '![pic](javascript:alert(1)) <b onmouseover="window.__pwned=1">hover</b>\n\n'
    "```\n<script>window.__pwned = 'code'</script>\n```\n"
)
"""Model output written to inject a script every way markdown renderers have let one in."""

_RELEASED: defaultdict[str, trio.Event] = defaultdict(trio.Event)


def _last_user(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


def _reply(text: str = "", *calls: ToolCall) -> ScriptedReply:
    usage = Usage(input_tokens=40, output_tokens=len(text) // 4 + 1, cost_usd=COST)
    return ScriptedReply(text=text, tool_calls=calls, usage=usage)


async def _script(request: ModelRequest) -> ScriptedReply:
    text = _last_user(request)
    if request.messages and request.messages[-1].get("role") == "tool":
        return _reply("the tool answered")
    if text.startswith("hold "):
        await _RELEASED[text.removeprefix("hold ")].wait()
        return _reply(f"released {text.removeprefix('hold ')}")
    if text.startswith("release "):
        _RELEASED[text.removeprefix("release ")].set()
        return _reply("released")
    if text == "inject":
        return _reply(HOSTILE)
    if text == "use the tool":
        return _reply("", ToolCall(name="launch", arguments={"target": "moon"}, id="call-1"))
    if text == "consult":
        return _reply("", ToolCall(name="consult", arguments={"question": "what is there"}))
    if text.startswith("flow "):
        return _reply("", ToolCall(name="run_flow", arguments={"key": text.removeprefix("flow ")}))
    return _reply(f"echo: {text}")


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch at a target (needs a person's approval)."""
    return f"launched at {target}"


def agent(name: str, **options: Any) -> Branch:
    """A branch on the test script."""
    return Branch(
        name=name, system=f"You are {name}.", chat_model=ScriptedModel(_script), **options
    )


def _archive() -> list[Any]:
    history: list[Any] = []
    for number in range(ARCHIVED // 2):
        history.append(Instruction(instruction=f"question {number}"))
        history.append(AssistantResponse(assistant_response=f"answer **{number}**"))
    return history


BRANCHES = ("writer", "pilot", "archive", "lead", "scout", "critic")
"""Every branch of the tree (``scout`` and ``critic`` in the child session ``research``)."""


async def build(session: Session) -> None:
    """``writer``, ``pilot`` (a tool that needs approval), ``archive`` (a long
    history) and ``lead`` (a tool that asks ``scout``) at the root; ``scout``
    and ``critic`` in the child session ``research``."""
    await session.spawn(agent("writer"))
    await session.spawn(agent("pilot", tools=[launch]))
    await session.spawn(agent("archive", messages=_archive()))

    @tool
    async def consult(question: str) -> str:
        """Ask the scout a question."""
        answer: str = await session.ask("scout", ChatAndRecord(instruction=question))
        return answer

    @tool
    async def run_flow(key: str) -> str:
        """Run the ``survey`` flow: ``gather`` (held until ``release KEY``) and
        ``scan`` at once, then ``report`` after both."""
        flow = Flow("survey")
        flow.add("scout", ChatAndRecord(instruction=f"hold {key}"), name="gather")
        flow.add("critic", ChatAndRecord(instruction="scan"), name="scan")
        flow.add(
            "critic",
            ChatAndRecord(instruction="report"),
            depends_on=["gather", "scan"],
            name="report",
        )
        result = await session.flow(flow)
        return str(result["report"])

    await session.spawn(agent("lead", tools=[consult, run_flow]))
    research = await session.spawn_session("research")
    await research.spawn(agent("scout"))
    await research.spawn(agent("critic"))
