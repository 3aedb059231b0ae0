"""The application the approval tests run with ``pride run`` and ``pride chat --agent``.

One branch, ``mailer``, whose scripted model answers an instruction like
``email bob`` with a call of ``send_email`` (``email bob and wire 5``: also a
call of ``wire_money``; ``mail to ADDRESS``: any address, as typed), and
once the tools answered, with a summary of their results. Both tools require
approval; ``lookup`` does not. Each tool call that ran is written to
``PRIDE_TEST_DIR/tools.jsonl`` (``{"tool", "arguments"}``), over every process, so
a test can prove a call ran exactly once, or never.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pride
from pride import Branch, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall


def _ran(tool: str, arguments: dict[str, Any]) -> None:
    directory = os.environ.get("PRIDE_TEST_DIR")
    if directory is None:
        return
    with (Path(directory) / "tools.jsonl").open("a") as file:
        file.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")
        file.flush()
        os.fsync(file.fileno())


def send_email(to: str) -> str:
    """Send an email."""
    _ran("send_email", {"to": to})
    return f"sent to {to}"


def wire_money(amount: int) -> str:
    """Wire money."""
    _ran("wire_money", {"amount": amount})
    return f"wired {amount}"


def lookup(name: str) -> str:
    """Look someone up."""
    _ran("lookup", {"name": name})
    return f"{name}@example.org"


def _reply(request: ModelRequest) -> ScriptedReply:
    results = [str(m.get("content")) for m in request.messages if m.get("role") == "tool"]
    if results and request.messages[-1].get("role") == "tool":
        return ScriptedReply("done: " + "; ".join(results))
    last = next(
        (str(m.get("content")) for m in reversed(request.messages) if m.get("role") == "user"), ""
    )
    calls = []
    email = re.search(r"email (\w+)", last)
    if email:
        calls.append(ToolCall("send_email", {"to": email.group(1)}, id="call_email"))
    address = re.search(r"mail to (\S+)", last)  # any address, hidden characters too
    if address:
        calls.append(ToolCall("send_email", {"to": address.group(1)}, id="call_email"))
    wire = re.search(r"wire (\d+)", last)
    if wire:
        calls.append(ToolCall("wire_money", {"amount": int(wire.group(1))}, id="call_wire"))
    if not calls:
        return ScriptedReply(f"nothing to do for {last!r}")
    return ScriptedReply(tool_calls=tuple(calls))


def agent() -> Branch:
    """``pride chat --agent tests.durable.mailer_app:agent``: the mailer."""
    return Branch(
        name="mailer",
        chat_model=pride.ScriptedModel(_reply),
        tools=[
            pride.Tool(send_email, requires_approval=True),
            pride.Tool(wire_money, requires_approval=True),
            pride.Tool(lookup, idempotent=True),
        ],
    )


async def build(session: Session) -> None:
    """``pride run tests.durable.mailer_app:build``: the mailer, in the root session."""
    await session.spawn(agent())
