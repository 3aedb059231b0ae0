"""A process that runs (or resumes) a three-node flow on a store: ``python -m
tests.flows.crash_app DIR RUN``.

The flow: ``research`` (a Chat of ``researcher``) -> ``draft`` (a ReAct turn of
``writer``, its instruction built from the research: late-bound) ->
``review`` (a Chat of ``critic``, built from the draft). The writer's turn
makes three model calls (plan, analyse, answer) around one call of the
``lookup`` tool.

Every model call and tool call is appended to ``DIR/calls.jsonl`` with the
process's RUN number, fsynced before it is answered. ``PRIDE_TEST_KILL=hook``
makes the process ``kill -9`` itself in the ``before_tool_call`` hook of
``lookup``: ``research`` has finished (its outcome journaled), ``draft``'s
first model call is committed in the turn journal, the tool has not run.
``PRIDE_TEST_KILL=critic`` kills it as the critic's model call arrives:
``research`` and ``draft`` have finished, ``review``'s turn has committed
nothing. ``PRIDE_TEST_KILL=committed`` kills it in a ``RunEnd`` observer of
the researcher's turn: that terminal is emitted after the turn's commit and
before its caller (the flow) is answered, so the process dies exactly
between the turn's commit and anything the flow does with its outcome.

On start the process resumes the store's unfinished flow if there is one
(rebuilding the same Flow, since two commands are functions), else runs a
new one; it prints the outcomes and results as one JSON line.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

import pride
from pride import Branch, Chat, Flow, ReAct, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.operations.react import ANSWER_PROMPT

DIRECTORY = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
RUN = sys.argv[2] if len(sys.argv) > 2 else "0"


def record(what: str) -> None:
    with (DIRECTORY / "calls.jsonl").open("a") as file:
        file.write(json.dumps({"run": RUN, "call": what}) + "\n")
        file.flush()
        os.fsync(file.fileno())


def writer_reply(request: ModelRequest) -> ScriptedReply:
    last_user = next(
        (m for m in reversed(request.messages) if m.get("role") == "user"), {"content": ""}
    )
    if ANSWER_PROMPT in str(last_user.get("content")):
        record("writer:answer")
        return ScriptedReply(json.dumps({"answer": "a draft on the facts"}))
    if any(message.get("role") == "tool" for message in request.messages):
        record("writer:analyse")
        return ScriptedReply(json.dumps({"analysis": "enough", "extension_needed": False}))
    record("writer:plan")
    return ScriptedReply(tool_calls=(ToolCall("lookup", {"topic": "facts"}, id="call_lookup"),))


def chat_reply(label: str) -> Any:
    def reply(request: ModelRequest) -> ScriptedReply:
        if os.environ.get("PRIDE_TEST_KILL") == label:
            os.kill(os.getpid(), signal.SIGKILL)
        record(label)
        return ScriptedReply(f"{label} says ok")

    return reply


def lookup(topic: str) -> str:
    """Look a topic up."""
    record("tool:lookup")
    return f"{topic}: found"


def before_tool(payload: Any) -> None:
    if os.environ.get("PRIDE_TEST_KILL") == "hook" and payload["call"].function == "lookup":
        os.kill(os.getpid(), signal.SIGKILL)


def after_turn(ended: pride.RunEnd) -> None:
    if os.environ.get("PRIDE_TEST_KILL") == "committed" and ended.branch_name == "researcher":
        os.kill(os.getpid(), signal.SIGKILL)


def build_flow() -> Flow:
    flow = Flow("article")
    research = flow.add("researcher", Chat("find the facts"), name="research")
    draft = flow.add(
        "writer",
        lambda up: ReAct(f"write it from: {up['research']}"),
        depends_on=research,
        name="draft",
    )
    flow.add("critic", lambda up: Chat(f"review: {up['draft']}"), depends_on=draft, name="review")
    return flow


async def main() -> None:
    async with Session(store=DIRECTORY / "store.db") as session:
        session.hooks.on("before_tool_call", before_tool)
        session.observe(pride.RunEnd, handler=after_turn)
        researcher = pride.ScriptedModel(chat_reply("researcher"))
        await session.spawn(Branch(name="researcher", chat_model=researcher))
        await session.spawn(
            Branch(
                name="writer",
                chat_model=pride.ScriptedModel(writer_reply),
                tools=[pride.Tool(lookup)],
            )
        )
        critic = pride.ScriptedModel(chat_reply("critic"))
        await session.spawn(Branch(name="critic", chat_model=critic))
        unfinished = await session.unfinished_flows()
        if unfinished:
            result = await session.resume_flow(unfinished[0].flow_id, build_flow())
        else:
            result = await session.flow(build_flow())
        left = await session.unfinished_flows()
    print(
        json.dumps(
            {
                "resumed": bool(unfinished),
                "outcomes": dict(result.outcomes),
                "results": {name: str(value) for name, value in result.results.items()},
                "left": len(left),
            }
        )
    )


if __name__ == "__main__":
    trio.run(main)
