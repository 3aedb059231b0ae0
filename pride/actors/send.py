"""The send API: [`send`][pride.send], [`send_nowait`][pride.send_nowait], [`ask`][pride.ask] and
[`stream`][pride.stream].

A target is anything implementing [`Target`][pride.Target] (a
[`Branch`][pride.Branch], the cluster's ``RemoteBranchRef``), a
[`BranchRef`][pride.BranchRef] (resolved to the live branch it names), or a
branch name or id (resolved in the session of the calling turn's branch).

Calls made from inside the target's own active turn do not go through the
mailbox (which would deadlock behind the very turn that is waiting): ``ask``
and ``stream`` run the command inline as nested work of that turn. A call
chain that would wait on a branch already waiting up the chain (A asks B
asks A) fails at once with [`ReentrancyError`][pride.ReentrancyError].
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

import trio

from ..budget.accounts import Meter
from ..errors import TurnFinalizingError, UnknownBranch
from ..messages import Command, WorkCommand
from . import turn
from .dispatch import run_command
from .reply import Reply
from .target import BranchRef, Target, is_target, live_target
from .waits import check_wait_allowed, waiting_edge

if TYPE_CHECKING:
    from .actor import ServedBranch

__all__ = [
    "StreamItems",
    "ask",
    "check_timeout",
    "resolve",
    "send",
    "send_in_line",
    "send_nowait",
    "stream",
]

log = logging.getLogger("pride.send")

# How long leaving a stream block waits for the turn to finalise before
# giving up on waiting (the turn still finalises; the caller just moves on).
STREAM_CLOSE_GRACE = 30.0


def resolve(target: Any) -> Target:
    """The target ``target`` designates.

    A [`Target`][pride.Target] is itself; a [`BranchRef`][pride.BranchRef] is the
    live branch with its id; a name or id is looked up in the session of the
    calling turn's branch (an id also among the live branches).

    Raises:
        UnknownBranch: no such branch is known where it was looked up.
        TypeError: ``target`` is none of those.
    """
    if is_target(target):
        return target  # type: ignore[no-any-return]
    if isinstance(target, BranchRef):
        found = live_target(target.id)
        if found is None:
            raise UnknownBranch(target.name or target.id)
        return found  # type: ignore[no-any-return]
    if isinstance(target, str | UUID):
        bound = turn.binding()
        if bound is not None:
            directory = bound.actor.directory
            if directory is not None:
                return directory.resolve_name(target)  # type: ignore[no-any-return]
        if isinstance(target, UUID):
            found = live_target(target)
            if found is not None:
                return found  # type: ignore[no-any-return]
        raise UnknownBranch(target, "the current turn's session (no session to resolve names)")
    raise TypeError(
        "send target must be a Branch (or another pride.Target), a BranchRef, a name or an id, "
        f"got {type(target).__name__}"
    )


def _check_command(command: Any) -> Command:
    if not isinstance(command, Command):
        raise TypeError(
            f"expected a pride command (Chat, Operate, Attach, ...), got {type(command).__name__}"
        )
    return command


def _check_tag(tag: Any) -> str | int | None:
    if tag is None or isinstance(tag, str) or (isinstance(tag, int) and not isinstance(tag, bool)):
        return tag
    raise TypeError(f"a tag is a str, an int or None, got {type(tag).__name__}")


def check_timeout(timeout: float) -> None:
    """Raise ``ValueError`` unless ``timeout`` is a non-negative number of seconds."""
    if not isinstance(timeout, int | float) or math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout must be a non-negative number of seconds, got {timeout!r}")


async def send(target: Any, command: Command, *, tag: str | int | None = None) -> Reply:
    """Put ``command`` in the target's mailbox and return its [`Reply`][pride.Reply] at once.

    Waits while the mailbox is full (backpressure). Priority commands
    (``Attach``, ``Detach``, ``Stop``) never wait. ``tag`` labels the envelope
    (``reply.tag``): it is journaled with the turn and given back if the turn
    is resumed after a restart (see docs/durability.md).

    Raises:
        TypeError: ``command`` is not a pride command.
        BranchNotRunning: the target's actor was never started.
        BranchClosed: the target has stopped.
        UnknownBranch: a name or id did not resolve.

    Cancellation: if it raises ``Cancelled`` (waiting for room, or a priority
    command's checkpoint), nothing was queued.
    """
    destination = resolve(target)
    reply = Reply(destination, _check_command(command), tag=_check_tag(tag))
    # Cancelled means "nothing happened": check before delivering, never after.
    await trio.lowlevel.checkpoint_if_cancelled()
    await destination.deliver(reply)
    await trio.lowlevel.cancel_shielded_checkpoint()
    return reply


def send_nowait(target: Any, command: Command, *, tag: str | int | None = None) -> Reply:
    """Like [`send`][pride.send], but raise [`MailboxFull`][pride.MailboxFull] instead of
    waiting."""
    destination = resolve(target)
    reply = Reply(destination, _check_command(command), tag=_check_tag(tag))
    destination.deliver_nowait(reply)
    return reply


def send_in_line(target: Any, command: Command, *, tag: str | int | None = None) -> Reply:
    """Deliver ``command`` now for a caller that waits on the reply's done callback.

    Like [`send_nowait`][pride.send_nowait], except that a target keeping a
    line of senders (a local [`Branch`][pride.Branch]: its ``line_up``) puts
    the envelope in line for room when its mailbox is full, instead of
    raising: the caller is answered through
    [`Reply.add_done_callback`][pride.actors.reply.Reply.add_done_callback]
    when the command is done, and needs no trio task while it waits. For code
    outside trio's tasks that waits for the outcome anyway (``pride.aio``'s
    asks: one envelope in line per caller); a caller that only queues work
    must use `send`, which waits for room.

    Raises:
        MailboxFull: the target keeps no line and has no room now.
        TypeError, BranchNotRunning, BranchClosed, UnknownBranch: as for `send`.
    """
    destination = resolve(target)
    reply = Reply(destination, _check_command(command), tag=_check_tag(tag))
    line_up = getattr(type(destination), "line_up", None)
    if line_up is None:
        destination.deliver_nowait(reply)
    else:
        line_up(destination, reply)
    return reply


async def ask(target: Any, command: Command, timeout: float | None = None) -> Any:
    """Send ``command`` and wait for its result.

    Inside the target's own active turn the command runs inline as nested
    work (no mailbox, no lifecycle signals).

    Args:
        target: a Branch, BranchRef, name or id.
        command: the command to run.
        timeout: seconds to wait in all (sugar over ``trio.fail_after``).

    Returns:
        The command's result.

    Raises:
        trio.TooSlowError: the timeout expired (the command was cancelled).
        ReentrancyError: waiting would deadlock (A asks B asks A).
        TurnFinalizingError: called from the target's own finalising turn.
        BranchClosed, BranchNotRunning, UnknownBranch, TypeError: as for send.
        Exception: whatever the command raised.

    Cancellation: if the caller is cancelled or times out, a queued command
    is dropped (it never starts) and a running turn is cancelled and
    finalised (terminal ``RunFailed``).
    """
    if timeout is not None:  # the same ask, under a deadline
        check_timeout(timeout)
        with trio.fail_after(timeout):
            return await ask(target, command)
    _check_command(command)
    destination = resolve(target)
    if turn.binding() is not None and command.lane == "work":
        scope = turn.live_scope_for(destination)
        if scope is not None:  # called from the target's own live turn: run nested
            # Only a branch of this process has a live turn here.
            return await _run_nested(destination, command, scope)  # type: ignore[arg-type]
    # From a turn or an Act step the deadlock rules apply: checked once, before delivering.
    waiter = check_wait_allowed(destination)
    reply = Reply(destination, command)
    try:
        # No checkpoint is needed around deliver: waiting for the result is one.
        await destination.deliver(reply)
        return await reply._result_for(waiter)
    except BaseException:
        if not reply.done:
            reply.cancel("caller")
        raise


async def _run_nested(branch: ServedBranch, command: WorkCommand, scope: turn.TurnScope) -> Any:
    if scope.context.phase != "active":
        raise TurnFinalizingError(
            f"branch {branch.name!r}: turn {scope.turn_id} is finalising; a call from its own "
            "task lineage cannot wait for it (schedule the work after the terminal signal)"
        )
    return await _run_inline(branch, command, scope, None)


async def _run_inline(
    branch: ServedBranch,
    command: WorkCommand,
    scope: turn.TurnScope,
    stream: trio.MemorySendChannel[Any] | None,
) -> Any:
    """Run ``command`` as nested work of ``scope``'s turn; a ``budget`` of its own
    bounds it (inside the turn's, which it draws on)."""
    meter = (
        None if command.budget is None else Meter(command.budget, scope.allowance, scope="command")
    )
    nested = turn.TurnScope(scope.state, owns_lifecycle=False, stream=stream, meter=meter)
    if meter is None or not meter.limited:  # no budget of its own, or Budget() with no limit
        return await run_command(branch, command, nested)
    try:
        return await meter.run(partial(run_command, branch, command, nested))
    finally:
        meter.close()


class StreamItems:
    """The async iterator [`stream`][pride.stream] yields: the command's items in order.

    After the last item, a failed turn raises its exception from the loop.
    ``reply`` is the underlying [`Reply`][pride.Reply] (for ``turn_id``).
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[Any], reply: Reply | None) -> None:
        self._receive = receive
        self.reply = reply
        self._error: BaseException | None = None
        self._finished = False

    def __aiter__(self) -> StreamItems:
        return self

    async def __anext__(self) -> Any:
        if self._finished:  # exhausted stays exhausted; the outcome was delivered once
            raise StopAsyncIteration
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
        if self.reply is not None:
            try:
                await self.reply.result()
            except trio.Cancelled:
                raise  # not delivered yet: the next call waits again
            except BaseException:
                self._finished = True
                raise
        self._finished = True
        error, self._error = self._error, None
        if error is None:
            raise StopAsyncIteration
        try:  # let go of it, here too: its traceback holds this frame (see Reply.result)
            raise error
        finally:
            del error


@contextlib.asynccontextmanager
async def stream(
    target: Any, command: WorkCommand, *, tag: str | int | None = None
) -> AsyncIterator[StreamItems]:
    """Run ``command`` and iterate its items as the turn produces them.

    ``async with pride.stream(branch, ReActStream("q")) as rounds:`` — nothing
    is queued before the block is entered. The turn advances only as the
    caller consumes (a zero-buffer channel), and stays active until the
    caller exhausts the items or leaves the block; leaving early (break,
    exception, cancellation) closes the stream, and the block's exit waits
    for the turn to finalise (bounded by ``STREAM_CLOSE_GRACE``) so the next
    queued turn starts only after this one's terminal signal.

    ``tag`` labels the envelope, as for [`send`][pride.send].

    Raises:
        TypeError: ``command`` is not a work command, or ``tag`` not a str or int.
        Exception: the turn's error, from the ``async for`` after the last item.
    """
    destination = resolve(target)
    _check_command(command)
    checked_tag = _check_tag(tag)
    if command.lane != "work":
        raise TypeError(f"only work commands stream, got {type(command).__name__}")
    send_channel, receive_channel = trio.open_memory_channel[Any](0)
    scope = turn.live_scope_for(destination)
    if scope is not None:
        branch: ServedBranch = destination  # type: ignore[assignment]
        async with _nested_stream(branch, command, scope, send_channel, receive_channel) as items:
            yield items
        return
    check_wait_allowed(destination)
    reply = Reply(destination, command, stream=send_channel, tag=checked_tag)
    await trio.lowlevel.checkpoint_if_cancelled()
    await destination.deliver(reply)
    await trio.lowlevel.cancel_shielded_checkpoint()
    items = StreamItems(receive_channel, reply)
    clean_exit = False
    try:
        # The envelope's target now: one that forwards envelopes (a virtual
        # branch's address) points it at the branch serving it.
        with waiting_edge(reply.branch):
            yield items
        clean_exit = True
    finally:
        with trio.move_on_after(STREAM_CLOSE_GRACE) as cleanup:
            cleanup.shield = True
            if not reply.done:
                reply.cancel("stream_closed" if clean_exit else "caller")
            receive_channel.close()
            await reply.wait_done()
        if cleanup.cancelled_caught:
            log.warning("turn %s did not finalise within %ss", reply.turn_id, STREAM_CLOSE_GRACE)


@contextlib.asynccontextmanager
async def _nested_stream(
    branch: ServedBranch,
    command: WorkCommand,
    scope: turn.TurnScope,
    send_channel: trio.MemorySendChannel[Any],
    receive_channel: trio.MemoryReceiveChannel[Any],
) -> AsyncIterator[StreamItems]:
    """A stream inside the target's own turn: the producer is nested work of that turn."""
    if scope.context.phase != "active":
        raise TurnFinalizingError(f"turn {scope.turn_id} is finalising")
    items = StreamItems(receive_channel, None)
    finished = trio.Event()

    async def produce() -> None:
        try:
            await _run_inline(branch, command, scope, send_channel)
        except Exception as exc:  # surfaced to the consumer after the last item
            items._error = exc
        finally:
            # Closed only now, without a checkpoint: the consumer woken by the end
            # of the items must find the error already there, or it would end clean.
            send_channel.close()
            finished.set()

    scope.start_soon(produce, name=f"nested stream {type(command).__name__}")
    try:
        yield items
    finally:
        receive_channel.close()
        with trio.move_on_after(STREAM_CLOSE_GRACE) as cleanup:
            cleanup.shield = True
            await finished.wait()
