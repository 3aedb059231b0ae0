"""An MCP server as a supervised child: one task owns the connection for its whole life.

The MCP SDK is built on anyio, whose cancel scopes must be entered and left
by the same task (the SDK's issues #79 and #577, "Attempted to exit cancel
scope in a different task", come from sessions opened in one task and closed
in another). So a server's connection lives in exactly one task: the
supervisor runs `McpServer.serve` in the session's nursery, and that
task opens the transport and the ``ClientSession``, initialises, lists the
tools, serves calls, and closes everything again, in that order, whether it
stops, crashes or is cancelled.

Turns never touch the ``ClientSession``. A tool call is a request handed to
the serving task through a channel; the serving task runs it as a task of its
own nursery and streams progress and the result back. The turn waits for the
call to end even when it is cancelled: cancellation cancels the call's task,
which sends the server ``notifications/cancelled`` (shielded, bounded)
before the turn's cancellation goes on, so the call has ended before the
turn's terminal signal.

A server that exits, breaks a pipe or its HTTP connection, or ends its
message stream is a crash of the child: `serve` raises
`McpServerError` and the session restarts it by policy. Calls in
flight at that moment get the same error.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import math
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any
from uuid import UUID

import anyio
import attrs
import outcome
import trio
from mcp import ClientSession, types
from mcp.shared.exceptions import McpError as SdkMcpError
from mcp.shared.message import SessionMessage
from mcp.shared.session import ProgressFnT

from .._version import __version__
from ..errors import exception_leaves
from ..tools import ActionManager
from ._errors import McpServerError, McpToolError, McpUnavailable
from ._http import http_transport
from ._spec import McpServerSpec
from ._stdio import StdioProcess, stdio_transport
from ._tool import McpTool, checked_schema, local_name

__all__ = ["CANCEL_NOTICE_WAIT", "PROGRESS_BUFFER", "McpServer", "McpServerStatistics"]

log = logging.getLogger("pride.mcp")

CANCEL_NOTICE_WAIT = 2.0
"""Seconds a cancelled call may take to send ``notifications/cancelled`` and end."""

PROGRESS_BUFFER = 256
"""Progress reports of one call held while its turn is busy; more are dropped (and counted)."""

_CLIENT_INFO = types.Implementation(name="pride", version=__version__)
_sent_request: contextvars.ContextVar[types.RequestId | None] = contextvars.ContextVar(
    "pride_mcp_sent_request", default=None
)

ProgressFn = Callable[[float, "float | None", "str | None"], Awaitable[Any]]


@attrs.frozen
class McpServerStatistics:
    """A snapshot of a server handle (see `McpServer.statistics`).

    Attributes:
        running: an incarnation is serving calls.
        starts: incarnations started (restarts included).
        calls: tool calls sent.
        in_flight: calls running now.
        cancelled: calls cancelled by their caller (each sent ``notifications/cancelled``).
        failed: calls that ended in an error (server errors, broken connections).
        progress_dropped: progress reports dropped because a turn did not keep up.
    """

    running: bool
    starts: int
    calls: int
    in_flight: int
    cancelled: int
    failed: int
    progress_dropped: int


@attrs.define(eq=False)
class _Call:
    """One tool call, from the turn that asked to the serving task that runs it."""

    tool: str
    arguments: dict[str, Any]
    progress_send: trio.MemorySendChannel[tuple[float, float | None, str | None]]
    progress_receive: trio.MemoryReceiveChannel[tuple[float, float | None, str | None]]
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: trio.Event = attrs.field(factory=trio.Event)
    result: outcome.Outcome[types.CallToolResult] | None = None
    dropped: int = 0

    def finish(self, result: outcome.Outcome[types.CallToolResult]) -> None:
        if self.result is None:
            self.result = result
        self.progress_send.close()
        self.done.set()


@attrs.define(eq=False)
class _Registration:
    """Tools of this server registered in one action manager, kept in step with the server."""

    acts: weakref.ref[ActionManager]
    owner: str
    prefix: str | None
    include: frozenset[str] | None
    exclude: frozenset[str]
    names: dict[str, str] = attrs.field(factory=dict)  # pride name -> server name


class McpServer:
    """A handle on an MCP server supervised by a session; also the supervised child.

    Made by `pride.mcp.spawn_mcp` (``session.spawn_mcp``). Register its
    tools with ``branch.register_mcp(server, prefix=..., include=...,
    exclude=...)``; call one directly with `call_tool`.

    Args:
        spec: what to connect to.
    """

    def __init__(self, spec: McpServerSpec) -> None:
        if not isinstance(spec, McpServerSpec):
            raise TypeError(f"expected an McpServerSpec, got {type(spec).__name__}")
        self._spec = spec
        self._id: UUID = uuid.uuid4()
        self._calls_send: trio.MemorySendChannel[_Call] | None = None
        self._remote: dict[str, types.Tool] = {}
        self._offered: dict[str, dict[str, Any]] = {}  # server name -> checked schema
        self._registrations: list[_Registration] = []
        self._stopping: trio.Event | None = None
        self._stop_deadline: float | None = None
        self._broken: McpServerError | None = None
        self._process: StdioProcess | None = None
        self._server_info: types.Implementation | None = None
        self._in_flight: set[_Call] = set()
        self._refresh: trio.MemorySendChannel[None] | None = None
        self._listings = 0
        self._listed = trio.Event()
        self._starts = self._call_count = self._cancelled = self._failed = self._dropped = 0

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
        return tuple(self._offered)

    @property
    def listings(self) -> int:
        """How many times the tool list was taken (at each start and each list_changed)."""
        return self._listings

    async def wait_listing(self, count: int) -> None:
        """Wait until the tool list has been taken at least ``count`` times.

        Read `listings` before the change you expect, then wait for one
        more (``await server.wait_listing(before + 1)``); registrations are
        in step with the new list when this returns.
        """
        while self._listings < count:
            await self._listed.wait()

    def statistics(self) -> McpServerStatistics:
        """Starts, calls, cancellations, failures and dropped progress so far."""
        return McpServerStatistics(
            self.running,
            self._starts,
            self._call_count,
            len(self._in_flight),
            self._cancelled,
            self._failed,
            self._dropped,
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
        if prefix is not None and not isinstance(prefix, str):
            raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
        if not self._starts:
            raise McpUnavailable(f"MCP server {self.name!r} has not started yet")
        wanted = None if include is None else frozenset(_names("include", include))
        registration = _Registration(
            weakref.ref(acts), owner, prefix, wanted, frozenset(_names("exclude", exclude or ()))
        )
        if wanted is not None:
            unknown = sorted(wanted - set(self._offered))
            if unknown:
                raise ValueError(
                    f"MCP server {self.name!r} has no tool {', '.join(map(repr, unknown))} "
                    f"(it offers: {', '.join(self._offered) or 'none'})"
                )
        tools = self._tools_for(registration)
        taken = [name for name in tools if name in acts]
        if taken:
            raise ValueError(
                f"tool {taken[0]!r} is already registered on {owner or 'this branch'}; "
                "pass prefix=... to register the server's tools under other names"
            )
        acts.register(list(tools.values()))
        registration.names = {name: tool.remote_name for name, tool in tools.items()}
        self._registrations.append(registration)
        return tuple(tools)

    def _tools_for(self, registration: _Registration) -> dict[str, McpTool]:
        tools: dict[str, McpTool] = {}
        for remote, schema in self._offered.items():
            if registration.include is not None and remote not in registration.include:
                continue
            if remote in registration.exclude:
                continue
            name = local_name(registration.prefix, remote)
            if name in tools:
                log.warning(
                    "MCP server %r: tools %r and %r both become %r; only the first is registered",
                    self.name,
                    tools[name].remote_name,
                    remote,
                    name,
                )
                continue
            tools[name] = McpTool(self, self._remote[remote], schema, name=name)
        return tools

    def _install(self, listed: list[types.Tool]) -> None:
        """Take a new tool list and bring every registration in step with it."""
        remote: dict[str, types.Tool] = {}
        offered: dict[str, dict[str, Any]] = {}
        for tool in listed:
            try:
                offered[tool.name] = checked_schema(tool)
            except ValueError as exc:
                log.warning("MCP server %r: tool %r is not offered: %s", self.name, tool.name, exc)
                continue
            remote[tool.name] = tool
        self._remote, self._offered = remote, offered
        for registration in list(self._registrations):
            acts = registration.acts()
            if acts is None:
                self._registrations.remove(registration)
                continue
            self._sync(registration, acts)
        self._listings += 1
        self._listed.set()
        self._listed = trio.Event()

    def _sync(self, registration: _Registration, acts: ActionManager) -> None:
        tools = self._tools_for(registration)
        for name in list(registration.names):
            current = acts.get(name)
            if name not in tools and isinstance(current, McpTool) and current.server is self:
                acts.unregister(name)
                log.info("MCP server %r: tool %r is gone; unregistered", self.name, name)
            if name not in tools:
                del registration.names[name]
        for name, tool in tools.items():
            current = acts.get(name)
            if current is not None and not (
                isinstance(current, McpTool) and current.server is self
            ):
                log.warning(
                    "MCP server %r: new tool %r not registered on %s: the name is taken",
                    self.name,
                    name,
                    registration.owner or "a branch",
                )
                continue
            acts.register(tool, update=True)
            registration.names[name] = tool.remote_name

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
        notification, in order, before this returns.

        Raises:
            McpUnavailable: the server is not running (restarting or stopped).
            McpToolError: the server answered with a JSON-RPC error.
            McpServerError: the connection broke during the call.

        Cancellation: the call's task is cancelled, the server is sent
        ``notifications/cancelled``, and the call has ended (bounded by
        `CANCEL_NOTICE_WAIT`) when `trio.Cancelled` propagates.
        """
        calls = self._calls_send
        if calls is None:
            raise McpUnavailable(self._unavailable_text())
        progress_send, progress_receive = trio.open_memory_channel[
            tuple[float, float | None, str | None]
        ](PROGRESS_BUFFER)
        call = _Call(tool, dict(arguments or {}), progress_send, progress_receive)
        try:
            await calls.send(call)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise McpUnavailable(self._unavailable_text()) from None
        try:
            async with progress_receive:
                async for progress, total, message in progress_receive:
                    if on_progress is not None:
                        await self._report(on_progress, tool, progress, total, message)
        except BaseException:
            call.scope.cancel()
            with trio.move_on_after(CANCEL_NOTICE_WAIT) as bound:
                bound.shield = True
                await call.done.wait()
            if not call.done.is_set():
                log.error("MCP server %r: a cancelled call of %r did not end", self.name, tool)
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
                "MCP server %r: bad progress report for %r ignored: %s", self.name, tool, exc
            )

    def _unavailable_text(self) -> str:
        if self._broken is not None:
            return f"MCP server {self.name!r} is not running (it crashed: {self._broken}); retry"
        return f"MCP server {self.name!r} is not running"

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
        calls_send, calls_receive = trio.open_memory_channel[_Call](0)
        try:
            async with (
                self._connect() as (read, write),
                ClientSession(
                    _ReadTap(read, self._on_stream_end),  # type: ignore[arg-type]
                    _WriteTap(write),  # type: ignore[arg-type]
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    client_info=_CLIENT_INFO,
                ) as session,
            ):
                await self._initialise(session)
                async with trio.open_nursery() as nursery:
                    refresh_send, refresh_receive = trio.open_memory_channel[None](1)
                    self._refresh = refresh_send
                    nursery.start_soon(self._accept, session, calls_receive, nursery)
                    nursery.start_soon(self._refresher, session, refresh_receive)
                    self._calls_send = calls_send
                    task_status.started()
                    await self._stopping.wait()
                    self._calls_send = None
                    calls_send.close()  # new calls get McpUnavailable
                    await self._drain()
                    nursery.cancel_scope.cancel()
        except BaseException as exc:
            crash = self._crash_from(exc)
            if crash is exc:
                raise
            raise crash from crash.__cause__
        finally:
            self._calls_send = None
            calls_send.close()
        if self._broken is not None:
            raise self._broken
        return "shutdown"

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
            listed = await _list_tools(session)
        if bound.cancelled_caught:
            raise McpServerError(
                f"MCP server {self.name!r} did not initialise and list its tools within "
                f"{self._spec.init_timeout}s (init_timeout)"
            )
        self._server_info = result.serverInfo
        self._install(listed)
        log.info(
            "MCP server %r ready (%s %s): %d tools",
            self.name,
            result.serverInfo.name,
            result.serverInfo.version,
            len(self._offered),
        )

    async def _accept(
        self,
        session: ClientSession,
        calls: trio.MemoryReceiveChannel[_Call],
        nursery: trio.Nursery,
    ) -> None:
        async with calls:
            async for call in calls:
                self._in_flight.add(call)
                self._call_count += 1
                nursery.start_soon(
                    self._run_call, session, call, name=f"mcp {self.name}:{call.tool}"
                )

    async def _run_call(self, session: ClientSession, call: _Call) -> None:
        """Run one call in the serving task's nursery; always finishes the call."""
        try:
            with call.scope:
                result = await session.call_tool(
                    call.tool,
                    call.arguments,
                    read_timeout_seconds=_timedelta(self._spec.call_timeout),
                    progress_callback=self._progress_for(call),
                )
                call.finish(outcome.Value(result))
            if call.scope.cancelled_caught and self._broken is None:
                self._cancelled += 1
                await self._send_cancelled(session, "the caller's turn was cancelled")
                call.finish(
                    outcome.Error(McpUnavailable(f"the call of {call.tool!r} was cancelled"))
                )
            elif call.scope.cancelled_caught and self._broken is not None:
                call.finish(outcome.Error(self._broken))
        except SdkMcpError as exc:
            self._failed += 1
            call.finish(outcome.Error(self._call_error(call, exc)))
        except Exception as exc:
            self._failed += 1
            call.finish(
                outcome.Error(
                    McpToolError(f"MCP call of {call.tool!r} failed: {type(exc).__name__}: {exc}")
                )
            )
        finally:
            if call.result is None:  # the incarnation ended under the call
                self._failed += 1
                reason = self._broken or McpUnavailable(
                    f"MCP server {self.name!r} stopped during the call of {call.tool!r}"
                )
                call.finish(outcome.Error(reason))
            self._in_flight.discard(call)

    def _call_error(self, call: _Call, exc: SdkMcpError) -> Exception:
        error = exc.error
        if error.code == types.CONNECTION_CLOSED or "session terminated" in error.message.lower():
            broken = McpServerError(
                f"MCP server {self.name!r}: the connection broke during the call of "
                f"{call.tool!r} ({error.message})"
            )
            self._mark_broken(broken)
            return broken
        return McpToolError(f"MCP server {self.name!r} refused the call: {error.message}")

    def _progress_for(self, call: _Call) -> ProgressFnT:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Runs in the SDK's receive loop: never wait here, or every call would stall.
            try:
                call.progress_send.send_nowait((progress, total, message))
            except trio.WouldBlock:
                call.dropped += 1
                self._dropped += 1
                if call.dropped == 1:
                    log.warning(
                        "MCP server %r: progress of %r arrives faster than its turn takes it; "
                        "dropping reports (counted in statistics().progress_dropped)",
                        self.name,
                        call.tool,
                    )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the call has ended; a late report has nobody to go to

        return on_progress

    async def _send_cancelled(self, session: ClientSession, reason: str) -> None:
        request_id = _sent_request.get()
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
            log.warning("MCP server %r: could not send the cancellation in time", self.name)

    async def _drain(self) -> None:
        """On stop: let calls in flight finish until the deadline, then cancel the rest."""
        deadline = self._stop_deadline if self._stop_deadline is not None else trio.current_time()
        with trio.move_on_at(deadline):
            while self._in_flight:
                await next(iter(self._in_flight)).done.wait()
        for call in list(self._in_flight):
            call.scope.cancel()
        with trio.move_on_after(CANCEL_NOTICE_WAIT) as bound:
            bound.shield = True
            while self._in_flight:
                await next(iter(self._in_flight)).done.wait()

    async def _refresher(
        self, session: ClientSession, wanted: trio.MemoryReceiveChannel[None]
    ) -> None:
        async for _ in wanted:
            try:
                listed = await _list_tools(session)
            except SdkMcpError as exc:
                log.warning("MCP server %r: listing tools again failed: %s", self.name, exc)
                continue
            self._install(listed)
            log.info("MCP server %r: tool list refreshed (%d tools)", self.name, len(self._offered))

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
                "MCP server %r: transport error: %r",
                self.name,
                message,
            )
        await trio.lowlevel.checkpoint()

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        level = _LOG_LEVELS.get(params.level, logging.INFO)
        log.log(level, "MCP server %r says: %.2000s", self.name, params.data)
        await trio.lowlevel.checkpoint()

    def _on_stream_end(self) -> None:
        if self._stopping is not None and not self._stopping.is_set():
            self._mark_broken(McpServerError(f"MCP server {self.name!r} ended the connection"))

    def _mark_broken(self, error: McpServerError) -> None:
        if self._broken is None:
            self._broken = error
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


_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

_MAX_TOOL_PAGES = 100


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool, following ``nextCursor`` (bounded: a server cannot page forever)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            return tools
    log.warning(
        "MCP server's tool list has more than %d pages; the rest is ignored", _MAX_TOOL_PAGES
    )
    return tools


def _names(what: str, names: Iterable[str]) -> list[str]:
    items = [names] if isinstance(names, str) else list(names)
    if not all(isinstance(name, str) for name in items):
        raise ValueError(f"{what} must be tool names (strings)")
    return items


def _timedelta(seconds: float | None) -> Any:
    if seconds is None or math.isinf(seconds):
        return None
    import datetime

    return datetime.timedelta(seconds=seconds)


class _WriteTap:
    """The session's write stream, noting the id of each request sent by the calling task.

    The SDK keeps request ids to itself; a cancelled call needs its id for
    ``notifications/cancelled``. ``send`` runs in the task that sends the
    request (the call's), so a context variable carries the id back to it.
    """

    def __init__(self, inner: anyio.abc.ObjectSendStream[SessionMessage]) -> None:
        self._inner = inner

    async def send(self, item: SessionMessage) -> None:
        await self._inner.send(item)
        root = item.message.root
        if isinstance(root, types.JSONRPCRequest):
            _sent_request.set(root.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()  # type: ignore[attr-defined]

    async def __aenter__(self) -> _WriteTap:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class _ReadTap:
    """The session's read stream, telling the server handle when it ends."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _ReadTap:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> _ReadTap:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()
