"""Branch factories the cluster tests place on hosts (importable by the host processes)."""

from __future__ import annotations

import os

import trio

import pride
from pride import Branch, Escalate, ScriptedModel
from pride.llm import ModelRequest


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
        return {"text": "bad \ud800 text", "key \udfff": "value"}

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
