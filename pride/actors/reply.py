"""The envelope of one sent command, and the handle its caller holds on it.

A [`Reply`][pride.actors.reply.Reply] is made by the send API for every
command sent, travels through the target's mailbox (or across a process, for
a remote target), and is answered once: the serving side starts it, may
stream items through it, and succeeds or fails it; the caller waits on
``result()`` or gives up with ``cancel()``. A caller that gives up on a
queued envelope tells its `Holder` (the mailbox), which gives the room back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Literal, Protocol
from uuid import UUID

import trio

from ..budget.allowance import carried_allowance
from ..errors import ReplyConsumedError, TurnCancelled
from ..messages import Command
from . import instrument
from .riders import carried_rider
from .waits import Party, check_wait_allowed, record_wait, remove_wait

__all__ = ["Canceller", "Holder", "Reply", "ReplyConsumedError", "ReplyState"]

log = logging.getLogger("pride.actor")

ReplyState = Literal["queued", "running", "done", "dropped"]


class Canceller(Protocol):
    """What cancels a command once it runs (a `trio.CancelScope` is one)."""

    def cancel(self) -> None: ...


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
        "_callbacks",
        "_cancel_reason",
        "_cancel_scope",
        "_consumed",
        "_done",
        "_error",
        "_queued_in",
        "_result",
        "_stream",
        "_waiter",
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
        target: Party,
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
        # Tasks parked until the outcome arrives: usually the one caller, kept in
        # ``_waiter``; any others in ``waiting_tasks`` (None until a second waits).
        self._waiter: trio.lowlevel.Task | None = None
        self.waiting_tasks: list[trio.lowlevel.Task] | None = None
        # Functions called with this reply once it is done (None until one is added).
        self._callbacks: list[Callable[[Reply], object]] | None = None
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
        [`cancel`][pride.actors.reply.Reply.cancel].
        """
        return await self._result_for(None if self._done else check_wait_allowed(self.branch))

    async def _result_for(self, waiter: Party | None) -> Any:
        """`result` for a caller whose deadlock check is done (`pride.actors.send.ask`
        checks before it delivers): while it waits, ``waiter`` (the branch whose
        turn waits, None for a caller outside any turn) is recorded as waiting on
        this reply's branch."""
        if self._consumed:
            raise ReplyConsumedError(f"{self!r}: result() already delivered its outcome")
        if not self._done:
            if waiter is None:  # nothing to record: no wait of the caller can deadlock
                await trio.lowlevel.wait_task_rescheduled(self._park())
            else:
                branch = self.branch
                record_wait(waiter, branch)
                try:
                    await trio.lowlevel.wait_task_rescheduled(self._park())
                finally:
                    remove_wait(waiter, branch)
        return self._take()

    def take_result(self) -> Any:
        """The outcome of a done command, taken without waiting: its result, or its error raised.

        For code that learns of the outcome through `add_done_callback`
        instead of waiting in trio (``pride.aio`` answers asyncio callers so).
        Like `result`, it delivers the outcome once.

        Raises:
            RuntimeError: the command is not done yet.
            ReplyConsumedError: the outcome was already delivered.
            Exception: whatever the command raised (as `result` raises it).
        """
        if not self._done:
            raise RuntimeError(f"{self!r}: take_result() before the command is done")
        if self._consumed:
            raise ReplyConsumedError(f"{self!r}: the outcome was already delivered")
        return self._take()

    def _take(self) -> Any:
        """Deliver the outcome of a done command not consumed yet (both checked by the caller)."""
        self._consumed = True
        error = self._error
        if error is None:
            return self._result
        # Delivered once: the reply lets go of the error, and this frame of its
        # traceback too, so neither keeps the other alive (a reference cycle
        # through every frame the error passed, left to the garbage collector).
        self._error = None
        try:
            raise error
        finally:
            del error

    def add_done_callback(self, callback: Callable[[Reply], object]) -> None:
        """Call ``callback(reply)`` once the command is done: now, if it is already.

        It runs synchronously where the outcome is delivered (in the serving
        task, or in the caller's that dropped a queued command), after the
        tasks waiting in `result` are rescheduled; it must not block. A
        callback that raises is logged, and the others still run.
        """
        if self._done:
            _run_callback(self, callback)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def remove_done_callback(self, callback: Callable[[Reply], object]) -> bool:
        """Take back a callback added with `add_done_callback` (its waiter left);
        True if it was still waiting to be called."""
        callbacks = self._callbacks
        if callbacks is None or callback not in callbacks:
            return False
        callbacks.remove(callback)
        if not callbacks:
            self._callbacks = None
        return True

    def cancel(self, reason: str = "caller") -> None:
        """Give up on the command. Idempotent; never blocks.

        A queued command is dropped: it never starts (no RunStart, no
        messages) and ``result()`` raises [`TurnCancelled`][pride.TurnCancelled]. A
        running turn is cancelled and finalised by its actor (terminal
        ``RunFailed``). A finished command is unaffected.

        A command queued in another process (a remote branch's) may have
        started there already, unknown here: the cancel is passed on, and the
        reply is answered with what happened there (dropped, cancelled, or the
        result of a turn that had finished).
        """
        holder = self._queued_in
        if self.state == "queued" and holder is not None and holder.answers_cancel:
            if self._cancel_reason is None:
                self._cancel_reason = reason
                holder.forget_dropped()
        elif self.state == "queued":
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
        otherwise carry), with ``wait_task_rescheduled`` right after this. The
        usual single waiter costs one bound method, no list or closure: fewer
        objects for the garbage collector to track while thousands of asks wait.
        """
        task = trio.lowlevel.current_task()
        if self._waiter is None:
            self._waiter = task
            return self._abort_waiter
        if self.waiting_tasks is None:
            self.waiting_tasks = []
        self.waiting_tasks.append(task)
        return functools.partial(self._abort_other, task)

    def _abort_waiter(self, _: Any) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _abort_other(self, task: trio.lowlevel.Task, _: Any) -> trio.lowlevel.Abort:
        if self.waiting_tasks is not None and task in self.waiting_tasks:
            self.waiting_tasks.remove(task)
        return trio.lowlevel.Abort.SUCCEEDED

    def _finish(self) -> None:
        self._done = True
        waiter, self._waiter = self._waiter, None
        tasks, self.waiting_tasks = self.waiting_tasks, None
        if waiter is not None:
            trio.lowlevel.reschedule(waiter)
        for task in tasks or ():
            trio.lowlevel.reschedule(task)
        if self._callbacks is not None:  # mostly none: a reply waited on in trio has none
            callbacks, self._callbacks = self._callbacks, None
            for callback in callbacks:
                _run_callback(self, callback)

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


def _run_callback(reply: Reply, callback: Callable[[Reply], object]) -> None:
    try:
        callback(reply)
    except Exception:
        log.exception("a done callback of %r raised; it was ignored", reply)


class Holder(Protocol):
    """What keeps a queued envelope (see [`Reply.hold`][pride.actors.reply.Reply.hold]).

    ``answers_cancel`` False (a mailbox): a caller's cancel drops the envelope at
    once, and ``forget_dropped`` gives its room back. True (a remote target,
    which cannot see whether the envelope has started where it is served):
    ``forget_dropped`` passes the cancel on, and the holder answers the reply.
    """

    answers_cancel: bool

    def forget_dropped(self) -> None: ...
