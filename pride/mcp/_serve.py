"""pride as an MCP server: a session's chosen branches, offered as MCP tools.

Each exposed branch becomes one tool ``ask_<name>(instruction)``, which runs
a ``ChatAndRecord`` turn on it and returns the reply, plus one tool
``<name>_<operation>(...)`` per operation registered on the branch itself
(its parameters from the operation's signature, as for any pride tool). Which
branches are exposed is the application's explicit list, never "all".

A client is not trusted: its arguments are validated against each tool's
schema (by the SDK) and an operation's arguments are decoded as a request
line's ``Call`` is, so a model field can only name one of the branch's own
models and counts are bounded (`pride.messages.limits`). A client whose
stream ends has its calls in flight cancelled, and their turns finalised.

While a turn runs, the client gets MCP progress notifications (when it sent
a progress token): one per message the turn records and per
``ToolProgress`` of its tools, counting up, with a short message. When the
client cancels the request (``notifications/cancelled``), the SDK cancels the
handler and the handler cancels the turn (``RunFailed``, cancelled).

Transports: stdio (the default; stdin and stdout are the protocol, so logs go
to stderr), or streamable HTTP on 127.0.0.1 through the SDK's session
manager, served on trio by hypercorn.

It is one idea at about 600 lines: serving branches as MCP tools, from the
tool list to each call's turn and its bounds (calls served at once, GET
streams, sessions), which every transport shares. What is HTTP's alone, the
door in front of the SDK's session manager, is `pride.mcp._door`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import trio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from .._hypercorn import bound_socket, hypercorn_config
from .._lines import LineSplitter, LineTooLong
from .._places import Places
from .._repeats import Repeats
from .._version import __version__
from ..actors import send
from ..branch import Branch
from ..errors import sole_exception
from ..messages import (
    ActionRequest,
    ActionResponse,
    AssistantResponse,
    ChatAndRecord,
    MessageAdded,
    Signal,
    ToolProgress,
    WorkCommand,
    structure,
)
from ..messages.codec import dump_json
from ..messages.limits import check_untrusted, image_url_prefixes
from ..messages.origins import Guard
from ..tools import Tool
from ._describe import ask_description
from ._door import SEND_TIMEOUT, Departures, door
from ._errors import McpBusy
from ._spec import DEFAULT_MAX_MESSAGE_BYTES
from ._tool import local_name

__all__ = [
    "BAD_LINES_LOGGED",
    "MAX_CONCURRENT",
    "MAX_PENDING_REQUESTS",
    "MAX_SESSIONS",
    "MAX_WATCHERS",
    "PROGRESS_QUEUE",
    "QUEUE_WAIT",
    "build_server",
    "serve_mcp",
]

log = logging.getLogger("pride.mcp")

PROGRESS_QUEUE = 256
"""Progress events of one request held for its client; more are dropped (and logged)."""

BAD_LINES_LOGGED = 20
"""Lines of a stdio client that are not JSON-RPC logged one by one; the rest are counted."""

MAX_PENDING_REQUESTS = 128
"""Requests of a stdio client read and not yet answered; the next is read once one is.

The SDK's server runs each request in a task of its own, and an answer nobody
reads waits in that task: a client that kept writing requests and stopped
reading its standard output grew the process by about 15 KB a request
(60,000 ``tools/list`` took it to a gigabyte). Past this many, the client's
input is left unread (its writes wait, as a full pipe's do), and a client that
reads its answers is never held back by it unless it keeps more in flight.
What it wrote behind the waiting request (a ``notifications/cancelled``, the
end of its input) is read once one of those requests is answered.
"""


MAX_CONCURRENT = 128
"""Tool calls served at once (``--max-concurrent``, as ``pride serve``'s); more wait
up to `QUEUE_WAIT` for a place, then are refused with an error naming the bound."""

MAX_WATCHERS = 64
"""GET streams (server-to-client messages over HTTP) open at once (``--max-watchers``);
places of their own, apart from the calls': idle streams cannot starve calls."""

MAX_SESSIONS = 256
"""MCP sessions open at once over HTTP (``--max-sessions``); a client opening one more
is answered 503. The SDK's own bound is 10,000, and an idle session lives 30 minutes
and costs about 70 KB (measured: 2,000 sessions grew the process by 143 MB), so one
client sending initialize requests in a loop could hold 700 MB."""

QUEUE_WAIT = 1.0
"""Seconds a call or a GET stream waits for a place before it is refused."""


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int of at least 1, got {value!r}")
    return value


class _Exposed:
    """The MCP tools of one session: which branch (and operation) each name runs.

    At most ``max_concurrent`` calls run at once, whoever their clients are; a
    call that finds no place free within ``queue_wait`` seconds is refused (an
    error result naming ``--max-concurrent``), so a client holding many calls
    costs a bounded number of waiting turns, never a growing queue of them.
    """

    def __init__(
        self,
        session: Any,
        expose: Sequence[str],
        image_urls: Sequence[str] = (),
        *,
        max_concurrent: int = MAX_CONCURRENT,
        queue_wait: float = QUEUE_WAIT,
    ) -> None:
        if isinstance(expose, str) or not expose:
            raise ValueError("expose names the branches to serve, e.g. expose=['helper']")
        if isinstance(image_urls, str):
            raise TypeError(f"image_urls is a sequence of URL prefixes, got {image_urls!r}")
        if isinstance(queue_wait, bool) or not isinstance(queue_wait, int | float):
            raise TypeError(f"queue_wait is a number of seconds, got {queue_wait!r}")
        if not queue_wait >= 0:
            raise ValueError(f"queue_wait must be at least 0 seconds, got {queue_wait!r}")
        self.max_concurrent = _count("max_concurrent", max_concurrent)
        self.queue_wait = float(queue_wait)
        self.places = Places(self.max_concurrent, self.queue_wait)
        # A client calling in a loop past the bound would log a warning a call.
        self.refused = Repeats(log, "calls refused (--max-concurrent)")
        self.session = session
        self.image_urls = image_url_prefixes(*image_urls)  # this server's own, never global
        self.departures = Departures()  # calls whose HTTP client went away
        self.tools: dict[str, tuple[Branch, str | None, types.Tool]] = {}
        for name in expose:
            branch = session.get_branch(name)  # UnknownBranch names what is missing
            self._add(branch, None, _ask_tool(branch))
            for operation in list(branch.operations):
                spec = _operation_tool(branch, operation)
                if spec is not None:
                    self._add(branch, operation, spec)

    def _add(self, branch: Branch, operation: str | None, spec: types.Tool) -> None:
        if spec.name in self.tools:
            raise ValueError(f"two exposed tools would be called {spec.name!r}")
        self.tools[spec.name] = (branch, operation, spec)

    async def call(self, name: str, arguments: dict[str, Any], server: Server[Any, Any]) -> Any:
        """Run one tool call in a place of ``max_concurrent``.

        Raises:
            McpBusy: no place came free within ``queue_wait`` (nothing was sent).
        """
        if not await self.places.take():
            self.refused.warning(
                "MCP: refused a call of %.100r: %d calls running", name, self.max_concurrent
            )
            raise McpBusy(
                f"{self.max_concurrent} calls are being served (--max-concurrent); "
                "try again shortly"
            )
        try:
            return await self._call(name, arguments, server)
        finally:
            self.places.give_back()

    async def _call(self, name: str, arguments: dict[str, Any], server: Server[Any, Any]) -> Any:
        entry = self.tools.get(name)
        if entry is None:
            raise ValueError(f"no tool {name!r} (this server offers: {', '.join(self.tools)})")
        branch, operation, _ = entry
        if operation is None:
            instruction = arguments.get("instruction")
            if not isinstance(instruction, str):
                raise ValueError("ask tools take one string argument, 'instruction'")
            command: Any = ChatAndRecord(instruction)
        else:
            # The client's arguments are data from outside, as a request line's are:
            # decoded the same way (a model field may only name one of the branch's
            # models; 'budget' is refused) and bounded (pride.messages.limits).
            data = {"type": "Call", "operation": operation, "kwargs": arguments}
            command = structure(data, WorkCommand)
            check_untrusted(command, image_urls=self.image_urls)
        context = server.request_context
        token = context.meta.progressToken if context.meta is not None else None
        with self.departures.watch(context) as watched:
            if token is None:
                reply = await send(branch, command)
                try:
                    result = await reply.result()
                except BaseException:
                    reply.cancel("the MCP client cancelled the request")
                    raise
            else:
                result = await _with_progress(self.session, branch, command, context, token)
        if watched.cancelled_caught:
            raise ConnectionError(f"the client of the call to {name!r} closed its connection")
        if isinstance(result, dict):
            return result
        text = result if isinstance(result, str) else dump_json(result, replace=True)
        return [types.TextContent(type="text", text=text)]


def _ask_tool(branch: Branch) -> types.Tool:
    return types.Tool(
        name=local_name("ask_", branch.name),
        description=ask_description(branch),
        inputSchema={
            "type": "object",
            "properties": {"instruction": {"type": "string", "description": "What to ask."}},
            "required": ["instruction"],
            "additionalProperties": False,
        },
    )


def _operation_tool(branch: Branch, operation: str) -> types.Tool | None:
    function = branch.operations.get(operation)
    if function is None:
        return None
    try:
        described = Tool(
            functools.partial(function, branch), name=local_name(f"{branch.name}_", operation)
        )
    except (TypeError, ValueError) as exc:
        log.warning(
            "operation %r of branch %r is not exposed over MCP: %s", operation, branch.name, exc
        )
        return None
    return types.Tool(
        name=described.name,
        description=described.description or f"Run the operation {operation!r} of {branch.name!r}.",
        inputSchema=described.parameters,
    )


async def _with_progress(
    session: Any, branch: Branch, command: Any, context: Any, token: str | int
) -> Any:
    """Run ``command``, telling the client about the turn's messages as they are recorded.

    The subscription is made before the command is sent, so the turn's first
    messages are not missed.
    """
    events_send, events_receive = trio.open_memory_channel[str](PROGRESS_QUEUE)
    dropped = 0
    reply: Any = None
    # The turn may record its first messages before `send` returns the reply
    # (and with it the turn id): notes are held by turn id until it is known.
    early: dict[Any, list[str]] = {}

    def put(note: str) -> None:
        nonlocal dropped
        try:
            events_send.send_nowait(note)
        except (trio.WouldBlock, trio.ClosedResourceError):
            dropped += 1

    def on_signal(signal: Signal) -> None:
        turn_id = getattr(signal, "turn_id", None)
        note = _describe(signal)
        if turn_id is None or note is None:
            return
        ours = None if reply is None else reply.turn_id
        if ours is None:
            if len(early) < 8 and len(early.setdefault(turn_id, [])) < PROGRESS_QUEUE:
                early[turn_id].append(note)
            return
        if early:
            for held in early.pop(ours, []):
                put(held)
            early.clear()
        if turn_id == ours:
            put(note)

    def matches(signal: Signal) -> bool:
        return signal.branch_id == branch.id

    session.observe(matches, handler=on_signal)
    outcome: list[Any] = []
    try:
        reply = await send(branch, command)
        async with trio.open_nursery() as nursery:
            if reply.turn_id is not None:
                for held in early.pop(reply.turn_id, []):
                    put(held)
                early.clear()

            async def wait() -> None:
                try:
                    outcome.append(await reply.result())
                except BaseException as exc:
                    outcome.append(exc)
                    raise
                finally:
                    events_send.close()

            nursery.start_soon(wait)
            count = 0
            async for note in events_receive:
                count += 1
                await context.session.send_progress_notification(
                    token, count, None, note, related_request_id=context.request_id
                )
    except BaseException as exc:
        if reply is not None:
            reply.cancel("the MCP client cancelled the request")
        if isinstance(exc, BaseExceptionGroup):
            raise exc.exceptions[0] from None
        raise
    finally:
        session.unobserve(on_signal)
        if dropped:
            log.warning("MCP request %s: %d progress notes dropped", context.request_id, dropped)
    return outcome[0]


def _describe(signal: Signal) -> str | None:
    if isinstance(signal, ToolProgress):
        total = f"/{signal.total:g}" if signal.total is not None else ""
        note = f": {signal.message}" if signal.message else ""
        return f"tool {signal.function}: {signal.progress:g}{total}{note}"
    if isinstance(signal, MessageAdded):
        message = signal.message
        if isinstance(message, ActionRequest):
            return f"calling tool {message.function}"
        if isinstance(message, ActionResponse):
            return f"tool {message.function} {'failed' if message.error else 'answered'}"
        if isinstance(message, AssistantResponse):
            return "the model answered"
    return None


def build_server(
    session: Any, expose: Sequence[str], *, image_urls: Sequence[str] = ()
) -> Server[Any, Any]:
    """An SDK low-level ``Server`` whose tools run turns of ``session``'s exposed branches.

    ``image_urls``: image URL prefixes an operation's arguments may carry
    besides ``data:`` URLs (`pride.messages.limits.image_url_prefixes`);
    none by default. Each server keeps its own.

    Raises:
        UnknownBranch: a name in ``expose`` is not a member branch.
        ValueError: ``expose`` is empty, two tools would share a name, or a
            prefix in ``image_urls`` allows too much.
    """
    return _server(_Exposed(session, expose, image_urls))


def _server(exposed: _Exposed) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("pride", version=__version__)

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [spec for _, _, spec in exposed.tools.values()]

    @server.call_tool()  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        return await exposed.call(name, arguments, server)

    return server


async def serve_mcp(
    session: Any,
    expose: Sequence[str],
    *,
    http: int | None = None,
    host: str = "127.0.0.1",
    image_urls: Sequence[str] = (),
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    send_timeout: float = SEND_TIMEOUT,
    max_concurrent: int = MAX_CONCURRENT,
    max_watchers: int = MAX_WATCHERS,
    max_sessions: int = MAX_SESSIONS,
    queue_wait: float = QUEUE_WAIT,
    task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``session``'s branches named in ``expose`` to MCP clients, until cancelled.

    Over stdio (default) it returns when the client closes stdin. With
    ``http=PORT`` it serves streamable HTTP at ``http://HOST:PORT/mcp``
    (``host`` defaults to 127.0.0.1: exposing agents beyond this machine is a
    deliberate choice) until cancelled; ``http=0`` lets the system choose a
    free port. ``image_urls`` are as for `build_server`.

    Over HTTP a request whose ``Host`` is not the server's own is refused
    with 421 and one from a foreign browser ``Origin`` with 403, against DNS
    rebinding (`pride.messages.origins`); ``allow_hosts`` and
    ``allow_origins`` name more to accept (a reverse proxy's name, ``*`` for
    any). An HTTP client that takes none of an answer's bytes for
    ``send_timeout`` seconds (default `SEND_TIMEOUT`, 30) is taken for gone:
    its calls' turns are cancelled, as a client's whose connection closed.

    Bounds, whoever the clients are: ``max_concurrent`` tool calls run at once
    (over stdio too; default `MAX_CONCURRENT`); over HTTP ``max_watchers`` GET
    streams are open at once (`MAX_WATCHERS`), places of their own, and
    ``max_sessions`` MCP sessions (`MAX_SESSIONS`). A call or a GET stream waits
    up to ``queue_wait`` seconds (`QUEUE_WAIT`) for a place; then a call is an
    error result naming ``--max-concurrent`` (`McpBusy`), a GET stream is 503
    naming ``--max-watchers``, and a session past the bound is 503 naming
    ``--max-sessions``, each with nothing else held.

    Started with ``await nursery.start(serve_mcp, ...)``, it reports the
    endpoint's URL once the socket listens (with the port actually bound,
    which is how a caller learns the port ``http=0`` got), or None over stdio.

    Raises:
        UnknownBranch: a name in ``expose`` is not a member branch.
        ValueError: ``expose`` is empty, a prefix in ``image_urls`` allows too much,
            or a bound is not a positive int (``queue_wait`` a negative number).
        TypeError: ``queue_wait`` is not a number.
        OSError: the HTTP address cannot be bound (a port in use, say).
    """
    exposed = _Exposed(
        session, expose, image_urls, max_concurrent=max_concurrent, queue_wait=queue_wait
    )
    watchers = Places(_count("max_watchers", max_watchers), exposed.queue_wait)
    _count("max_sessions", max_sessions)
    server = _server(exposed)
    options = server.create_initialization_options()
    watch_refused = Repeats(log, "GET streams refused (--max-watchers)")
    try:
        if http is None:
            async with _stdio() as (read, write):
                task_status.started(None)
                await server.run(read, write, options)
            return
        await _serve_http(
            server,
            host=host,
            port=http,
            allowed=(allow_hosts, allow_origins),
            departures=exposed.departures,
            send_timeout=send_timeout,
            watchers=watchers,
            watch_refused=watch_refused,
            max_sessions=max_sessions,
            task_status=task_status,
        )
    finally:
        exposed.refused.flush()
        watch_refused.flush()


@contextlib.asynccontextmanager
async def _stdio() -> AsyncIterator[tuple[Any, Any]]:
    """stdin/stdout as non-blocking trio streams (cancellable, unlike a thread reading stdin)."""
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    reader, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes, writer = anyio.create_memory_object_stream[SessionMessage](0)
    pending = trio.Semaphore(MAX_PENDING_REQUESTS, max_value=MAX_PENDING_REQUESTS)

    async def pump_out() -> None:
        async with writer:
            async for message in writer:
                data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await stdout.send_all(data.encode() + b"\n")
                if isinstance(message.message.root, types.JSONRPCResponse | types.JSONRPCError):
                    with contextlib.suppress(ValueError):  # more answers than requests
                        pending.release()  # answered and written: the next may be read

    async with stdin, stdout, trio.open_nursery() as nursery:
        nursery.start_soon(_pump_in, stdin, reader, pending)
        nursery.start_soon(pump_out)
        try:
            yield session_reads, session_writes
        finally:
            nursery.cancel_scope.cancel()


async def _pump_in(stdin: Any, reader: Any, pending: trio.Semaphore | None = None) -> None:
    """Split the client's bytes into lines, and hand the session the message of each.

    A line past ``DEFAULT_MAX_MESSAGE_BYTES`` ends the client's input (logged),
    as its end does; a last line the client did not end is dropped. A request
    takes one of ``pending``'s places (the writer gives it back once its answer
    is written) and waits for one: a client that does not read its answers
    cannot have more than `MAX_PENDING_REQUESTS` of them held in memory.

    A line that is not a JSON-RPC message (a batch among them: MCP has none) is
    skipped; the first `BAD_LINES_LOGGED` are logged, short, the rest counted in
    a line a minute and once the input ends (`Repeats`), so a client writing
    nothing else cannot flood the log, and none goes unsaid.
    """
    lines = LineSplitter(DEFAULT_MAX_MESSAGE_BYTES, ends="lf")
    bad = Repeats(log, "lines of the MCP client that are not JSON-RPC", first=BAD_LINES_LOGGED)
    async with reader:
        try:
            while chunk := await stdin.receive_some(65536):
                lines.feed(chunk)
                while (line := lines.next_line()) is not None:
                    if not line.strip():
                        continue
                    try:
                        message = types.JSONRPCMessage.model_validate_json(line)
                    except ValueError as exc:
                        batch = line.lstrip()[:1] == b"["
                        bad.warning(
                            "MCP client sent a line that is not JSON-RPC (skipped): %.300s",
                            "a batch (MCP has none since 2025-06-18)" if batch else exc,
                        )
                        continue
                    if pending is not None and isinstance(message.root, types.JSONRPCRequest):
                        await pending.acquire()
                    await reader.send(SessionMessage(message))
        except LineTooLong:
            log.error("MCP client sent a message over %d bytes", DEFAULT_MAX_MESSAGE_BYTES)
        finally:
            bad.flush()


class _Endpoint:
    """The task status hypercorn is given: it turns the bound addresses into the MCP URL."""

    def __init__(self, outer: trio.TaskStatus[str | None]) -> None:
        self._outer = outer

    def started(self, binds: list[str] | None = None) -> None:
        # hypercorn reports what it bound ("http://127.0.0.1:54321"): the real
        # port, which is the only way to learn the one port 0 was given.
        if not binds:
            raise RuntimeError("hypercorn started without a bound address")
        self._outer.started(f"{binds[0]}/mcp")


async def _serve_http(
    server: Server[Any, Any],
    *,
    host: str,
    port: int,
    allowed: tuple[Sequence[str], Sequence[str]],
    departures: Departures,
    send_timeout: float,
    watchers: Places,
    watch_refused: Repeats,
    max_sessions: int,
    task_status: trio.TaskStatus[str | None],
) -> None:
    from hypercorn.trio import serve
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=server, max_sessions=max_sessions)
    # pride binds the socket and hypercorn serves it (pride._hypercorn says why).
    listening = await bound_socket(host, port, "serve MCP")
    guard = Guard(host, listening.getsockname()[1], *allowed)
    config = hypercorn_config(listening, log)
    try:
        # The writes' nursery outlives hypercorn: a write left waiting on a client
        # that reads nothing ends when hypercorn, stopping, closes its connection.
        with listening:
            async with trio.open_nursery() as writes, manager.run():
                endpoint = manager.handle_request
                app = door(
                    guard,
                    departures,
                    endpoint,
                    writes,
                    send_timeout,
                    watchers=watchers,
                    refused=watch_refused,
                    max_sessions=max_sessions,
                )
                await serve(app, config, task_status=_Endpoint(task_status))
    except BaseExceptionGroup as group:
        # hypercorn's nurseries and the session manager's task group each wrap
        # what serve raised (a port in use, say); the caller opened none of
        # them, so it gets the one error.
        sole = sole_exception(group)
        if sole is group:
            raise
        raise sole from None
