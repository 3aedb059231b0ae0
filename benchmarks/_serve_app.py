"""The application ``bench_serve`` starts with ``pride serve``: scripted branches ``b0``, ...

How many comes from ``PRIDE_BENCH_BRANCHES`` (default 100). Every branch
shares one scripted model that answers ``ok`` at once (streamed in chunks of
one character), except the instruction ``hang``, whose model call waits
until it is cancelled: a turn that holds its stream open.
"""

from __future__ import annotations

import os

import trio

from benchmarks._run_app import BRANCHES_ENV
from pride import Branch, ScriptedModel, Session
from pride.llm import ModelRequest


async def reply(request: ModelRequest) -> str:
    """``ok`` at once; a last message ``hang`` waits until cancelled."""
    if request.messages and "hang" in str(request.messages[-1].get("content")):
        await trio.sleep_forever()
    return "ok"


def model() -> ScriptedModel:
    """The scripted model of every branch (it keeps no copies of its requests)."""
    return ScriptedModel(reply, chunk_size=1, keep_calls=0)


async def build(session: Session) -> None:
    """Spawn the branches into the server's root session."""
    shared = model()
    for index in range(int(os.environ.get(BRANCHES_ENV, "100"))):
        await session.spawn(Branch(name=f"b{index}", chat_model=shared))
