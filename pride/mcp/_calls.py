"""Tool calls of one MCP server: handed from turns to the serving task, and back.

A turn never touches the SDK's ``ClientSession``. `CallBook.wait_for` (the
turn's side) sends a `Call` through the serving task's channel and then
takes the call's progress reports and its result; `CallBook.run` (the
serving task's side) runs the call as a task of the serving task's nursery.
A turn that is cancelled cancels the call's task, which sends the server
``notifications/cancelled`` (shielded, bounded by `CANCEL_NOTICE_WAIT`)
before the turn's cancellation goes on: the call has ended before the
turn's terminal signal.

Progress reports arrive in the SDK's receive loop, which must never wait:
each call holds up to `PROGRESS_BUFFER` of them, each message cut at
`PROGRESS_TEXT` characters, and drops (and counts) the rest rather than
stall every other call of the server.

`CallSession` is the SDK's ``ClientSession`` with one hand-over made safe: the
answer to a call cancelled as it arrives goes to nobody, where it ended the
SDK's receive loop and left the server answering no call again.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import attrs
import outcome
import trio
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError as SdkMcpError
from mcp.shared.message import SessionMessage
from mcp.shared.session import ProgressFnT

from ._errors import McpServerError, McpToolError, McpUnavailable
from ._taps import ServerError, TooManyBlocks, forget_requests, last_request_id
from ._tool import MAX_ERROR_TEXT, cut

__all__ = [
    "CANCEL_NOTICE_WAIT",
    "PROGRESS_BUFFER",
    "PROGRESS_TEXT",
    "Call",
    "CallBook",
    "CallSession",
    "ProgressFn",
]

log = logging.getLogger("pride.mcp")

CANCEL_NOTICE_WAIT = 2.0
"""Seconds a cancelled call may take to send ``notifications/cancelled`` and end."""

PROGRESS_BUFFER = 256
"""Progress reports of one call held while its turn is busy; more are dropped (and counted)."""

PROGRESS_TEXT = 2_000
"""Characters of a progress report's message held (``report_progress`` cuts it further)."""

ProgressFn = Callable[[float, "float | None", "str | None"], Awaitable[Any]]
Progress = tuple[float, float | None, str | None]


class CallSession(ClientSession):
    """The SDK's client session, whose receive loop outlives a call cancelled as its answer
    arrives.

    The SDK (1.x) hands an answer over by taking the waiting request's stream out of
    its table and then sending into it, with a checkpoint between: a call cancelled
    at that checkpoint closes the stream, the send raises ``ClosedResourceError``,
    and the receive loop, taking that for the end of its own read stream, ends with
    the session still open. The server counted as running, and every later call
    failed (``ClosedResourceError``) and nothing restarted it. Here that answer is
    dropped, as the answer to any cancelled call is.
    """

    async def _handle_response(self, message: SessionMessage) -> None:
        try:
            await super()._handle_response(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("MCP: the answer to a call cancelled as it arrived was dropped")


@attrs.define(eq=False)
class Call:
    """One tool call, from the turn that asked to the serving task that runs it."""

    tool: str
    arguments: dict[str, Any]
    progress_send: trio.MemorySendChannel[Progress]
    progress_receive: trio.MemoryReceiveChannel[Progress]
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: outcome.Outcome[types.CallToolResult] | None = None
    dropped: int = 0

    @classmethod
    def new(cls, tool: str, arguments: dict[str, Any]) -> Call:
        send, receive = trio.open_memory_channel[Progress](PROGRESS_BUFFER)
        return cls(tool, arguments, send, receive)

    def finish(self, result: outcome.Outcome[types.CallToolResult]) -> None:
        if self.result is None:
            self.result = result
        self.progress_send.close()
        self.done.set()


class CallBook:
    """The calls of one server handle: those in flight, and the counts of all.

    Args:
        server: the server's name (for messages).
        broken: the error that ended the current incarnation, if one did.
        mark_broken: report a broken connection (a crash of the incarnation).
    """

    def __init__(
        self,
        server: str,
        broken: Callable[[], McpServerError | None],
        mark_broken: Callable[[McpServerError], None],
    ) -> None:
        self._server = server
        self._broken = broken
        self._mark_broken = mark_broken
        self.in_flight: set[Call] = set()
        self.calls = self.cancelled = self.failed = self.dropped = self.timed_out = 0

    # ------------------------------------------------------------ the turn's side

    async def wait_for(self, call: Call, on_progress: ProgressFn | None) -> types.CallToolResult:
        """Take ``call``'s progress and result (it was sent to the serving task).

        Cancellation: the call's task is cancelled (the server told), and the
        call has ended, bounded by `CANCEL_NOTICE_WAIT`, when it propagates.
        """
        try:
            async with call.progress_receive:
                async for progress, total, message in call.progress_receive:
                    if on_progress is not None:
                        await self._report(on_progress, call.tool, progress, total, message)
        except BaseException:
            call.scope.cancel()
            with trio.move_on_after(CANCEL_NOTICE_WAIT) as bound:
                bound.shield = True
                await call.done.wait()
            if not call.done.is_set():
                log.error(
                    "MCP server %r: a cancelled call of %r did not end", self._server, call.tool
                )
            raise
        await call.done.wait()
        assert call.result is not None
        return call.result.unwrap()

    async def _report(
        self, on_progress: ProgressFn, tool: str, progress: float, total: Any, message: Any
    ) -> None:
        try:
            await on_progress(progress, total, message)
        except ValueError as exc:  # bytes from another process: a bad report is skipped
            log.warning(
                "MCP server %r: bad progress report for %r ignored: %s", self._server, tool, exc
            )

    # ------------------------------------------------------------ the serving task's side

    def accepted(self, call: Call) -> None:
        """Count ``call`` in (the serving task is about to run it)."""
        self.in_flight.add(call)
        self.calls += 1

    async def run(self, session: ClientSession, call: Call, call_timeout: float | None) -> None:
        """Run one call in the serving task's nursery; always finishes the call.

        ``call_timeout`` bounds the whole call, the write of its request
        included: a server that stops reading its input fills the pipe, and a
        write into a full pipe waits for as long as the server does not read.
        """
        request = types.ClientRequest(
            types.CallToolRequest(
                params=types.CallToolRequestParams(name=call.tool, arguments=call.arguments)
            )
        )
        forget_requests()  # only this call's own request may be cancelled on the server
        try:
            with call.scope, trio.move_on_after(_seconds(call_timeout)) as bound:
                # send_request rather than ClientSession.call_tool: call_tool checks a
                # result's structuredContent against the output schema with jsonschema
                # on the event loop, unbounded; pride checks it within bounds (_schema).
                result = await session.send_request(
                    request, types.CallToolResult, progress_callback=self._progress_for(call)
                )
                call.finish(outcome.Value(result))
            broken = self._broken()
            if bound.cancelled_caught and broken is None:
                self.failed += 1
                self.timed_out += 1
                await self._send_cancelled(session, f"call_timeout={call_timeout}s passed")
                call.finish(
                    outcome.Error(
                        McpToolError(
                            f"MCP server {self._server!r}: the call of {call.tool!r} did not "
                            f"end within call_timeout={call_timeout}s; it was cancelled"
                        )
                    )
                )
            elif call.scope.cancelled_caught and broken is None:
                self.cancelled += 1
                await self._send_cancelled(session, "the caller's turn was cancelled")
                call.finish(
                    outcome.Error(McpUnavailable(f"the call of {call.tool!r} was cancelled"))
                )
            elif broken is not None and call.result is None:
                call.finish(outcome.Error(broken))
        except SdkMcpError as exc:
            self.failed += 1
            call.finish(outcome.Error(self._call_error(call, exc)))
        except Exception as exc:
            self.failed += 1
            call.finish(
                outcome.Error(
                    McpToolError(
                        f"MCP server {self._server!r}: the call of {call.tool!r} failed: "
                        f"{type(exc).__name__}: {cut(str(exc), MAX_ERROR_TEXT)}"
                    )
                )
            )
        finally:
            if call.result is None:  # the incarnation ended under the call
                self.failed += 1
                reason = self._broken() or McpUnavailable(
                    f"MCP server {self._server!r} stopped during the call of {call.tool!r}"
                )
                call.finish(outcome.Error(reason))
            self.in_flight.discard(call)

    def _call_error(self, call: Call, exc: SdkMcpError) -> Exception:
        error = exc.error
        message = cut(str(error.message), MAX_ERROR_TEXT)
        if isinstance(error, TooManyBlocks):  # pride's refusal of the result, not the server's
            return McpToolError(f"MCP server {self._server!r}, call of {call.tool!r}: {message}")
        if not isinstance(error, ServerError) and error.code == types.CONNECTION_CLOSED:
            # The SDK's own answer to every waiting request once the connection is gone.
            broken = self._broken() or McpServerError(
                f"MCP server {self._server!r}: the connection broke during the call of "
                f"{call.tool!r} ({message})"
            )
            self._mark_broken(broken)
            return broken
        return McpToolError(f"MCP server {self._server!r} refused the call: {message}")

    def _progress_for(self, call: Call) -> ProgressFnT:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Runs in the SDK's receive loop: never wait here, or every call would stall.
            if isinstance(message, str) and len(message) > PROGRESS_TEXT:
                message = message[:PROGRESS_TEXT]  # held for a slow turn: never a whole 16 MiB
            try:
                call.progress_send.send_nowait((progress, total, message))
            except trio.WouldBlock:
                call.dropped += 1
                self.dropped += 1
                if call.dropped == 1:
                    log.warning(
                        "MCP server %r: progress of %r arrives faster than its turn takes it; "
                        "dropping reports (counted in statistics().progress_dropped)",
                        self._server,
                        call.tool,
                    )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the call has ended; a late report has nobody to go to

        return on_progress

    async def _send_cancelled(self, session: ClientSession, reason: str) -> None:
        request_id = last_request_id()
        if request_id is None:
            return  # the request never left: nothing to cancel
        notice = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
            )
        )
        with trio.move_on_after(CANCEL_NOTICE_WAIT) as bound:
            bound.shield = True
            with contextlib.suppress(Exception):
                await session.send_notification(notice)
        if bound.cancelled_caught:
            log.warning("MCP server %r: could not send the cancellation in time", self._server)

    async def drain(self, deadline: float) -> None:
        """On stop: let calls in flight finish until ``deadline``, then cancel the rest."""
        with trio.move_on_at(deadline):
            while self.in_flight:
                await next(iter(self.in_flight)).done.wait()
        for call in list(self.in_flight):
            call.scope.cancel()
        with trio.move_on_after(CANCEL_NOTICE_WAIT) as bound:
            bound.shield = True
            while self.in_flight:
                await next(iter(self.in_flight)).done.wait()


def _seconds(seconds: float | None) -> float:
    return math.inf if seconds is None else seconds
