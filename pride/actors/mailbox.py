"""The two-lane mailbox: where a branch's envelopes wait to be served.

Work commands travel through a bounded FIFO with a channel's contract, so a
full mailbox makes [`send`][pride.send] wait (backpressure) and
[`send_nowait`][pride.send_nowait] raise [`MailboxFull`][pride.MailboxFull]. Priority
commands (``Attach``, ``Detach``, ``Stop``) go to a separate queue that the
actor drains before taking the next work item. The actor yields only every
`YIELD_EVERY` items while work is waiting, so a system message sent by another
task is queued once it yields; from then on it is taken right after the item in
hand, before the rest of the queue (tests/actors/test_mailbox.py, "full mailbox
of acts").

The bound counts live work: an envelope dropped by its caller gives its
room back at once (and is skipped when its turn would come).

When a branch stops, every envelope still queued (and every sender still
waiting for room) is answered with [`BranchClosed`][pride.BranchClosed]: nothing is
dropped silently.

The envelopes themselves, and the handles callers hold on them, are
[`Reply`][pride.actors.reply.Reply] (`pride.actors.reply`).
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable
from typing import Any

import attrs
import outcome
import trio

from ..errors import BranchClosed, MailboxFull
from .reply import Reply

__all__ = ["Mailbox", "MailboxStatistics"]

log = logging.getLogger("pride.mailbox")

YIELD_EVERY = 16
"""Items the actor may take in a row, each found waiting, before it yields to the
other tasks of its loop (see `Mailbox.next`)."""


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
        "_run",
        "_senders",
        "_work",
        "capacity",
        "closed",
        "name",
    )

    answers_cancel = False
    """A dropped item is dropped here and now (see `pride.actors.reply.Holder`)."""

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
        # Senders waiting for room, in arrival order: each one's reply -> the task
        # waiting to queue it (None for a reply lined up without one: `line_up`).
        self._senders: dict[Reply, trio.lowlevel.Task | None] | None = None
        # The actor's task while it waits for an item.
        self._actor: trio.lowlevel.Task | None = None
        # Items taken in a row without yielding (see `next`).
        self._run = 0
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
            waiting, task = next(iter(senders.items()))
            del senders[waiting]
            if waiting.state != "dropped":  # given up while waiting: nothing to queue
                self._enqueue(waiting)
            if task is not None:
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
        if self._senders is None:
            self._senders = {}
        self._senders[reply] = trio.lowlevel.current_task()

        def abort(_: Any) -> trio.lowlevel.Abort:
            self._leave_line(reply)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def line_up(self, reply: Reply) -> None:
        """Queue work now, or put it in line for room without a task waiting.

        For a caller that learns of the outcome from the reply itself (its done
        callback: ``pride.aio`` answers asyncio callers so) rather than in a
        trio task: the envelope takes its place among the senders waiting for
        room, first come, first served, and is queued when its turn comes. It
        costs what a waiting ``put`` costs, minus the task. Dropped by its
        caller, it leaves the line at once; when the branch stops it is
        answered with BranchClosed, like every sender still waiting.

        No backpressure reaches the caller: it is for callers that wait for
        the outcome anyway (one envelope in line each), never for ``send``.

        Raises:
            BranchClosed: the branch has stopped.
        """
        if self.offer(reply):
            return
        if self._senders is None:
            self._senders = {}
        self._senders[reply] = None
        reply.hold(_Held(self._leave_line, reply))

    def _leave_line(self, reply: Reply) -> None:
        if self._senders is not None:
            self._senders.pop(reply, None)

    def _leave_priority(self, reply: Reply) -> None:
        # O(n) in the priority queue, which holds a few system messages at most.
        priority = self._priority
        if priority is not None and reply in priority:
            priority.remove(reply)
            if not priority:
                self._priority = None

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
        reply.hold(_Held(self._leave_priority, reply))
        self._wake_actor()

    # ------------------------------------------------------------ actor

    async def next(self) -> Reply:
        """The next item to serve: priority first, then work in order.

        Always a cancellation point. It yields to the loop's other tasks
        (the actor's fairness checkpoint) when it waits for an item, and
        otherwise at least once every `YIELD_EVERY` items: a full mailbox of
        short items (an ``Act`` without calls never yields by itself) is
        served without a scheduling round per item, which cost a loop about a
        third of such an item's time, while every other task (and the loop's
        I/O) still runs after at most `YIELD_EVERY` of them.

        Cancellation: a cancelled wait takes nothing from the mailbox.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            item = self._take()
            if item is not None:
                self._run += 1
                if self._run >= YIELD_EVERY:
                    self._run = 0
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
            self._run = 0  # it just yielded
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
            item._queued_in = None
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
        queued, refused = self.close_apart()
        return [*queued, *refused]

    def close_apart(self) -> tuple[list[Reply], list[Reply]]:
        """`close`, keeping apart the envelopes that were queued (priority items
        first, then work, in order) from those of the senders still waiting for
        room (refused: their ``send`` raises BranchClosed)."""
        self.closed = True
        queued = [*(self._priority or ()), *(self._work or ())]
        for reply in queued:
            reply._queued_in = None
        self._priority = self._work = None
        self._dropped = 0
        senders, self._senders = self._senders or {}, None
        refused = []
        for reply, task in senders.items():
            refused.append(reply)
            if task is not None:
                trio.lowlevel.reschedule(task, outcome.Error(BranchClosed(self.name)))
        self._wake_actor()
        return queued, refused


class _Held:
    """The holder of a reply queued outside the work lane (in the senders' line, by
    `Mailbox.line_up`, or in the priority queue): dropped by its caller (an ask that
    timed out), it leaves at once, through ``leave``."""

    __slots__ = ("_leave", "_reply")

    answers_cancel = False

    def __init__(self, leave: Callable[[Reply], None], reply: Reply) -> None:
        self._leave = leave
        self._reply = reply

    def forget_dropped(self) -> None:
        self._leave(self._reply)
