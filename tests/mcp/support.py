"""Helpers for the MCP tests: a scripted agent that calls tools, and signal waits."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import trio

from pride import ScriptedModel, Session
from pride.llm import ModelRequest, ScriptedReply, ToolCall
from pride.messages import Signal


class Agent:
    """A scripted model: first asks for ``calls``, then answers ``"done"``.

    Every request is kept in ``requests`` (what the model was shown).
    """

    def __init__(self, calls: Sequence[ToolCall]) -> None:
        self.calls = tuple(calls)
        self.requests: list[ModelRequest] = []
        self.model = ScriptedModel(self._reply)

    def _reply(self, request: ModelRequest) -> ScriptedReply | str:
        self.requests.append(request)
        if len(self.requests) == 1:
            return ScriptedReply("", self.calls)
        return "done"

    def tool_results(self, index: int = -1) -> dict[str, Any]:
        """``{tool_call_id: decoded content}`` of the tool messages in a request."""
        request = self.requests[index]
        return {
            message["tool_call_id"]: json.loads(message["content"])
            for message in request.messages
            if message["role"] == "tool"
        }


class Waiter:
    """Collects signals from a session and wakes a test when one matches."""

    def __init__(self, session: Session) -> None:
        self.signals: list[Signal] = []
        self._waits: list[tuple[Callable[[Signal], bool], trio.Event]] = []
        session.observe(handler=self._on)

    def _on(self, signal: Signal) -> None:
        self.signals.append(signal)
        for predicate, event in list(self._waits):
            if predicate(signal):
                event.set()

    async def wait_for(self, predicate: Callable[[Signal], bool]) -> Signal:
        """The first signal (seen so far or arriving) that matches."""
        for signal in self.signals:
            if predicate(signal):
                return signal
        event = trio.Event()
        self._waits.append((predicate, event))
        await event.wait()
        return next(signal for signal in self.signals if predicate(signal))

    def of(self, cls: type) -> list[Any]:
        return [signal for signal in self.signals if isinstance(signal, cls)]
