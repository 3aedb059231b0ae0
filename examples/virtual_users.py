"""Virtual branches: one conversation per user, only the active ones in memory.

A support desk keeps a branch per user, ``user/<id>``. Nobody spawns them:
``session.virtual("user", for_user)`` says how to build one, and the first
message to a name activates it (restored from the store when that user has
talked before). A branch idle for ``passivate_after`` seconds leaves memory;
at most ``max_active`` are live at once. The process then "restarts" (a new
session on the same store) and a returning user's conversation is still there.

Runs on the scripted model; no API key needed: ``python examples/virtual_users.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio

from pride import Branch, BranchActivated, BranchPassivated, ChatAndRecord, ScriptedModel, Session
from pride.llm import ModelRequest


def answer(request: ModelRequest) -> str:
    """The model: says how many things this user has asked so far."""
    asked = sum(1 for message in request.messages if message["role"] == "user")
    return f"(answer #{asked} to: {request.messages[-1]['content']})"


def for_user(user_id: str) -> Branch:
    """How the application builds a user's branch, in every process: the
    conversation comes from the store, the model and tools from here."""
    return Branch(system=f"You help user {user_id}.", chat_model=ScriptedModel(answer))


def announce(signal: BranchActivated | BranchPassivated) -> None:
    if isinstance(signal, BranchActivated):
        print(f"  activated {signal.branch_name} (restored from the store: {signal.restored})")
    else:
        print(f"  passivated {signal.branch_name} ({signal.reason})")


async def main(store: Path) -> None:
    print("first process:")
    async with Session(store=store) as session:
        session.observe(BranchActivated, BranchPassivated, handler=announce)
        await session.virtual("user", for_user, passivate_after=300.0, max_active=2)
        # cy passivates ada (used longest ago); ada comes back from the store, bo makes room
        for user in ("ada", "bo", "cy", "ada"):
            print(await session.ask(f"user/{user}", ChatAndRecord("where is my order?")))
        print(f"  live now: {sorted(b.name for b in session.branches)}")
        await session.passivate("user/ada")  # by hand, e.g. when the user logs out
        print(f"  stored: {await session.stored('user')}")

    print("second process, same store:")
    async with Session(store=store) as session:
        session.observe(BranchActivated, BranchPassivated, handler=announce)
        await session.virtual("user", for_user)
        print(await session.ask("user/ada", ChatAndRecord("and my refund?")))
        stats = session.statistics()
        print(f"  activations {stats.activations}, live {stats.virtual_active}")


with tempfile.TemporaryDirectory() as directory:
    trio.run(main, Path(directory) / "desk.db")
