"""The two-lane mailbox and the handles callers hold on what they sent.

Work commands travel through a bounded trio memory channel, so a full
mailbox makes :func:`~pride.send` wait (backpressure) and
:func:`~pride.send_nowait` raise :class:`~pride.MailboxFull`. Priority
commands (``Attach``, ``Detach``, ``Stop``) go to a separate queue that the
actor drains before taking the next work item. To wake an idle actor, a
priority send also drops a wake-up token into the work channel when there is
room; when there is none, the actor has work queued and will look at the
priority queue before taking it, so no token is needed.

When a branch stops, the envelopes still queued are answered with
:class:`~pride.BranchClosed` before the channel closes: trio discards
buffered items when the receiving end closes, so the mailbox drains first.
"""

from __future__ import annotations

import collections
import contextlib
import logging
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import attrs
import trio

from ..errors import BranchClosed, MailboxFull, PrideError, TurnCancelled
from ..messages import Command
from .waits import add_wait, check_wait_allowed, remove_wait

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["Mailbox", "MailboxStatistics", "Reply", "ReplyConsumedError", "ReplyState"]

log = logging.getLogger("pride.mailbox")

ReplyState = Literal["queued", "running", "done", "dropped"]


class ReplyConsumedError(PrideError, RuntimeError):
    """``Reply.result()`` was awaited again after it had delivered its outcome."""


class Reply:
    """The handle on one sent command: its turn id, its result, its cancellation.

    ``turn_id`` is None until the turn starts (and stays None for commands that
    are not model turns). ``await reply.result()`` returns the command's result
    or raises its exception; a reply delivers its outcome once, like trio's
    ``outcome`` values, and a second ``result()`` raises ``RuntimeError``.
    """

    __slots__ = (
        "_cancel_reason",
        "_cancel_scope",
        "_consumed",
        "_done",
        "_error",
        "_result",
        "_stream",
        "branch",
        "command",
        "state",
        "turn_id",
        "waiter",
    )

    def __init__(self, branch: Branch, command: Command) -> None:
        self.branch = branch
        self.command = command
        self.state: ReplyState = "queued"
        self.turn_id: UUID | None = None
        self._done = trio.Event()
        self._result: Any = None
        self._error: BaseException | None = None
        self._consumed = False
        self._cancel_scope: trio.CancelScope | None = None
        self._cancel_reason: str | None = None
        self._stream: trio.MemorySendChannel[Any] | None = None
        # The branch whose turn waits on this reply (for deadlock detection).
        self.waiter: Branch | None = None

    def __repr__(self) -> str:
        return (
            f"<Reply {type(self.command).__name__} to {self.branch.name!r} "
            f"{self.state} turn_id={self.turn_id}>"
        )

    @property
    def done(self) -> bool:
        """True once the command has an outcome (result, error or cancellation)."""
        return self._done.is_set()

    @property
    def cancel_reason(self) -> str | None:
        """Why the command was cancelled, if it was."""
        return self._cancel_reason

    async def result(self) -> Any:
        """Wait for the outcome; return the result or raise the command's error.

        Raises:
            TurnCancelled: the command was cancelled (by the caller, a restart
                or a shutdown) before it finished.
            BranchClosed: the branch stopped before serving it.
            ReentrancyError: waiting would deadlock (the calling turn's own
                branch, or a branch waiting on it, must serve this command).
            RuntimeError: the outcome was already delivered by an earlier call.
            Exception: whatever the command itself raised.

        Cancelling the wait does not cancel the command; use :meth:`cancel`.
        """
        if self._consumed:
            raise ReplyConsumedError(f"{self!r}: result() already delivered its outcome")
        if not self._done.is_set():
            check_wait_allowed(self.branch)
            waiter = add_wait(self.branch)
            try:
                await self._done.wait()
            finally:
                remove_wait(waiter, self.branch)
        self._consumed = True
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self, reason: str = "caller") -> None:
        """Give up on the command. Idempotent; never blocks.

        A queued command is dropped: it never starts (no RunStart, no
        messages) and ``result()`` raises :class:`~pride.TurnCancelled`. A
        running turn is cancelled and finalised by its actor (terminal
        ``RunFailed``). A finished command is unaffected.
        """
        if self.state == "queued":
            self.state = "dropped"
            self._cancel_reason = reason
            self.fail(TurnCancelled(reason, "dropped before it started"))
        elif self.state == "running" and self._cancel_reason is None:
            self._cancel_reason = reason
            if self._cancel_scope is not None:
                self._cancel_scope.cancel()

    # ------------------------------------------------------- actor side

    def start(self, turn_id: UUID | None, cancel_scope: trio.CancelScope | None) -> None:
        """Mark the command running (called by the actor)."""
        self.state = "running"
        self.turn_id = turn_id
        self._cancel_scope = cancel_scope
        if self._cancel_reason is not None and cancel_scope is not None:
            cancel_scope.cancel()

    def succeed(self, result: Any) -> None:
        """Deliver a result (called by the actor)."""
        if not self._done.is_set():
            self._result = result
            self.state = "done"
            self._done.set()

    def fail(self, error: BaseException) -> None:
        """Deliver an error (called by the actor, or by a dropping caller)."""
        if not self._done.is_set():
            self._error = error
            if self.state != "dropped":
                self.state = "done"
            self._done.set()


# A wake-up token: tells an idle actor to look at its priority queue.
_WAKE: Any = object()


@attrs.frozen
class MailboxStatistics:
    """A snapshot of a mailbox (see :meth:`Mailbox.statistics`)."""

    queued: int
    priority_queued: int
    capacity: int
    closed: bool


class Mailbox:
    """A branch's two lanes: bounded work channel, unbounded priority queue."""

    __slots__ = ("_priority", "_receive", "_send", "capacity", "closed", "name")

    def __init__(self, name: str, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {capacity}")
        self.name = name
        self.capacity = capacity
        self._send, self._receive = trio.open_memory_channel[Reply](capacity)
        self._priority: collections.deque[Reply] = collections.deque()
        self.closed = False

    def statistics(self) -> MailboxStatistics:
        """Queued work and priority items, capacity, and whether it is closed."""
        return MailboxStatistics(
            queued=self._send.statistics().current_buffer_used,
            priority_queued=len(self._priority),
            capacity=self.capacity,
            closed=self.closed,
        )

    # ---------------------------------------------------------- callers

    def put_nowait(self, reply: Reply) -> None:
        """Queue work without waiting.

        Raises:
            MailboxFull: the work lane holds ``capacity`` envelopes.
            BranchClosed: the branch has stopped.
        """
        if self.closed:
            raise BranchClosed(self.name)
        try:
            self._send.send_nowait(reply)
        except trio.WouldBlock:
            raise MailboxFull(self.name, self.capacity) from None
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise BranchClosed(self.name) from None

    async def put(self, reply: Reply, *, checkpoint: bool = True) -> None:
        """Queue work, waiting for room while the mailbox is full.

        With ``checkpoint=False`` a put that finds room returns without a
        checkpoint (for callers that checkpoint right after, like ``ask``).

        Raises:
            BranchClosed: the branch has stopped (or stopped while waiting).
        """
        if self.closed:
            raise BranchClosed(self.name)
        try:
            if not checkpoint:
                try:
                    self._send.send_nowait(reply)
                except trio.WouldBlock:
                    pass
                else:
                    return
            await self._send.send(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise BranchClosed(self.name) from None

    def put_priority(self, reply: Reply, *, first: bool = False) -> None:
        """Queue a system message; it is served before the next work item.

        Raises:
            BranchClosed: the branch has stopped.
        """
        if self.closed:
            raise BranchClosed(self.name)
        if first:
            self._priority.appendleft(reply)
        else:
            self._priority.append(reply)
        with contextlib.suppress(trio.WouldBlock):
            self._send.send_nowait(_WAKE)

    # ------------------------------------------------------------ actor

    async def next(self) -> Reply:
        """The next item to serve: priority first, then work in order."""
        while True:
            if self._priority:
                return self._priority.popleft()
            try:
                item = self._receive.receive_nowait()
            except trio.WouldBlock:
                item = await self._receive.receive()
            if item is not _WAKE:
                return item

    def close(self) -> list[Reply]:
        """Refuse further sends and return every envelope still queued.

        Draining happens before the channel closes, so nothing buffered is
        discarded; senders blocked on a full mailbox get BranchClosed.
        """
        self.closed = True
        pending = list(self._priority)
        self._priority.clear()
        while True:
            try:
                item = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.ClosedResourceError, trio.EndOfChannel):
                break
            if item is not _WAKE:
                pending.append(item)
        self._receive.close()
        self._send.close()
        return pending
