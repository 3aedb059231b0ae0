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
from typing import TYPE_CHECKING, Any
from uuid import UUID

import trio

from ..actors import Reply
from ..errors import InvalidMessage
from ..messages import Command, WorkCommand, new_id

if TYPE_CHECKING:
    from ._link import Link

__all__ = ["Envelope", "check_work"]


class Envelope:
    """The link's record of one envelope sent to a host, from submission to outcome.

    It is the envelope's holder while queued (a caller dropping it sends a
    cancel), its canceller once running, and, for a streamed command, the
    forwarder of its items into the caller's zero-buffer stream channel,
    returning one credit to the host per item consumed.
    """

    __slots__ = (
        "_ended",
        "_items",
        "_items_changed",
        "_owed",
        "acked",
        "branch",
        "id",
        "link",
        "outcome",
        "refusal",
        "reply",
        "waiting",
        "window",
    )

    def __init__(self, link: Link, reply: Reply, branch: str, *, window: int = 0) -> None:
        self.link = link
        self.reply = reply
        self.branch = branch
        self.id = new_id().hex
        self.window = window
        self.waiting = False  # the deliverer waits for the host's ack
        self.acked = trio.Event()
        self.refusal: BaseException | None = None
        self.outcome: tuple[Any, BaseException | None] | None = None
        self._items: collections.deque[Any] = collections.deque()
        self._items_changed = trio.Event()
        self._ended = False
        self._owed = 0

    # ------------------------------------------------------------ caller side

    def forget_dropped(self) -> None:
        """The caller dropped the queued envelope: tell the host."""
        self._cancel()

    def cancel(self) -> None:
        """The caller gave up on the running command: tell the host."""
        self._cancel()

    def _cancel(self) -> None:
        if self.reply.stream is not None and self.reply.cancel_reason == "stream_closed":
            self.link.push({"k": "close", "id": self.id})  # a clean end: the turn finalises
        else:
            self.link.push({"k": "cancel", "id": self.id})

    # ------------------------------------------------------------ host side

    def started(self, turn_id: UUID | None) -> None:
        if not self.reply.done:
            self.reply.start(turn_id, self)

    def refused(self, error: BaseException) -> None:
        if self.waiting and not self.acked.is_set():
            self.refusal = error  # raised by the waiting deliver: nothing was queued
            self.acked.set()
        self.finish(None, error)

    def finish(self, value: Any, error: BaseException | None) -> None:
        """The outcome arrived (or the host was lost): answer once the items are out."""
        if self.outcome is not None:
            return
        self.outcome = (value, error)
        self.acked.set()
        if self.reply.stream is None:
            self._answer()
        else:
            self._ended = True
            self._items_changed.set()

    def item(self, value: Any) -> None:
        """A streamed item arrived (the host may send `window` ahead of consumption).

        Raises:
            InvalidMessage: this envelope is not streamed, or the host sent
                more than its credit allows.
        """
        if self.reply.stream is None:
            raise InvalidMessage([("answer.item", "a stream item for a command not streamed")])
        if len(self._items) >= 2 * self.window:  # an honest host stays within one window
            raise InvalidMessage([("answer.item", f"more items than the {self.window} credited")])
        if self.outcome is None:
            self._items.append(value)
            self._items_changed.set()

    def _answer(self) -> None:
        assert self.outcome is not None
        value, error = self.outcome
        if error is None:
            self.reply.succeed(value)
        else:
            self.reply.fail(error)

    async def forward(self) -> None:
        """Feed the stream's items to its consumer, then answer (a task per stream)."""
        stream = self.reply.stream
        assert stream is not None
        try:
            while True:
                while not self._items and not self._ended:
                    self._items_changed = trio.Event()
                    await self._items_changed.wait()
                if not self._items:
                    break
                try:
                    await stream.send(self._items.popleft())
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._items.clear()  # the consumer left; the host hears close or cancel
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
