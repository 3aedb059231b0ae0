"""The app the serve tests start: ``pride serve tests/serve/app.py:build``.

Every branch answers from a script (no network): ``echo: <instruction>`` by
default; an instruction ``hang`` waits until cancelled, ``slow S`` takes S
seconds, ``think:TEXT`` reasons TEXT (and withholds some) before it
answers, ``count:TEXT`` answers how many turns with instruction TEXT have
started (each turn's instruction is counted, so a turn run twice shows), and
``repeated:PREFIX`` the instructions starting with PREFIX that started more
than once (``none`` when there is none).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio

from pride import Branch, Budget, ScriptedModel, Session, Usage, tool
from pride.llm import ModelRequest, ScriptedReply, ToolCall

STARTED: Counter[str] = Counter()
"""Turn starts by instruction text (``ask`` ``count:<text>`` reads one)."""


def _last_user(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return str(content)
    return ""


async def _script(request: ModelRequest) -> Any:
    text = _last_user(request)
    if request.messages and request.messages[-1].get("role") == "tool":
        return "the tool answered"
    STARTED[text] += 1
    if text == "hang":
        await trio.sleep_forever()
    if text.startswith("slow "):
        await trio.sleep(float(text.split()[1]))
        return f"slept {text.split()[1]}"
    if text.startswith("count:"):
        return str(STARTED[text.removeprefix("count:")])
    if text.startswith("repeated:"):
        prefix = text.removeprefix("repeated:")
        twice = sorted(t for t, n in STARTED.items() if t.startswith(prefix) and n > 1)
        return ", ".join(twice) or "none"
    if text.startswith("think:"):  # a reasoning model: reasons, then answers
        return ScriptedReply(
            text="the answer",
            thinking=text.removeprefix("think:"),
            redacted="withheld",
            usage=Usage(10, 30, reasoning_tokens=20),
        )
    if text == "use the tool":
        return ToolCall(name="launch", arguments={"target": "moon"}, id="call-1")
    return f"echo: {text}"


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch at a target (needs a person's approval)."""
    return f"launched at {target}"


def agent(name: str, **options: Any) -> Branch:
    """A branch on the test script."""
    return Branch(
        name=name,
        system=f"You are {name}.",
        chat_model=ScriptedModel(_script, chunk_size=4),
        **options,
    )


async def build(session: Session) -> None:
    """``writer``, ``reader``, ``support-1``, ``frugal`` (no model call allowed),
    ``pilot`` (a tool that needs approval) and ``narrow`` (a mailbox of one)."""
    await session.spawn(agent("writer"))
    await session.spawn(agent("reader"))
    await session.spawn(agent("support-1"))
    await session.spawn(agent("frugal", budget=Budget(max_model_calls=0)))
    await session.spawn(agent("pilot", tools=[launch]))
    await session.spawn(agent("narrow", mailbox_size=1))
