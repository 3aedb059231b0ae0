"""One envelope a host serves for a caller, and the reply that reports on it as it goes.

A host serves a caller's envelope through the ordinary target protocol: it
puts a `HostedReply` in the branch's mailbox (``branch.deliver_nowait`` or
``deliver``), as ``pride.send`` would put a `Reply`. The branch's actor
answers that reply (``start``, ``succeed``, ``fail``) from inside the turn, and
the hosted reply passes each answer on to its connection at once
(`Answers`). So an envelope costs no task of its own while it waits for its
turn and runs, and its start is known without watching the session's signals.

What the serving side calls must never raise into the actor that called
it: a failure to answer is logged, and the caller hears of it when its host
is lost or the connection closes.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, cast
from uuid import UUID

import attrs
import trio

from ...actors import Reply
from ...actors.instrument import forwarding
from ...branch import Branch
from ...messages import WorkCommand

__all__ = ["Answers", "Call", "HostedReply", "backlog", "room", "trace_context"]

log = logging.getLogger("pride.cluster")

_TRACE_KEYS = 8  # traceparent, tracestate, baggage and a few more: never a payload
_TRACE_VALUE = 8192  # characters; W3C caps tracestate at 512 and baggage at 8192


def trace_context(value: Any) -> dict[str, str] | None:
    """An envelope's trace context from the wire: a small str-to-str object, else none.

    It only labels spans, so a malformed one is dropped (and logged), never
    a reason to refuse the work.
    """
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and len(value) <= _TRACE_KEYS
        and all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= _TRACE_VALUE
            for k, v in value.items()
        )
    ):
        return value
    log.warning("an envelope's trace context is malformed; it is dropped")
    return None


@attrs.define(eq=False)
class Call:
    """One envelope a caller sent, from arrival until its outcome is posted."""

    id: str
    conn: str  # the connection it came by
    branch: str
    mode: str  # "wait" | "nowait" | "stream"
    command: WorkCommand
    window: int = 0
    ack: bool = False  # the caller waits for "queued" (it believes the mailbox full)
    reply: Reply | None = None  # once it is in a mailbox
    answered: bool = False
    scope: trio.CancelScope | None = None  # the intake's wait for room
    receiving: trio.CancelScope | None = None  # a stream's wait for its next item
    credit: int = 0
    credit_changed: trio.Event | None = None  # a stream's wait for credit
    closing: str | None = None  # "close" (clean) or "cancel", for a stream
    trace: dict[str, str] | None = None  # the sender's trace context (W3C headers)


class Answers(Protocol):
    """Where a hosted reply's answers go (the host's `Connections`)."""

    def started(self, call: Call, turn_id: UUID) -> None: ...

    def finished(
        self, call: Call, branch: Branch, value: Any, error: BaseException | None
    ) -> None: ...


class HostedReply(Reply):
    """A `Reply` a host put in a branch's mailbox for a caller's `Call`.

    It is a reply like any other for the branch serving it; its answers are
    also passed to ``answers`` as they happen: the turn's start (with its
    id) and the outcome. A streamed call's outcome is left to the task that
    forwards its items, which answers once the last item is out.
    """

    __slots__ = ("_answers", "call")

    def __init__(
        self,
        branch: Branch,
        call: Call,
        answers: Answers,
        *,
        stream: trio.MemorySendChannel[Any] | None = None,
    ) -> None:
        if call.trace is None:
            super().__init__(branch, call.command, stream=stream)
        else:  # the remote turn continues the sender's trace
            with forwarding(call.trace):
                super().__init__(branch, call.command, stream=stream)
        self.call = call
        self._answers = answers

    def start(self, turn_id: UUID | None, cancel_scope: Any) -> None:
        super().start(turn_id, cancel_scope)
        if turn_id is not None:
            try:
                self._answers.started(self.call, turn_id)
            except Exception:  # never into the actor that started the turn
                log.exception("could not report the start of %s", self.call.id)

    def succeed(self, result: Any) -> None:
        if not self.done:
            super().succeed(result)
            self._answer(result, None)

    def fail(self, error: BaseException) -> None:
        if not self.done:
            super().fail(error)
            self._answer(None, error)

    def _answer(self, value: Any, error: BaseException | None) -> None:
        if self.call.mode == "stream":
            return  # its forwarder answers after the last item
        try:
            self._answers.finished(self.call, cast(Branch, self.branch), value, error)
        except Exception:  # never into the actor that answered
            log.exception("could not report the outcome of %s", self.call.id)


def room(branch: Branch) -> int:
    """How many more envelopes ``branch``'s mailbox takes now."""
    stats = branch.mailbox_statistics()
    if stats is None or stats.closed:
        return 0
    return max(0, stats.capacity - stats.queued)


def backlog(branch: Branch) -> tuple[int, int]:
    """How many more envelopes ``branch``'s mailbox takes now, and how many wait in it."""
    stats = branch.mailbox_statistics()
    if stats is None or stats.closed:
        return 0, 0
    return max(0, stats.capacity - stats.queued), stats.queued
