"""A streamed call on a host: its items forwarded to the caller, pulled by credits.

The host puts the call's `HostedReply` in the branch's mailbox with a
zero-buffer channel for its items, as ``pride.stream`` would, and one task
forwards them: it takes an item from the turn only while the caller has
credit for one (the turn waits meanwhile: that is the backpressure), and
posts it at once. The caller grants ``window`` credits up front and more as
it consumes, so a remote turn runs at most ``window`` items ahead of its
consumer. The call's outcome is posted by this task after the last item, so
it never overtakes one.

A caller closing the stream (``close``: it left its block cleanly) or
cancelling it ends the turn as leaving a local ``pride.stream`` block does:
the turn is cancelled and finalised (terminal signal) within
`STREAM_CLOSE_GRACE`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...errors import InvalidMessage, TurnCancelled
from ..wire.encoding import encode_value
from .calls import Answers, Call, HostedReply, room

if TYPE_CHECKING:
    from ...branch import Branch

__all__ = ["MAX_WINDOW", "STREAM_CLOSE_GRACE", "StreamPost", "cancel_stream", "serve_stream"]

MAX_WINDOW = 4096
"""The most items a stream may run ahead of its caller, whatever the caller asks."""
STREAM_CLOSE_GRACE = 30.0
"""Seconds a closed or cancelled stream's turn gets to finalise before the host moves on."""


class StreamPost(Answers, Protocol):
    """Where a stream's items and outcome go (the host's `Connections`)."""

    def post(self, call: Call, item: dict[str, Any]) -> None:
        """Send ``item`` on ``call``'s connection."""
        ...


async def serve_stream(
    connections: StreamPost,
    call: Call,
    branch: Branch,
    *,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``call`` as a stream; ``task_status.started()`` once it is in the mailbox.

    Raises (before it is started, so the intake refuses the envelope):
        BranchClosed, BranchNotRunning: the branch does not take it.

    Cancellation: before it is started, nothing was queued; after, the turn
    is cancelled and finalised (shielded, bounded) and the cancellation
    propagates (the host is going away: its callers hear HostLost).
    """
    send_channel, receive_channel = trio.open_memory_channel[Any](0)
    reply = HostedReply(branch, call, connections, stream=send_channel)
    await trio.lowlevel.checkpoint_if_cancelled()
    await branch.deliver(reply)
    call.reply = reply
    call.credit = call.window
    connections.post(call, {"k": "ack", "id": call.id, "room": room(branch)})
    task_status.started()
    problem: InvalidMessage | None = None
    ended = False  # the turn closed its channel: it is finalising on its own
    try:
        while call.closing is None:
            if call.credit <= 0:
                changed = call.credit_changed = trio.Event()
                await changed.wait()
                continue
            with trio.CancelScope() as receiving:
                call.receiving = receiving
                try:
                    value = await receive_channel.receive()
                except (trio.EndOfChannel, trio.ClosedResourceError):
                    ended = True
                    break
            call.receiving = None
            if receiving.cancelled_caught:
                continue  # closed or cancelled by the caller: see call.closing
            call.credit -= 1
            try:
                encoded = encode_value(value, "item")
            except InvalidMessage as exc:
                problem = exc
                break
            connections.post(call, {"k": "item", "id": call.id, "value": encoded})
    finally:
        call.receiving = None
        with trio.move_on_after(STREAM_CLOSE_GRACE) as cleanup:
            cleanup.shield = True
            if not ended and not reply.done:  # as leaving a local stream block does
                reply.cancel("caller" if call.closing == "cancel" else "stream_closed")
            receive_channel.close()
            await reply.wait_done()
    if not reply.done:  # it did not finalise within the grace
        connections.finished(call, branch, None, TurnCancelled("caller", "did not finalise"))
        return
    if problem is not None:
        connections.finished(call, branch, None, problem)
    elif call.closing == "cancel":
        connections.finished(call, branch, None, TurnCancelled("caller"))
    elif call.closing == "close":
        connections.finished(call, branch, None, None)  # the caller left cleanly
    else:
        try:
            await reply.result()
        except Exception as exc:
            connections.finished(call, branch, None, exc)
        else:
            connections.finished(call, branch, None, None)


def cancel_stream(call: Call) -> bool:
    """The caller cancels ``call``'s stream; False when there is nothing to cancel yet
    (the envelope is neither in a mailbox nor waiting for room: refuse it)."""
    call.closing = "cancel"
    if call.credit_changed is not None:
        call.credit_changed.set()
    if call.receiving is not None:
        call.receiving.cancel()
    if call.reply is not None:
        call.reply.cancel("caller")
    elif call.scope is not None:
        call.scope.cancel()
    else:
        return False
    return True
