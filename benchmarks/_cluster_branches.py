"""Branch factories the cluster benchmark places on its host (importable by the host)."""

from __future__ import annotations

import os

import trio

from pride import Branch, ScriptedModel


class Bench(Branch):
    """A branch on a scripted model, with ``block`` and ``pid`` operations."""

    __slots__ = ()

    async def block(self, seconds: float = 60.0) -> str:
        await trio.sleep(seconds)
        return "slept"

    async def pid(self) -> int:
        return os.getpid()


def bench(*, name: str, mailbox_size: int = 4096) -> Branch:
    return Bench(name=name, chat_model=ScriptedModel(None), mailbox_size=mailbox_size)  # echoes
