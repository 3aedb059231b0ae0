"""The two-lane mailbox and the handles callers hold on what they sent.

Work commands travel through a bounded FIFO with a channel's contract, so a
full mailbox makes [`send`][pride.send] wait (backpressure) and
[`send_nowait`][pride.send_nowait] raise [`MailboxFull`][pride.MailboxFull]. Priority
commands (``Attach``, ``Detach``, ``Stop``) go to a separate queue that the
actor drains before taking the next work item.

The bound counts live work: an envelope dropped by its caller gives its
room back at once (and is skipped when its turn would come).

When a branch stops, every envelope still queued (and every sender still
waiting for room) is answered with [`BranchClosed`][pride.BranchClosed]: nothing is
dropped silently.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import attrs
import outcome
import trio

from ..errors import BranchClosed, MailboxFull, ReplyConsumedError, TurnCancelled
from ..messages import Command
from . import instrument
from .budget import carried_allowance
from .riders import carried_rider
from .waits import check_wait_allowed, record_wait, remove_wait

if TYPE_CHECKING:
    from .target import Canceller, Target

__all__ = ["Holder", "Mailbox", "MailboxStatistics", "Reply", "ReplyConsumedError", "ReplyState"]

log = logging.getLogger("pride.mailbox")

ReplyState = Literal["queued", "running", "done", "dropped"]


class Reply:
    """The envelope of one sent command, and its caller's handle on it.

    The caller's side: ``turn_id`` is None until the turn starts (and stays
    None for commands that are not model turns). ``await reply.result()``
    returns the command's result or raises its exception; a reply delivers
    its outcome once, like trio's ``outcome`` values, and a second
    ``result()`` raises [`ReplyConsumedError`][pride.ReplyConsumedError].
    ``cancel()``
    gives up on the command.

    The serving side (a [`Target`][pride.Target]): ``start``, ``stream``,
    ``succeed`` and ``fail``; see [`pride.actors.target`][pride.actors.target].

    Attributes:
        branch: the target the command was sent to.
        command: the command.
        tag: the sender's label for the envelope (a str, an int or None), kept
            with its turn in the turn journal and given back when the turn is
            resumed after a restart (``pride run`` tags with its request id).
        trace: the sender's trace context (W3C ``traceparent`` and friends, as
            plain strings) when tracing is on, else None; the turn's span is a
            child of it. A target carrying the envelope to another process
            carries this along.
        allowance: an allowance the command's turn draws on besides its
            branch's and session's (a flow's budget), taken from the sender's
            `drawing_on` block when the envelope is made; None mostly.
        rider: the sender's record of the outcome, committed with the turn
            (`pride.actors.riders`), taken from its `riding` block; None mostly.
    """

    __slots__ = (
        "_cancel_reason",
        "_cancel_scope",
        "_consumed",
        "_done",
        "_error",
        "_queued_in",
        "_result",
        "_stream",
        "allowance",
        "branch",
        "command",
        "rider",
        "state",
        "tag",
        "trace",
        "turn_id",
        "waiting_tasks",
    )

    def __init__(
        self,
        target: Target,
        command: Command,
        *,
        stream: trio.MemorySendChannel[Any] | None = None,
        tag: str | int | None = None,
    ) -> None:
        self.branch = target
        self.command = command
        self.tag = tag
        self.allowance = carried_allowance()
        self.rider = carried_rider()
        self.state: ReplyState = "queued"
        self.turn_id: UUID | None = None
        self._done = False
        # Tasks parked until the outcome arrives (usually the one caller; None
        # until someone waits, as most replies are answered before anyone does).
        self.waiting_tasks: list[trio.lowlevel.Task] | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._consumed = False
        self._cancel_scope: Canceller | None = None
        self._cancel_reason: str | None = None
        self._stream = stream
        # What holds this reply queued (a mailbox's work lane, or a remote target's
        # record of it) until it starts: told when the caller drops it.
        self._queued_in: Holder | None = None
        self.trace: instrument.Carrier | None = instrument.envelope_trace(command.lane)

    def __repr__(self) -> str:
        return (
            f"<Reply {type(self.command).__name__} to {self.branch.name!r} "
            f"{self.state} turn_id={self.turn_id}>"
        )

    @property
    def done(self) -> bool:
        """True once the command has an outcome (result, error or cancellation)."""
        return self._done

    @property
    def stream(self) -> trio.MemorySendChannel[Any] | None:
        """Where a streamed command's items go (None unless sent by [`stream`][pride.stream]).

        The serving side sends each item and closes it when the turn ends.
        """
        return self._stream

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

        Cancelling the wait does not cancel the command; use
        [`cancel`][pride.actors.mailbox.Reply.cancel].
        """
        if self._consumed:
            raise ReplyConsumedError(f"{self!r}: result() already delivered its outcome")
        if not self._done:
            waiter = check_wait_allowed(self.branch)
            if waiter is None:  # the caller serves no branch: no deadlock possible
                # wait_done(), without its coroutine: this is every ask's wait.
                await trio.lowlevel.wait_task_rescheduled(self._park())
            else:
                record_wait(waiter, self.branch)
                try:
                    await self.wait_done()
                finally:
                    remove_wait(waiter, self.branch)
        self._consumed = True
        if self._error is not None:
            raise self._error
        return self._result

    def cancel(self, reason: str = "caller") -> None:
        """Give up on the command. Idempotent; never blocks.

        A queued command is dropped: it never starts (no RunStart, no
        messages) and ``result()`` raises [`TurnCancelled`][pride.TurnCancelled]. A
        running turn is cancelled and finalised by its actor (terminal
        ``RunFailed``). A finished command is unaffected.
        """
        if self.state == "queued":
            self.state = "dropped"
            self._cancel_reason = reason
            mailbox, self._queued_in = self._queued_in, None
            if mailbox is not None:
                mailbox.forget_dropped()
            self.fail(TurnCancelled(reason, "dropped before it started"))
        elif self.state == "running" and self._cancel_reason is None:
            self._cancel_reason = reason
            if self._cancel_scope is not None:
                self._cancel_scope.cancel()

    # ------------------------------------------------------- actor side

    def hold(self, holder: Holder) -> None:
        """Note that ``holder`` keeps the envelope queued (called by the target).

        If the caller drops the envelope before it starts,
        ``holder.forget_dropped()`` is called, so the target can let it go: a
        mailbox gives its room back, a remote target tells its host.
        """
        self._queued_in = holder

    def start(self, turn_id: UUID | None, cancel_scope: Canceller | None) -> None:
        """Mark the command running (called by the target serving it).

        ``cancel_scope.cancel()`` is called when the caller gives up from now
        on (at once if it already has).
        """
        self.state = "running"
        self.turn_id = turn_id
        self._cancel_scope = cancel_scope
        if self._cancel_reason is not None and cancel_scope is not None:
            cancel_scope.cancel()

    async def wait_done(self) -> None:
        """Wait until the command has an outcome, without taking it.

        Cancellation: a cancelled wait leaves the command as it was.
        """
        if self._done:
            await trio.lowlevel.checkpoint()
            return
        await trio.lowlevel.wait_task_rescheduled(self._park())

    def _park(self) -> Callable[[Any], trio.lowlevel.Abort]:
        """Note the calling task as waiting for the outcome; returns its abort function.

        The task is parked directly on trio's scheduler (what trio.Event does
        underneath, without the event and parking-lot objects a reply would
        otherwise carry), with ``wait_task_rescheduled`` right after this.
        """
        task = trio.lowlevel.current_task()
        if self.waiting_tasks is None:
            self.waiting_tasks = []
        self.waiting_tasks.append(task)

        def abort(_: Any) -> trio.lowlevel.Abort:
            if self.waiting_tasks is not None and task in self.waiting_tasks:
                self.waiting_tasks.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        return abort

    def _finish(self) -> None:
        self._done = True
        tasks, self.waiting_tasks = self.waiting_tasks, None
        for task in tasks or ():
            trio.lowlevel.reschedule(task)

    def succeed(self, result: Any) -> None:
        """Deliver a result (called by the actor)."""
        if not self._done:
            self._result = result
            self.state = "done"
            self._finish()

    def fail(self, error: BaseException) -> None:
        """Deliver an error (called by the actor, or by a dropping caller)."""
        if not self._done:
            self._error = error
            if self.state != "dropped":
                self.state = "done"
            self._finish()


class Holder(Protocol):
    """What keeps a queued envelope (see [`Reply.hold`][pride.actors.mailbox.Reply.hold])."""

    def forget_dropped(self) -> None: ...


@attrs.frozen
class MailboxStatistics:
    """A snapshot of a mailbox (see
    [`Mailbox.statistics`][pride.actors.mailbox.Mailbox.statistics])."""

    queued: int
    priority_queued: int
    capacity: int
    closed: bool


class Mailbox:
    """A branch's two lanes: a bounded FIFO of work, an unbounded priority queue.

    Built directly on trio's parking primitives rather than on a memory
    channel: a channel's state costs about 1.7 KiB even when empty, and an
    application may keep 100,000 idle branches. The contract is a bounded
    channel's: ``put`` waits while the work lane is full (senders are let in
    first come, first served), ``put_nowait`` raises instead, the actor takes
    items in order, and a cancelled wait leaves the mailbox unchanged.
    """

    __slots__ = (
        "_actor",
        "_dropped",
        "_priority",
        "_senders",
        "_work",
        "capacity",
        "closed",
        "name",
    )

    def __init__(self, name: str, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"mailbox_size must be at least 1, got {capacity}")
        self.name = name
        self.capacity = capacity
        # Both queues are created on first use: an idle mailbox holds no deque.
        self._work: collections.deque[Reply] | None = None
        # Replies in ``_work`` whose callers gave up: they hold no room, and
        # the actor skips them (see forget_dropped).
        self._dropped = 0
        self._priority: collections.deque[Reply] | None = None
        # Senders waiting for room, in arrival order: task -> its reply.
        self._senders: dict[trio.lowlevel.Task, Reply] | None = None
        # The actor's task while it waits for an item.
        self._actor: trio.lowlevel.Task | None = None
        self.closed = False

    def statistics(self) -> MailboxStatistics:
        """Queued work and priority items, capacity, and whether it is closed."""
        return MailboxStatistics(
            queued=self._live_work() + len(self._senders or ()),
            priority_queued=len(self._priority or ()),
            capacity=self.capacity,
            closed=self.closed,
        )

    # ---------------------------------------------------------- callers

    def _live_work(self) -> int:
        return len(self._work or ()) - self._dropped

    def _enqueue(self, reply: Reply) -> None:
        if self._work is None:
            self._work = collections.deque()
        self._work.append(reply)
        reply._queued_in = self
        self._wake_actor()

    def forget_dropped(self) -> None:
        """A queued work item was dropped by its caller: give its room back.

        The reply stays in the queue (removing it from the middle would cost
        O(n) per drop) until the actor skips it or the queue is compacted; it
        no longer counts against the capacity, so the longest-waiting sender,
        if any, is let in at once.
        """
        self._dropped += 1
        work = self._work
        assert work is not None
        if self._dropped > 32 and 2 * self._dropped > len(work):
            # Mostly dead entries (callers giving up behind a long turn): compact,
            # so the queue stays proportional to the live work.
            self._work = collections.deque(reply for reply in work if reply.state != "dropped")
            self._dropped = 0
        self._admit_senders()

    def _admit_senders(self) -> None:
        senders = self._senders
        while senders and self._live_work() < self.capacity:
            task, waiting = next(iter(senders.items()))
            del senders[task]
            if waiting.state != "dropped":  # given up while waiting: nothing to queue
                self._enqueue(waiting)
            trio.lowlevel.reschedule(task)

    def _wake_actor(self) -> None:
        actor = self._actor
        if actor is not None:
            self._actor = None
            trio.lowlevel.reschedule(actor)

    def offer(self, reply: Reply) -> bool:
        """Queue work if there is room now; False (nothing queued) when there is none.

        Raises:
            BranchClosed: the branch has stopped.
        """
        if self.closed:
            raise BranchClosed(self.name)
        if self._senders or len(self._work or ()) - self._dropped >= self.capacity:
            return False  # full, or senders wait ahead of it (first come, first served)
        self._enqueue(reply)
        return True

    def put_nowait(self, reply: Reply) -> None:
        """Queue work without waiting.

        Raises:
            MailboxFull: the work lane holds ``capacity`` envelopes.
            BranchClosed: the branch has stopped.
        """
        if not self.offer(reply):
            raise MailboxFull(self.name, self.capacity)

    async def put(self, reply: Reply, *, checkpoint: bool = True) -> None:
        """Queue work, waiting for room while the mailbox is full.

        With ``checkpoint=False`` a put that finds room returns without a
        checkpoint (for callers that checkpoint right after, like ``ask``).

        Raises:
            BranchClosed: the branch has stopped (or stopped while waiting).

        Cancellation: a put cancelled while waiting for room queued nothing.
        """
        if checkpoint:
            await trio.lowlevel.checkpoint_if_cancelled()
        if self.offer(reply):
            if checkpoint:
                await trio.lowlevel.cancel_shielded_checkpoint()
            return
        task = trio.lowlevel.current_task()
        if self._senders is None:
            self._senders = {}
        self._senders[task] = reply

        def abort(_: Any) -> trio.lowlevel.Abort:
            if self._senders is not None:
                self._senders.pop(task, None)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def put_priority(self, reply: Reply, *, first: bool = False) -> None:
        """Queue a system message; it is served before the next work item.

        Raises:
            BranchClosed: the branch has stopped.
        """
        if self.closed:
            raise BranchClosed(self.name)
        if self._priority is None:
            self._priority = collections.deque()
        if first:
            self._priority.appendleft(reply)
        else:
            self._priority.append(reply)
        self._wake_actor()

    # ------------------------------------------------------------ actor

    async def next(self) -> Reply:
        """The next item to serve: priority first, then work in order.

        Always yields once (the actor's fairness checkpoint between items).

        Cancellation: a cancelled wait takes nothing from the mailbox.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            item = self._take()
            if item is not None:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return item
            if self.closed:
                raise BranchClosed(self.name)
            if self._work is not None and not self._work:
                # Idle: give the empty deque back (~760 bytes per idle member
                # of a session); the next item makes a new one.
                self._work = None
            self._actor = trio.lowlevel.current_task()
            # A bound method, not a closure: it is held while the actor is idle.
            await trio.lowlevel.wait_task_rescheduled(self._abort_next)
            item = self._take()
            if item is not None:
                return item

    def _abort_next(self, _: Any) -> trio.lowlevel.Abort:
        self._actor = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _take(self) -> Reply | None:
        priority = self._priority
        if priority:
            item = priority.popleft()
            if not priority:  # system messages are rare: keep no empty deque
                self._priority = None
            return item
        work = self._work
        while work:
            item = work.popleft()
            if item.state == "dropped":  # its room was given back when it was dropped
                self._dropped -= 1
                continue
            item._queued_in = None
            if self._senders:  # room for the longest-waiting sender
                self._admit_senders()
            return item
        return None

    def close(self) -> list[Reply]:
        """Refuse further sends and return every envelope still queued.

        Senders waiting for room get BranchClosed; their envelopes are
        returned too, so every one of them is answered.
        """
        self.closed = True
        pending = [*(self._priority or ()), *(self._work or ())]
        for reply in pending:
            reply._queued_in = None
        self._priority = self._work = None
        self._dropped = 0
        senders, self._senders = self._senders or {}, None
        for task, reply in senders.items():
            pending.append(reply)
            trio.lowlevel.reschedule(task, outcome.Error(BranchClosed(self.name)))
        self._wake_actor()
        return pending
