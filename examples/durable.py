"""Durable turns: a tool call waits for a person, across a restart, and runs exactly once.

A mailer agent is asked to email bob. ``send_email`` requires approval, so the
turn stops before it (``ApprovalRequired``); the process "stops" (the first
session closes). A second session on the same store finds the turn waiting,
a person approves it, and the turn continues from its journal: the model's
first call is answered from the journal (not paid for twice), the email is
sent once, and the model's answer is recorded. A second request is denied,
and the model sees why.

Runs on the scripted model; no API key needed: ``python examples/durable.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

import pride
from pride import ApprovalRequested, ApprovalRequired, Approve, Branch, Deny, Operate, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall

sent: list[str] = []
model_calls: list[str] = []


def send_email(to: str, text: str) -> str:
    """Send an email."""
    sent.append(to)
    return f"sent to {to}"


def reply(request: ModelRequest) -> ScriptedReply:
    """The model: email whoever is named, then report what the tool said."""
    last = request.messages[-1]
    if last.get("role") == "tool":
        model_calls.append("report")
        return ScriptedReply(f"Done: {last.get('content')}")
    model_calls.append("plan")
    to = "bob" if "bob" in str(last.get("content")) else "eve"
    call = ToolCall("send_email", {"to": to, "text": "Lunch at noon?"}, id=f"call_{to}")
    return ScriptedReply(tool_calls=(call,))


def mailer() -> Branch:
    """The agent, as the application builds it in every process."""
    return Branch(
        name="mailer",
        chat_model=pride.ScriptedModel(reply),
        tools=[pride.Tool(send_email, requires_approval=True)],
    )


async def first_process(store: Path) -> None:
    async with Session(store=store) as session:
        session.observe(
            ApprovalRequested,
            handler=lambda s: print(f"approval requested: {s.function}({dict(s.arguments)})"),
        )
        await session.spawn(mailer())
        try:
            await session.ask("mailer", Operate("Email bob about lunch", actions=True))
        except ApprovalRequired as stopped:
            print(f"turn {stopped.turn_id} waits; pending: {[c.call_id for c in stopped.pending]}")
    print("first process stopped; emails sent so far:", sent)


async def second_process(store: Path) -> None:
    async with Session(store=store) as session:
        await session.spawn(mailer())  # restored: its suspended turn with it
        [waiting] = session.suspended_turns()
        [call] = waiting.pending
        print(f"found {waiting.branch_name}'s turn waiting on {call.function}({call.arguments})")
        result = await session.resolve(waiting.turn_id, {call.call_id: Approve()})
        print("answer:", result.output)

        try:
            await session.ask("mailer", Operate("Email eve too", actions=True))
        except ApprovalRequired as stopped:
            denied = await session.resolve(stopped.turn_id, {"call_eve": Deny("not eve")})
            print("answer:", denied.output)
    print("emails sent:", sent)  # bob, once; never eve
    print("model calls:", model_calls)  # the first plan was not made again


async def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "mail.db"
        await first_process(store)
        await second_process(store)
    assert sent == ["bob"]
    assert model_calls == ["plan", "report", "plan", "report"]


if __name__ == "__main__":
    trio.run(main)
