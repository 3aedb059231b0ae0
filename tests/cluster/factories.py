"""Branch factories the cluster tests place on hosts (importable by the host processes)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import trio

import pride
from pride import Branch, Escalate, ScriptedModel
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.operations.react import ANSWER_PROMPT


def echo(*, name: str, prefix: str = "echo", mailbox_size: int = 64) -> Branch:
    """Answers every prompt with ``<prefix>: <last user message>``."""

    def reply(request: ModelRequest) -> str:
        return f"{prefix}: {request.messages[-1]['content']}"

    return Branch(name=name, chat_model=ScriptedModel(reply), mailbox_size=mailbox_size)


class Worker(Branch):
    """An echo branch whose methods are operations (``Call("block")``...)."""

    __slots__ = ()

    async def block(self, seconds: float = 60.0) -> str:
        """Run until cancelled (or ``seconds`` pass)."""
        await trio.sleep(seconds)
        return "slept"

    async def pid(self) -> int:
        return os.getpid()

    async def lone_surrogate(self) -> dict[str, str]:
        """A result with a lone surrogate in a value and a key (no UTF-8 form)."""
        return {"text": f"bad {chr(0xD800)} text", f"key {chr(0xDFFF)}": "value"}

    async def escalate(self) -> None:
        raise Escalate("this branch's state is not to be trusted")

    async def fail(self, kind: str = "value") -> None:
        if kind == "value":
            raise ValueError("bad value on the host")
        if kind == "closed":
            raise pride.BranchClosed("elsewhere", "for the test")
        raise _Custom("a class the caller cannot have")

    async def note(self, caller: int, n: int) -> None:
        """Note the arrival of envelope ``n`` of ``caller``."""
        self.metadata.setdefault("notes", []).append([caller, n])

    async def emit_nan(self) -> str:
        """Emit a signal JSON cannot carry (a tool's progress that is not a number)."""
        self.emit(pride.ToolProgress(branch_name=self.name, progress=float("nan")))
        return "emitted"

    async def notes(self) -> list[list[int]]:
        return list(self.metadata.get("notes", []))

    async def envelope_trace(self) -> dict[str, str] | None:
        """The trace context this turn's envelope carries on the host."""
        envelope = self.actor.envelope
        return dict(envelope.trace) if envelope is not None and envelope.trace else None

    async def nested(self, depth: int) -> list[Any]:
        """A result of ``depth`` lists, each holding the next (the innermost empty)."""
        value: list[Any] = []
        for _ in range(depth):
            value = [value]
        return value

    async def big(self, size: int) -> str:
        """A result of ``size`` characters."""
        return "x" * size

    async def history(self) -> list[str]:
        """The recorded messages, as ``Kind:id``."""
        return [f"{type(m).__name__}:{m.id}" for m in self.messages]


class _Custom(Exception):
    pass


def worker(*, name: str, mailbox_size: int = 64) -> Branch:
    """A :class:`Worker` echoing ``echo: <prompt>``."""

    def reply(request: ModelRequest) -> str:
        return f"echo: {request.messages[-1]['content']}"

    return Worker(name=name, chat_model=ScriptedModel(reply), mailbox_size=mailbox_size)


def not_a_branch(*, name: str) -> str:
    return name


def planted(marker: str, *, name: str) -> Branch:
    """A factory a hostile placements file names: it leaves ``marker`` if it ever runs."""
    with open(marker, "w") as file:
        file.write("the planted factory ran")
    return echo(name=name)


def raising(*, name: str) -> Branch:
    raise ValueError(f"no branch {name!r} today")


def exiting(*, name: str) -> Branch:
    raise SystemExit(3)  # would end a Ray actor's process if it escaped the host


def misnamed(*, name: str) -> Branch:
    return echo(name=f"not-{name}")


EFFECTS_ANSWER = "three effects, one of them interrupted"


def effects(log: str, *, name: str) -> Branch:
    """A ReAct agent whose one turn runs three tool calls in turn, each a side effect.

    The tool ``effect(n)`` appends ``n`` to the file ``log`` (over every process),
    and the first call 2 the log sees, once it has done so, hangs (a host killed
    then is killed mid-turn); later turns run through. The turn: a model call
    asking for the three calls, the calls, an analysis, the answer (`EFFECTS_ANSWER`).
    """

    async def effect(n: int) -> str:
        """Do one side effect."""
        with open(log, "a") as file:
            file.write(f"{n}\n")
            file.flush()
            os.fsync(file.fileno())
        if n == 2 and Path(log).read_text().split().count("2") == 1:
            await trio.sleep_forever()
        return f"effect {n} done"

    def reply(request: ModelRequest) -> ScriptedReply:
        last_user = next(
            (m for m in reversed(request.messages) if m.get("role") == "user"), {"content": ""}
        )
        if ANSWER_PROMPT in str(last_user.get("content")):
            return ScriptedReply(json.dumps({"answer": EFFECTS_ANSWER}))
        users = [i for i, m in enumerate(request.messages) if m.get("role") == "user"]
        this_turn = request.messages[users[-1] if users else 0 :]
        if any(message.get("role") == "tool" for message in this_turn):
            return ScriptedReply(json.dumps({"analysis": "done", "extension_needed": False}))
        calls = tuple(ToolCall("effect", {"n": n}, id=f"call_{n}") for n in (1, 2, 3))
        return ScriptedReply(tool_calls=calls)

    return Worker(name=name, chat_model=ScriptedModel(reply), tools=[pride.Tool(effect)])


def sleepy(marker: str, seconds: float, *, name: str) -> Branch:
    """A factory that blocks its thread for ``seconds`` (after writing ``marker``)."""
    Path(marker).write_text("the factory runs")
    time.sleep(seconds)  # the fault under test: a factory that blocks
    return echo(name=name)
