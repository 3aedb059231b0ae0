"""The application the virtual-branch subprocess tests start: a ``user`` kind.

``build`` is a ``pride run`` app; ``python -m tests.virtual.app STORE`` is a
process that asks ``user/ada`` one question per line of its stdin, printing
each answer, so a test can ``kill -9`` it between turns.
"""

from __future__ import annotations

import sys

import trio

from pride import Branch, ChatAndRecord, ScriptedModel, Session
from pride.llm import ModelRequest


def answer(request: ModelRequest) -> str:
    """Names how many user messages the conversation has: what history came back."""
    asked = [m["content"] for m in request.messages if m["role"] == "user"]
    return f"answer {len(asked)} to {asked[-1]}"


def for_user(key: str) -> Branch:
    return Branch(system=f"You help {key}.", chat_model=ScriptedModel(answer))


async def build(session: Session) -> None:
    """Register the ``user`` kind (no branch is spawned)."""
    await session.virtual("user", for_user, passivate_after=300.0)


async def _asking(store: str) -> None:
    async with Session(store=store) as session:
        await build(session)
        print("ready", flush=True)
        while line := (await trio.to_thread.run_sync(sys.stdin.readline)).strip():
            print(await session.ask("user/ada", ChatAndRecord(line)), flush=True)


if __name__ == "__main__":
    trio.run(_asking, sys.argv[1])
