"""An envelope sent to a host, as the caller's link keeps it until its outcome.

The send API makes a `Reply`; a remote target wraps it in an `Envelope` and
hands it to the host's `Link`. The envelope is the reply's holder while
queued (a caller dropping it sends a cancel), its canceller once running, and,
for a streamed command, the forwarder of the host's items into the caller's
stream channel with one credit back per item consumed (the backpressure that
keeps a remote stream at most ``window`` items ahead).
"""

from __future__ import annotations

import collections
from typing import Any, Protocol
from uuid import UUID

import trio

from ...actors import Reply
from ...errors import InvalidMessage
from ...messages import Command, WorkCommand

__all__ = ["Envelope", "EnvelopeLink", "check_work"]

_ANSWERED: tuple[Any, BaseException | None] = (None, None)
"""The outcome an envelope keeps once answered without a stream (the reply has it)."""


class EnvelopeLink(Protocol):
    """What an envelope needs of its host's link (a `Link`): its id, and a way out
    for the cancels, closes and stream credits it sends."""

    def new_envelope_id(self) -> str:
        """A fresh envelope id."""
        ...

    def push(self, item: dict[str, Any]) -> None:
        """Queue a control item for delivery."""
        ...


class Envelope:
    """The link's record of one envelope sent to a host, from submission to outcome.

    It is the envelope's holder while queued (a caller dropping it sends a
    cancel), its canceller once running, and, for a streamed command, the
    forwarder of its items into the caller's zero-buffer stream channel,
    returning one credit to the host per item consumed.
    """

    answers_cancel = True
    """A caller's cancel of it while it looks queued goes to the host, which answers
    with the truth: it may have started there (see `pride.actors.reply.Holder`)."""

    __slots__ = (
        "_acked",
        "_acked_event",
        "_cancelled",
        "_ended",
        "_items",
        "_items_changed",
        "_owed",
        "_reply",
        "branch",
        "id",
        "link",
        "outcome",
        "refusal",
        "waiting",
        "window",
    )

    def __init__(self, link: EnvelopeLink, reply: Reply, branch: str, *, window: int = 0) -> None:
        self.link = link
        # The reply holds this envelope (its holder, then its canceller) and this
        # envelope holds the reply until it is answered; then it lets go, so an
        # answered envelope leaves no reference cycle for the garbage collector.
        self._reply: Reply | None = reply
        self.branch = branch
        self.id = link.new_envelope_id()
        self.window = window
        self.waiting = False  # the deliverer waits for the host's ack
        self._acked = False
        self._acked_event: trio.Event | None = None  # made only if someone waits
        self._cancelled = False  # a cancel was sent (once is enough)
        self.refusal: BaseException | None = None
        self.outcome: tuple[Any, BaseException | None] | None = None
        # A stream's items, made only for a streamed command (most are not).
        self._items: collections.deque[Any] | None = None
        self._items_changed: trio.Event | None = None
        self._ended = False
        self._owed = 0
        if reply.stream is not None:
            self._items = collections.deque()
            self._items_changed = trio.Event()

    @property
    def reply(self) -> Reply:
        """The reply this envelope carries (until it is answered).

        Raises:
            RuntimeError: the envelope was answered already (a bug on this side).
        """
        reply = self._reply
        if reply is None:
            raise RuntimeError(f"envelope {self.id} was answered already")
        return reply

    @property
    def acked(self) -> bool:
        """True once the host has queued the envelope (or answered it, or was lost)."""
        return self._acked

    def ack(self) -> None:
        """The host queued the envelope (or answered it): wake a deliverer waiting for it."""
        self._acked = True
        if self._acked_event is not None:
            self._acked_event.set()

    async def wait_acked(self) -> None:
        """Wait until `ack`.

        Cancellation: stops waiting at once; the envelope is as it was.
        """
        if self._acked:
            await trio.lowlevel.checkpoint()
            return
        if self._acked_event is None:
            self._acked_event = trio.Event()
        await self._acked_event.wait()

    # ------------------------------------------------------------ caller side

    def forget_dropped(self) -> None:
        """The caller gave up on the envelope before hearing that it started: tell the
        host, whose answer (dropped, cancelled, or the outcome) is the reply's."""
        self._cancel()

    def cancel(self) -> None:
        """The caller gave up on the running command: tell the host."""
        self._cancel()

    def _cancel(self) -> None:
        if self._cancelled or self._reply is None:
            return
        self._cancelled = True
        if self.reply.stream is not None and self.reply.cancel_reason == "stream_closed":
            self.link.push({"k": "close", "id": self.id})  # a clean end: the turn finalises
        else:
            self.link.push({"k": "cancel", "id": self.id})

    # ------------------------------------------------------------ host side

    def started(self, turn_id: UUID | None) -> None:
        if not self.reply.done:
            self.reply.start(turn_id, self)

    def dropped(self) -> None:
        """The host dropped the envelope before it started (the caller cancelled it):
        its reply says so (``state == "dropped"``), as a local one would."""
        reply = self._reply
        if reply is not None and not reply.done:
            reply.state = "dropped"

    def refused(self, error: BaseException) -> None:
        if self.waiting and not self._acked:
            self.refusal = error  # raised by the waiting deliver: nothing was queued
            self.ack()
        self.finish(None, error)

    def finish(self, value: Any, error: BaseException | None) -> None:
        """The outcome arrived (or the host was lost): answer once the items are out."""
        if self.outcome is not None or self._reply is None:
            return
        self._acked = True
        if self._acked_event is not None:
            self._acked_event.set()
        if self._items_changed is None:
            reply, self._reply = self._reply, None  # answered: see __init__
            self.outcome = _ANSWERED
            if error is None:
                reply.succeed(value)
            else:
                reply.fail(error)
        else:
            self.outcome = (value, error)
            self._ended = True
            self._items_changed.set()

    def item(self, value: Any) -> None:
        """A streamed item arrived (the host may send `window` ahead of consumption).

        Raises:
            InvalidMessage: this envelope is not streamed, or the host sent
                more than its credit allows.
        """
        if self._items is None or self._items_changed is None:
            raise InvalidMessage([("answer.item", "a stream item for a command not streamed")])
        if len(self._items) >= 2 * self.window:  # an honest host stays within one window
            raise InvalidMessage([("answer.item", f"more items than the {self.window} credited")])
        if self.outcome is None:
            self._items.append(value)
            self._items_changed.set()

    def _answer(self) -> None:
        assert self.outcome is not None
        value, error = self.outcome
        reply, self._reply = self.reply, None  # answered: see __init__
        if error is None:
            reply.succeed(value)
        else:
            reply.fail(error)

    async def forward(self) -> None:
        """Feed the stream's items to its consumer, then answer (a task per stream)."""
        stream, items = self.reply.stream, self._items
        assert stream is not None and items is not None
        try:
            while True:
                while not items and not self._ended:
                    self._items_changed = trio.Event()
                    await self._items_changed.wait()
                if not items:
                    break
                try:
                    await stream.send(items.popleft())
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    items.clear()  # the consumer left; the host hears close or cancel
                    while not self._ended:
                        self._items_changed = trio.Event()
                        await self._items_changed.wait()
                    break
                self._owed += 1
                if self._owed >= max(1, self.window // 2):
                    self.link.push({"k": "credit", "id": self.id, "n": self._owed})
                    self._owed = 0
        finally:
            stream.close()
            if self.outcome is not None:
                self._answer()


def check_work(command: Any) -> WorkCommand:
    """``command`` if it can be sent to a remote branch."""
    if not isinstance(command, Command):
        raise TypeError(
            f"expected a pride command (Chat, Operate, ...), got {type(command).__name__}"
        )
    if not isinstance(command, WorkCommand):
        raise TypeError(
            f"{type(command).__name__} is a supervisor's message; a remote branch takes work "
            "commands only (its host's session supervises it)"
        )
    return command
