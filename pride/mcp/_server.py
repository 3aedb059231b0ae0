"""An MCP server as a supervised child: one task owns the connection for its whole life.

The MCP SDK is built on anyio, whose cancel scopes must be entered and left
by the same task (the SDK's issues #79 and #577, "Attempted to exit cancel
scope in a different task", come from sessions opened in one task and closed
in another). So a server's connection lives in exactly one task: the
supervisor runs `McpServer.serve` in the session's nursery, and that
task opens the transport and the ``ClientSession``, initialises, lists the
tools, serves calls, and closes everything again, in that order, whether it
stops, crashes or is cancelled.

Turns never touch the ``ClientSession``: a tool call is handed to the
serving task through a channel (`pride.mcp._calls`), and the tool list and
the registrations that follow it are `pride.mcp._listing`'s.

A server that exits, breaks a pipe or its HTTP connection, or ends its
message stream is a crash of the child: `serve` raises
`McpServerError` and the session restarts it by policy. Calls in
flight at that moment get the same error. A call made while a crashed
server restarts waits for the new incarnation, up to the spec's
``restart_wait`` seconds, rather than failing at once.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Literal
from uuid import UUID

import pydantic
import trio
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError as SdkMcpError

from .._version import __version__
from ..errors import exception_leaves
from ..tools import ActionManager
from ._calls import Call, CallBook, CallSession, ProgressFn
from ._errors import McpServerError, McpToolError, McpUnavailable
from ._http import http_transport
from ._listing import ToolListing, list_tools
from ._logs import ServerLog
from ._spec import McpServerSpec
from ._statistics import McpServerStatistics
from ._stdio import StdioProcess, stdio_transport
from ._taps import ReadTap, RequestTap
from ._tool import cut

__all__ = ["McpServer"]

log = logging.getLogger("pride.mcp")

_CLIENT_INFO = types.Implementation(name="pride", version=__version__)

REFRESH_INTERVAL = 1.0
"""Seconds between two listings a server asks for with list_changed (the ones between merge)."""

RestartType = Literal["permanent", "transient", "temporary"]


class McpServer:
    """A handle on an MCP server supervised by a session; also the supervised child.

    Made by `pride.mcp.spawn_mcp` (``session.spawn_mcp``). Register its
    tools with ``Branch(tools=[server])`` or ``branch.register_mcp(server,
    prefix=..., include=..., exclude=...)``; call one directly with `call_tool`.

    Args:
        spec: what to connect to.
        restart: the restart type it is supervised with (``spawn_mcp`` sets
            it): a call finding a crashed ``"temporary"`` server fails at
            once, since nobody will restart it.
    """

    def __init__(self, spec: McpServerSpec, *, restart: RestartType = "permanent") -> None:
        if not isinstance(spec, McpServerSpec):
            raise TypeError(f"expected an McpServerSpec, got {type(spec).__name__}")
        self._spec = spec
        self._restart = restart
        self._id: UUID = uuid.uuid4()
        self._calls_send: trio.MemorySendChannel[Call] | None = None
        self._tools = ToolListing(self)
        self._calls = CallBook(spec.name, lambda: self._broken, self._mark_broken)
        self._stopping: trio.Event | None = None
        self._stop_deadline: float | None = None
        self._broken: McpServerError | None = None  # what broke the current incarnation
        self._crashed: McpServerError | None = None  # the last crash, until one serves again
        self._process: StdioProcess | None = None
        self._server_info: types.Implementation | None = None
        self._refresh: trio.MemorySendChannel[None] | None = None
        self._ready = trio.Event()  # set while an incarnation serves calls
        self._starts = self._waited = 0
        self._logs = ServerLog(spec.name)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = " ".join(self._spec.command or ()) if self._spec.command else self._spec.url
        return f"<McpServer {self.name!r} {state}, {self._spec.transport}: {where}>"

    # ------------------------------------------------------------ identity

    @property
    def name(self) -> str:
        """The member name in the session."""
        return self._spec.name

    @property
    def id(self) -> UUID:
        """A stable id (lifecycle signals carry it as ``branch_id``)."""
        return self._id

    @property
    def spec(self) -> McpServerSpec:
        """What this handle connects to."""
        return self._spec

    @property
    def running(self) -> bool:
        """True while an incarnation serves calls."""
        return self._calls_send is not None

    @property
    def pid(self) -> int | None:
        """The process id of a running stdio server (None for HTTP, or when not running)."""
        process = self._process
        if process is None or process.process is None or process.process.returncode is not None:
            return None
        return process.pid

    @property
    def server_info(self) -> types.Implementation | None:
        """The ``serverInfo`` (name, version) the server sent when it initialised."""
        return self._server_info

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The server's tools that pride can offer (by server name), as last listed."""
        return self._tools.names

    @property
    def listings(self) -> int:
        """How many times the tool list was taken (at each start and each list_changed)."""
        return self._tools.listings

    async def wait_listing(self, count: int) -> None:
        """Wait until the tool list has been taken at least ``count`` times.

        Read `listings` before the change you expect, then wait for one
        more (``await server.wait_listing(before + 1)``); registrations are
        in step with the new list when this returns.
        """
        await self._tools.wait(count)

    def statistics(self) -> McpServerStatistics:
        """Starts, calls, cancellations, failures and dropped progress so far."""
        calls = self._calls
        return McpServerStatistics(
            self.running,
            self._starts,
            calls.calls,
            len(calls.in_flight),
            calls.cancelled,
            calls.failed,
            calls.dropped,
            self._waited,
            calls.timed_out,
            self._logs.dropped,
            self._tools.checked,
        )

    # ------------------------------------------------------------ registering tools

    def register_with(
        self,
        acts: ActionManager,
        *,
        owner: str = "",
        prefix: str | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
    ) -> tuple[str, ...]:
        """Register this server's tools in ``acts`` and keep them in step with the server.

        What ``branch.register_mcp`` does; see there. Returns the pride names.

        Raises:
            ValueError: a name is already registered in ``acts``, ``include``
                names a tool the server does not offer, or ``prefix`` is not
                a string.
            McpUnavailable: the server has never listed its tools.
        """
        return self._tools.register(
            acts, owner=owner, prefix=prefix, include=include, exclude=exclude
        )

    # ------------------------------------------------------------ calls (from turns)

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressFn | None = None,
    ) -> types.CallToolResult:
        """Call the server's tool ``tool`` and return the SDK's result.

        The call runs in the serving task; ``on_progress(progress, total,
        message)`` is awaited in the calling task for each progress
        notification, in order, before this returns. A call that finds the
        server restarting after a crash waits for it (up to the spec's
        ``restart_wait`` seconds), then goes to the new incarnation.

        Raises:
            McpUnavailable: the server is stopped, or still restarting after
                ``restart_wait`` seconds (the message says which).
            McpToolError: the server answered with a JSON-RPC error.
            McpServerError: the connection broke during the call.

        Cancellation: the call's task is cancelled, the server is sent
        ``notifications/cancelled``, and the call has ended (within 2 seconds)
        when `trio.Cancelled` propagates.
        """
        call = Call.new(tool, dict(arguments or {}))
        waited = False
        while True:
            calls = self._calls_send
            if calls is not None:
                try:
                    await calls.send(call)
                    break
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass  # that incarnation ended as we sent: as if we found it down
            if waited or not self._restarting():
                raise McpUnavailable(self._unavailable_text())
            waited = True
            self._waited += 1
            await self._wait_for_restart(tool)
        result = await self._calls.wait_for(call, on_progress)
        if not result.isError:
            try:
                await self._tools.check_result(tool, result)
            except McpToolError:
                self._calls.failed += 1
                raise
        return result

    def _restarting(self) -> bool:
        """A crashed incarnation, and a restart type by which the session restarts it."""
        return self._crashed is not None and self._restart != "temporary"

    async def _wait_for_restart(self, tool: str) -> None:
        log.info(
            "MCP server %r is restarting; the call of %r waits for it (up to %ss)",
            self.name,
            tool,
            self._spec.restart_wait,
        )
        with trio.move_on_after(self._spec.restart_wait):
            await self._ready.wait()

    def _unavailable_text(self) -> str:
        if self._restarting():
            return (
                f"MCP server {self.name!r} is restarting after a crash ({self._crashed}) and "
                f"was not back within {self._spec.restart_wait}s (restart_wait); retry later"
            )
        if self._crashed is not None:
            return (
                f"MCP server {self.name!r} is not running: it crashed ({self._crashed}) and, "
                "being temporary, is not restarted"
            )
        if not self._starts:
            return f"MCP server {self.name!r} has not started yet"
        return f"MCP server {self.name!r} is not running (stopped)"

    # ------------------------------------------------------------ the serving task

    def request_stop(self, deadline: float) -> None:
        """Ask the running incarnation to end by the trio time ``deadline``.

        Calls in flight may finish until then; the rest are cancelled (the
        server is told), the session is closed and a stdio server's process
        ends (stdin closed, then SIGTERM, then SIGKILL) by the deadline.
        """
        if self._stop_deadline is None or deadline < self._stop_deadline:
            self._stop_deadline = deadline
        if self._stopping is not None:
            self._stopping.set()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> str:
        """Run one incarnation: connect, initialise, list tools, serve calls, close.

        Returns ``"shutdown"`` once stopped by `request_stop`.

        Raises:
            McpServerError: the server could not start or initialise (before
                ``task_status.started()``), or it exited or broke its
                connection while serving (a crash).
        """
        self._stopping = trio.Event()
        self._stop_deadline = None
        self._broken = None
        self._starts += 1
        calls_send, calls_receive = trio.open_memory_channel[Call](0)
        tap: ReadTap | None = None
        try:
            async with (
                self._connect() as (read, write),
                CallSession(
                    tap := ReadTap(read, self._on_stream_end, self.name, write),  # type: ignore[arg-type]
                    RequestTap(write),  # type: ignore[arg-type]
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    client_info=_CLIENT_INFO,
                ) as session,
            ):
                # Open before the first listing: a list_changed sent right after it is kept.
                refresh_send, refresh_receive = trio.open_memory_channel[None](1)
                self._refresh = refresh_send
                await self._initialise(session)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._accept, session, calls_receive, nursery)
                    nursery.start_soon(self._refresher, session, refresh_receive)
                    self._crashed = None  # this incarnation serves: the last crash is over
                    self._calls_send = calls_send
                    self._ready.set()
                    task_status.started()
                    await self._stopping.wait()
                    self._close_calls(calls_send)  # new calls get McpUnavailable
                    deadline = self._stop_deadline
                    await self._calls.drain(
                        deadline if deadline is not None else trio.current_time()
                    )
                    nursery.cancel_scope.cancel()
        except BaseException as exc:
            crash = self._crash_from(exc)
            if isinstance(crash, McpServerError):
                self._crashed = crash  # calls made from now on wait for the restart
            if crash is exc:
                raise
            raise crash from crash.__cause__
        finally:
            self._close_calls(calls_send)
            self._logs.report()
            if tap is not None:
                tap.flush()
        if self._broken is not None:
            raise self._broken
        return "shutdown"

    def _close_calls(self, calls_send: trio.MemorySendChannel[Call]) -> None:
        if self._calls_send is calls_send:
            self._calls_send = None
            self._ready = trio.Event()
        calls_send.close()

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[tuple[Any, Any]]:
        if self._spec.command is not None:
            self._process = StdioProcess(self.name)
            async with stdio_transport(
                self._spec, self._process, lambda: self._stop_deadline, self._mark_broken
            ) as streams:
                yield streams
        else:
            self._process = None
            async with http_transport(self._spec, self._mark_broken) as streams:
                yield streams

    async def _initialise(self, session: ClientSession) -> None:
        with trio.move_on_after(self._spec.init_timeout) as bound:
            result = await session.initialize()
            listed = await list_tools(session, self.name)
            await self._tools.install(listed)
        if bound.cancelled_caught:
            raise McpServerError(
                f"MCP server {self.name!r} did not initialise and list its tools within "
                f"{self._spec.init_timeout}s (init_timeout)"
            )
        self._server_info = result.serverInfo
        log.info(
            "MCP server %r ready (%.200s %.200s): %d tools",
            self.name,
            result.serverInfo.name,
            result.serverInfo.version,
            len(self._tools),
        )

    async def _accept(
        self,
        session: ClientSession,
        calls: trio.MemoryReceiveChannel[Call],
        nursery: trio.Nursery,
    ) -> None:
        timeout = self._spec.call_timeout
        async with calls:
            async for call in calls:
                self._calls.accepted(call)
                nursery.start_soon(
                    self._calls.run, session, call, timeout, name=f"mcp {self.name}:{call.tool}"
                )

    async def _refresher(
        self, session: ClientSession, wanted: trio.MemoryReceiveChannel[None]
    ) -> None:
        """Take the tool list again on each list_changed, within ``init_timeout``, and at
        most once per `REFRESH_INTERVAL` (the changes between merge into one listing: a
        server that announces a change after every listing is not listed without end).
        A listing that fails is logged and the last list stands: nothing here ends the
        incarnation."""
        async for _ in wanted:
            await self._list_again(session)
            await trio.sleep(REFRESH_INTERVAL)

    async def _list_again(self, session: ClientSession) -> None:
        with trio.move_on_after(self._spec.init_timeout) as bound:
            try:
                listed = await list_tools(session, self.name)
                await self._tools.install(listed)
            except (SdkMcpError, pydantic.ValidationError) as exc:
                log.warning(
                    "MCP server %r: listing tools again failed (the last list stands): %s",
                    self.name,
                    cut(str(exc), 500),
                )
                return
        if bound.cancelled_caught:
            log.warning(
                "MCP server %r: listing tools again took more than %ss (init_timeout); "
                "the last list stands",
                self.name,
                self._spec.init_timeout,
            )
            return
        log.info("MCP server %r: tool list refreshed (%d tools)", self.name, len(self._tools))

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: runs in its receive loop, so it never waits."""
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            if self._refresh is not None:
                with contextlib.suppress(trio.WouldBlock, trio.ClosedResourceError):
                    self._refresh.send_nowait(None)  # a refresh already pending covers this one
        elif isinstance(message, Exception):
            # The SDK's server answers a cancelled request anyway ("Request cancelled"),
            # which the client reports as a response to an unknown id: expected, not a fault.
            late = "unknown request ID" in str(message)
            log.log(
                logging.DEBUG if late else logging.WARNING,
                "MCP server %r: transport error: %.500r",
                self.name,
                message,
            )
        await trio.lowlevel.checkpoint()

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._logs.log(params, trio.current_time())
        await trio.lowlevel.checkpoint()

    def _on_stream_end(self) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            self._mark_broken(McpServerError(f"MCP server {self.name!r} ended the connection"))

    def _mark_broken(self, error: McpServerError) -> None:
        if self._broken is None:
            self._broken = error
        self._crashed = self._broken  # calls made from now on wait for the restart
        if self._stopping is not None:
            self._stopping.set()  # the serving task ends, then raises the error

    def _crash_from(self, exc: BaseException) -> BaseException:
        """One exception for whatever ended the incarnation (never a group)."""
        leaves = exception_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
        for leaf in leaves:
            if isinstance(leaf, McpServerError):
                return leaf
        for leaf in leaves:
            if not isinstance(leaf, trio.Cancelled | KeyboardInterrupt | SystemExit):
                if isinstance(leaf, Exception):
                    return McpServerError(
                        f"MCP server {self.name!r}: the connection failed: "
                        f"{type(leaf).__name__}: {leaf}"
                    )
                return leaf
        return leaves[0]
