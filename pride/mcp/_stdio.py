"""The stdio transport: one server subprocess, newline-delimited JSON-RPC on its pipes.

Why not the SDK's ``stdio_client``: it hides the process (no pid to report or
to make sure of), buffers a line without limit (a server that writes without
a newline grows the client's memory forever), and its termination sequence
runs unshielded, so a cancelled shutdown can skip it. Here the process is
started with `trio.lowlevel.open_process` in its own process group,
every line is capped at ``max_message_bytes`` (cut by pride's one bounded
splitter, `pride._lines.LineSplitter`), and the end always runs
shielded and bounded: close stdin and wait for the exit (until the stop
deadline), then SIGTERM the group, then SIGKILL. Parsing and the protocol
itself stay the SDK's (``JSONRPCMessage`` and ``ClientSession``), each line
read by `pride.mcp._wire.read_message`.

The transport is an async context manager yielding the two anyio streams a
``ClientSession`` reads and writes. If the server exits or its pipes break
while the body runs, the body is cancelled and the context manager raises
`McpServerError`, naming the exit code and the last stderr lines.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import trio
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from .._lines import LineSplitter, LineTooLong
from .._repeats import Repeats
from ._errors import McpServerError
from ._family import end_family, family
from ._spec import McpServerSpec
from ._wire import Unreadable, read_message

__all__ = ["EXIT_WAIT", "StdioProcess", "stdio_transport"]

log = logging.getLogger("pride.mcp")

EXIT_WAIT = 2.0
"""Seconds a server gets to exit after its stdin closes when no deadline is set (the SDK's 2 s)."""

BROKEN_EXIT_WAIT = 0.5
"""Seconds a server whose connection broke gets to exit before SIGTERM."""

TERM_WAIT = 1.0
"""Seconds between SIGTERM and SIGKILL."""

STDERR_TAIL = 20
"""Lines of the server's stderr kept for error messages."""

_STDERR_LINE = 2_000
_BAD_LINES_LOGGED = 20
_READ_CHUNK = 65_536


class StdioProcess:
    """The subprocess of one incarnation: its pid, exit code and stderr tail."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.process: trio.Process | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        # A server printing to stdout in a loop would log a warning a line.
        self.bad = Repeats(
            log, f"lines of MCP server {name!r} that are not JSON-RPC", first=_BAD_LINES_LOGGED
        )

    @property
    def bad_lines(self) -> int:
        """Lines of this incarnation's stdout that were not JSON-RPC (ignored), in all."""
        return self.bad.seen

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def describe_exit(self) -> str:
        """``exited with code 3; its stderr ended: ...`` (what an error message says)."""
        code = None if self.process is None else self.process.returncode
        text = "is still running" if code is None else f"exited with code {code}"
        if code is not None and code < 0:
            text = f"was killed by signal {-code}"
        if self.stderr_tail:
            text += "; its stderr ended with:\n  " + "\n  ".join(self.stderr_tail)
        return text


@contextlib.asynccontextmanager
async def stdio_transport(
    spec: McpServerSpec,
    state: StdioProcess,
    stop_deadline: Callable[[], float | None],
    on_broken: Callable[[McpServerError], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Run the server's command and yield ``(read_stream, write_stream)`` for a ClientSession.

    Args:
        spec: the server (its ``command``, ``env``, ``cwd``, ``max_message_bytes``).
        state: filled in with the process (pid, exit code, stderr tail).
        stop_deadline: returns the trio time by which the process must be gone,
            or None (then it gets `EXIT_WAIT` after stdin closes).
        on_broken: told first when the server exits or breaks its pipes
            (before the body is cancelled), so calls in flight can say why.

    Raises:
        McpServerError: the command cannot be run, or the server exited or
            broke its pipes while the body ran.
    """
    assert spec.command is not None
    env = get_default_environment()
    if spec.env is not None:
        env.update(spec.env)
    try:
        process = await trio.lowlevel.open_process(
            list(spec.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=spec.cwd,
            start_new_session=True,  # its own process group: the end signals the whole tree
        )
    except OSError as exc:
        raise McpServerError(
            f"MCP server {spec.name!r}: cannot run {spec.command[0]!r}: "
            f"{exc.strerror or type(exc).__name__}"
        ) from exc
    state.process = process
    log.info("MCP server %r started (pid %d)", spec.name, process.pid)
    reader, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes, writer = anyio.create_memory_object_stream[SessionMessage](0)
    broken = _Broken(on_broken)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_read_stdout, spec, state, reader, broken, nursery.cancel_scope)
            nursery.start_soon(_write_stdin, spec, state, writer, broken, nursery.cancel_scope)
            nursery.start_soon(_read_stderr, spec, state)
            try:
                yield session_reads, session_writes
            finally:
                nursery.cancel_scope.cancel()  # the pumps end with the body
    finally:
        state.bad.flush()  # the count of bad lines not logged yet, at the incarnation's end
        deadline = stop_deadline()
        if deadline is None and broken.error is not None:  # it is broken: no long goodbye
            deadline = trio.current_time() + BROKEN_EXIT_WAIT
        with trio.CancelScope(shield=True):
            await _end(spec.name, process, deadline)
            for stream in (reader, session_reads, session_writes, writer):
                await stream.aclose()
    if broken.error is not None:
        raise broken.error


class _Broken:
    """The first way the connection broke; reported once, then the pumps are cancelled."""

    def __init__(self, on_broken: Callable[[McpServerError], None]) -> None:
        self.error: McpServerError | None = None
        self._on_broken = on_broken

    def report(self, error: McpServerError, scope: trio.CancelScope) -> None:
        if self.error is None:
            self.error = error
            self._on_broken(error)
        scope.cancel()


async def _read_stdout(
    spec: McpServerSpec,
    state: StdioProcess,
    reader: Any,
    broken: _Broken,
    scope: trio.CancelScope,
) -> None:
    """Frame stdout into lines, parse each as JSON-RPC, hand it to the session.

    A line past ``max_message_bytes`` breaks the connection (`McpServerError`);
    a last line the server did not end is dropped with its exit.
    """
    process = state.process
    assert process is not None and process.stdout is not None
    lines = LineSplitter(spec.max_message_bytes, ends="lf")
    try:
        while chunk := await process.stdout.receive_some(_READ_CHUNK):
            lines.feed(chunk)
            while (line := lines.next_line()) is not None:
                await _deliver(spec.name, state, line, reader)
    except (trio.BrokenResourceError, trio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # our end closed (the session is going away)
    except LineTooLong:
        limit = spec.max_message_bytes
        error = McpServerError(
            f"MCP server {spec.name!r} sent a message over {limit} bytes "
            "(max_message_bytes); the connection was closed"
        )
        broken.report(error, scope)
        return
    # End of output: the server exited (or closed stdout). Give it a moment to report its code.
    with trio.move_on_after(0.5):
        await process.wait()
    broken.report(
        McpServerError(f"MCP server {spec.name!r} closed its output: it {state.describe_exit()}"),
        scope,
    )


async def _deliver(name: str, state: StdioProcess, line: bytes, reader: Any) -> None:
    if not line.strip():
        return
    try:
        message = await read_message(line)
    except Unreadable as exc:
        # Servers that print to stdout are a common bug; one bad line is not a broken connection.
        state.bad.warning(
            "MCP server %r wrote a line that is not JSON-RPC (ignored): %.200r (%s)",
            name,
            line,
            exc,
        )
        return
    await reader.send(SessionMessage(message))


async def _write_stdin(
    spec: McpServerSpec,
    state: StdioProcess,
    writer: Any,
    broken: _Broken,
    scope: trio.CancelScope,
) -> None:
    process = state.process
    assert process is not None and process.stdin is not None
    try:
        async for message in writer:
            data = message.message.model_dump_json(by_alias=True, exclude_none=True)
            await process.stdin.send_all(data.encode() + b"\n")
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        if process.returncode is None:
            with trio.move_on_after(0.5):
                await process.wait()
        broken.report(
            McpServerError(
                f"MCP server {spec.name!r} stopped reading its input "
                f"({type(exc).__name__}): it {state.describe_exit()}"
            ),
            scope,
        )


async def _read_stderr(spec: McpServerSpec, state: StdioProcess) -> None:
    """Keep the last stderr lines (for error messages) and log each at DEBUG."""
    process = state.process
    assert process is not None and process.stderr is not None
    buffer = bytearray()
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        while chunk := await process.stderr.receive_some(_READ_CHUNK):
            buffer += chunk
            lines: list[bytes] = [bytes(line) for line in buffer.split(b"\n")]
            buffer = bytearray(lines.pop())
            if len(buffer) > _STDERR_LINE:  # a line without end: keep its start
                lines.append(bytes(buffer[:_STDERR_LINE]))
                buffer.clear()
            for raw in lines:
                text = raw.decode("utf-8", "replace").rstrip()[:_STDERR_LINE]
                if text:
                    state.stderr_tail.append(text)
                    log.debug("MCP server %r stderr: %s", spec.name, text)


async def _end(name: str, process: trio.Process, deadline: float | None) -> None:
    """Close stdin, wait for the exit until ``deadline``, then SIGTERM, then SIGKILL the group,
    and the processes that left the group (`pride.mcp._family`).

    Runs shielded by the caller; every wait is bounded.
    """
    # Found while the server still runs: a daemon's parent may be gone once it has exited.
    descendants = await trio.to_thread.run_sync(family, process.pid)
    if process.stdin is not None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await process.stdin.aclose()
    if deadline is None:
        deadline = trio.current_time() + EXIT_WAIT
    with trio.move_on_at(deadline):
        await process.wait()
    for sig, wait in ((signal.SIGTERM, TERM_WAIT), (signal.SIGKILL, None)):
        if process.returncode is not None:
            break
        log.warning("MCP server %r did not exit in time; sending %s", name, sig.name)
        _signal_group(process.pid, sig)
        if wait is None:
            await process.wait()
        else:
            with trio.move_on_after(wait):
                await process.wait()
    # Anything the server left in its group goes with it, and in its session, or below it.
    _signal_group(process.pid, signal.SIGKILL)
    descendants.update(await trio.to_thread.run_sync(family, process.pid))
    ended = await trio.to_thread.run_sync(end_family, descendants)
    if ended:
        log.info("MCP server %r: %d processes it left outside its group were ended", name, ended)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with contextlib.suppress(trio.ClosedResourceError, OSError):
                await stream.aclose()
    log.info("MCP server %r ended: %s", name, _exit_text(process.returncode))


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"
