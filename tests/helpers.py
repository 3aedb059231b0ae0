"""Test helpers: a recording observer and controllable scripted models."""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio

import pride
from pride import ScriptedModel
from pride.llm import ModelRequest
from pride.messages import Signal

# pride's own source files, by where the imported package lives: not by a
# "/pride/" in the path, which every file of a checkout named pride has too
# (the tests' own frames would then count as pride's).
PRIDE_SOURCE = Path(pride.__file__).resolve().parent


class Recorder:
    """A signal sink that keeps every signal it sees, in order."""

    def __init__(self, on_signal: Callable[[Signal], Any] | None = None) -> None:
        self.signals: list[Signal] = []
        self._on_signal = on_signal

    def dispatch(self, signal: Signal) -> Any:
        self.signals.append(signal)
        if self._on_signal is not None:
            return self._on_signal(signal)
        return None

    def kinds(self) -> list[str]:
        return [type(signal).__name__ for signal in self.signals]

    def of(self, cls: type) -> list[Any]:
        return [signal for signal in self.signals if isinstance(signal, cls)]


class Gate:
    """A scripted model whose calls block until released, recording the order of events.

    ``events`` gets ``("start", text)`` when a call begins and ``("end", text)``
    when it returns, where ``text`` is the last user message.
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.started = trio.Event()
        self._release: dict[str, trio.Event] = {}
        self.model = ScriptedModel(self._reply)

    def release(self, text: str) -> None:
        self._release.setdefault(text, trio.Event()).set()

    async def _reply(self, request: ModelRequest) -> str:
        text = last_user_text(request)
        self.events.append(("start", text))
        self.started.set()
        await self._release.setdefault(text, trio.Event()).wait()
        self.events.append(("end", text))
        return f"reply to {text}"


def last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                return content
            return " ".join(block.get("text", "") for block in content if isinstance(block, dict))
    return ""


def echo_model() -> ScriptedModel:
    """A model replying ``re: <last user text>`` to every call."""
    return ScriptedModel(lambda request: f"re: {last_user_text(request)}")


@contextlib.contextmanager
def saving_garbage() -> Iterator[list[object]]:
    """Collect first, then keep what the collector finds unreachable in the block."""
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()


@contextlib.contextmanager
def holding_write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Hold the store's write lock (a commit waits for it, up to SQLite's busy timeout)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield db
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()


def is_pride_source(filename: str | Path) -> bool:
    """Whether ``filename`` (a code object's, a module's) is a file of the imported pride."""
    return Path(filename).resolve().is_relative_to(PRIDE_SOURCE)


def frames_holding(error: BaseException) -> list[str]:
    """The frames of pride's in ``error``'s traceback whose locals still hold ``error``.

    A frame keeps its locals as long as it is referenced, and the traceback
    references it: a local holding the error (itself, or in a list, tuple or
    dict made for it) is a reference cycle that keeps every frame of the
    traceback alive until a garbage collection. Objects that keep an error by
    design (a node's state, a failed commit's batch) are not looked into.
    """
    found = []
    tb = error.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        code = frame.f_code
        if not is_pride_source(code.co_filename):
            continue
        for name, value in frame.f_locals.items():
            if value is error or any(held is error for held in _contained(value)):
                found.append(f"{Path(code.co_filename).name}:{code.co_name} ({name})")
    return found


def _contained(value: object) -> list[object]:
    if isinstance(value, list | tuple | set | frozenset):
        return list(value)
    if isinstance(value, dict):
        return list(value.values())
    return []


def nested_lists(depth: int) -> list[Any]:
    """An empty list inside lists, ``depth`` levels in all (``[[[]]]`` is 3)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def tool_call_reply(payload: Any, function: str = "send") -> dict[str, Any]:
    """An OpenAI chat completion whose one tool call ``call_1`` gives ``function`` the
    argument ``payload`` (for the loopback server to send as it is: ``Fault.raw``)."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": function, "arguments": json.dumps({"payload": payload})},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "r",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
