"""A small scripted world for reliability runs: a model, tools and operations.

Commands carry their behaviour in their instruction text, so a random
program can say what each turn does without any shared script state:

* ``d=<seconds>``: the model waits that long (``trio.sleep``: virtual time
  under ``MockClock``) before replying;
* ``fail``: the model call raises :class:`~pride.ServerError` (no retries);
* ``tool=<name>``: the model first asks for that tool (``slow``, ``hang``,
  ``spawn``, ``boom``), then answers once the tool result is in.

Replies are ``re: <instruction>``. Operations: ``nested`` (two inline
``chat_and_record`` calls inside the turn), ``peer`` (asks another branch by
name, a cross-branch call that may be refused with ReentrancyError) and
``crash`` (raises :class:`~pride.Escalate`).
"""

from __future__ import annotations

import re
from typing import Any

import trio

import pride
from pride import Branch, ChatAndRecord, Escalate, ScriptedModel, ServerError
from pride.llm import ModelRequest, RetryPolicy, ToolCall
from tests.helpers import last_user_text

__all__ = [
    "ALLOWED_ERRORS",
    "TOOLS",
    "Leftovers",
    "linked_tools",
    "register_operations",
    "tools",
    "world_model",
]

_DELAY = re.compile(r"d=(\d+(?:\.\d+)?)")
_TOOL = re.compile(r"tool=(\w+)")

ALLOWED_ERRORS: tuple[type[BaseException], ...] = (
    pride.TurnCancelled,
    pride.BranchClosed,
    pride.UnknownBranch,  # a peer removed from the session
    pride.ReentrancyError,
    pride.Escalate,
    pride.ServerError,
    pride.LoopBreak,
    trio.TooSlowError,
)
"""What a caller in the scripted world may legitimately get instead of a result."""


class Leftovers:
    """Counts tasks the ``spawn`` tool left in a turn, and how many were cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    @property
    def running(self) -> int:
        return self.started - self.cancelled

    async def forever(self) -> None:
        self.started += 1
        try:
            await trio.sleep_forever()
        finally:
            self.cancelled += 1


async def _reply(request: ModelRequest) -> Any:
    text = last_user_text(request)
    tool = _TOOL.search(text)
    if tool is not None and request.messages[-1].get("role") != "tool":
        return ToolCall(tool.group(1), {"n": 1})
    delay = _DELAY.search(text)
    if delay is not None:
        await trio.sleep(float(delay.group(1)))
    if "fail" in text:
        raise ServerError("scripted failure", status=500)
    return f"re: {text}"


def world_model() -> ScriptedModel:
    """The world's model (see the module docstring); never retries."""
    return ScriptedModel(_reply, retry=RetryPolicy(max_retries=0), chunk_size=4)


def tools(leftovers: Leftovers) -> list[Any]:
    """The world's tools, sharing one :class:`Leftovers` counter."""

    async def slow(n: int) -> str:
        """Take ``n`` seconds."""
        await trio.sleep(n)
        return "slow done"

    async def hang(n: int) -> str:
        """Never finish (until cancelled)."""
        await trio.sleep_forever()
        return "unreachable"

    async def spawn(n: int) -> str:
        """Leave a never-ending task in the turn."""
        scope = pride.current_turn()
        assert scope is not None, "tools run inside their turn"
        scope.start_soon(leftovers.forever)
        return "spawned"

    async def boom(n: int) -> str:
        """Raise (async: a worker thread would let MockClock's autojump fire)."""
        await trio.lowlevel.checkpoint()
        raise RuntimeError("boom")

    return [slow, hang, spawn, boom]


TOOLS = ("slow", "hang", "spawn", "boom")


def linked_tools(branch: Branch, peer: Branch) -> list[Any]:
    """Tools calling back into branches: ``selfask`` (its own) and ``peerask`` (the other).

    Inside a model turn ``selfask`` runs inline as nested work; inside an ``Act``
    served from the mailbox it is refused with ReentrancyError (waiting on its
    own busy actor would never end), which the tool records as its error.
    """

    async def selfask(n: int) -> str:
        """Ask this tool's own branch."""
        return str(await branch.chat("inner d=0"))

    async def peerask(n: int) -> str:
        """Ask the other branch."""
        return str(await pride.ask(peer, ChatAndRecord("from a peer's tool d=0")))

    return [selfask, peerask]


async def _nested(branch: Branch, text: str = "nested") -> str:
    first = await branch.chat_and_record(f"{text} 1")
    second = await branch.chat_and_record(f"{text} 2")
    return f"{first} | {second}"


async def _peer(branch: Branch, to: str = "", text: str = "peer") -> Any:
    return await pride.ask(to, ChatAndRecord(text))


async def _crash(branch: Branch, reason: str = "scripted crash") -> None:
    raise Escalate(reason)


def register_operations(target: Any) -> None:
    """Register ``nested``, ``peer`` and ``crash`` on a session (or a branch)."""
    target.register_operation("nested", _nested, update=True)
    target.register_operation("peer", _peer, update=True)
    target.register_operation("crash", _crash, update=True)
