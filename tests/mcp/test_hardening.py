"""Hostile MCP servers, round 2 (issue 36): each lie or flood stays the server's problem.

Against the hand-written fakes (fake_server.py over stdio, fake_http_server.py
over HTTP on 127.0.0.1), real subprocesses that start in milliseconds. Every
``trio.fail_after`` here is a guard against a hang, far above what the call
takes, never a measurement.
"""

from __future__ import annotations

import itertools
import logging
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import trio
import trio.testing

from pride import ActionCall, Branch, BranchStarted, BranchStopped, Session
from pride.mcp import McpServer, McpServerError, McpServerSpec, McpToolError
from pride.mcp._calls import PROGRESS_BUFFER, PROGRESS_TEXT
from pride.mcp._logs import LOG_BURST
from pride.mcp._server import REFRESH_INTERVAL
from pride.mcp._stdio import StdioProcess, _Broken, _read_stdout

from .conftest import announced_url, fake_command
from .support import Waiter

FAKE_HTTP = Path(__file__).parent / "fake_http_server.py"


def _says(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "pride.mcp" and " says: " in r.getMessage()]


# ------------------------------------------------------------------ item 6


async def test_an_error_with_the_connection_closed_code_is_the_server_s_answer() -> None:
    """-32000 is the SDK's own code for a closed connection. Sent by the server it is an
    error of that one call: nothing restarts, the call in flight beside it is answered."""
    async with Session(max_restarts=0) as session:
        server = await session.spawn_mcp("liar", command=fake_command("liar"))
        pid = server.pid
        held = []

        async def hold() -> None:
            held.append(await server.call_tool("hold"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()  # "hold" is written, waiting
            for _ in range(5):
                with pytest.raises(McpToolError, match="MCP server 'liar' refused the call"):
                    await server.call_tool("err")
        assert held[0].content[0].text == "held"
        assert server.pid == pid
        assert server.statistics().starts == 1


# ------------------------------------------------------------------ item 7


async def test_call_timeout_bounds_the_whole_call_when_the_server_stops_reading() -> None:
    """The server reads nothing after listing its tools: writes fill the pipe and block.
    Each call still ends at call_timeout, saying so, and the session stops."""
    async with Session(grace=0.2) as session:
        server = await session.spawn_mcp("deaf", command=fake_command("deaf"), call_timeout=0.5)
        big = {"text": "x" * 300_000}  # more than a pipe holds
        failures: list[str] = []

        async def call() -> None:
            with pytest.raises(McpToolError) as failed:
                await server.call_tool("echo", big)
            failures.append(str(failed.value))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call)
        assert len(failures) == 3
        assert all("call_timeout=0.5" in text for text in failures), failures
        assert server.statistics().in_flight == 0


# ------------------------------------------------------------------ item 9


HANG_GUARD = 60.0
"""Seconds a call of the schema test may take before it counts as hung. The bounds
under test are CPU time of the checking thread (1 s), so wall-clock guards near them
failed at load 10; these only catch a frozen loop."""


async def test_untrusted_schemas_are_applied_within_bounds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A backtracking pattern, a $ref loop, an anyOf fan-out and uniqueItems over
    thousands of objects each end in a clear error or answer, within bounds; a schema
    nested past the SDK parser's limit leaves out that tool only."""
    caplog.set_level(logging.WARNING, "pride.mcp")
    async with Session() as session:
        server = await session.spawn_mcp("traps", command=fake_command("schemas"), init_timeout=5)
        assert "deep" not in server.tool_names and "ping" in server.tool_names
        assert "'deep' is not offered: its input schema nests deeper than" in caplog.text
        branch = await session.spawn(Branch(name="b", tools=[server]))

        async def error_of(tool: str, arguments: dict[str, object]) -> str:
            with trio.fail_after(HANG_GUARD):
                [response] = await branch.act(ActionCall(tool, arguments))
            assert response.error is not None, response
            return response.error

        slow = "a" * 36 + "!"
        for tool, arguments in [("redos", {"s": slow}), ("redos_keys", {slow: {}})]:
            error = await error_of(tool, arguments)
            assert error.startswith("ToolArgumentError:"), error
            assert "could not be checked against its schema within" in error
        for tool, arguments in [("loop", {}), ("loop_inside", {"a": 1})]:
            error = await error_of(tool, arguments)
            assert error.startswith("ToolArgumentError:"), error
            assert "refers to itself" in error
        error = await error_of("fanout", {})
        assert "could not be checked against its schema within" in error

        distinct = [{"n": n, "tags": ["x", n]} for n in range(3_000)]
        with trio.fail_after(HANG_GUARD):
            [ok] = await branch.act(ActionCall("unique", {"items": distinct}))
        assert ok.error is None and ok.output == "pong"
        twice = [*distinct, {"tags": ["x", 7.0], "n": 7}]  # equal as JSON: 7 == 7.0
        error = await error_of("unique", {"items": twice})
        assert "invalid arguments for tool 'unique' at items: " in error
        assert "has non-unique elements" in error
        assert (await branch.act(ActionCall("ping", {})))[0].output == "pong"

        with trio.fail_after(HANG_GUARD), pytest.raises(McpToolError) as failed:
            await server.call_tool("redos_out")
        assert "could not be checked against its output schema within" in str(failed.value)
        assert server.statistics().starts == 1


# ------------------------------------------------------------------ item 10


async def test_a_tool_with_an_empty_name_is_left_out_and_the_rest_serve(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "pride.mcp")
    async with Session(max_restarts=0) as session:
        server = await session.spawn_mcp("blank", command=fake_command("empty-name"))
        branch = await session.spawn(Branch(name="b"))
        assert branch.register_mcp(server) == ("ping", "relist")
        assert branch.register_mcp(server, prefix="x_") == ("x_ping", "x_relist")
        assert "tool '' is not offered: its name is empty" in caplog.text
        before = server.listings
        await branch.act(ActionCall("relist", {}))
        with trio.fail_after(10):
            await server.wait_listing(before + 1)
        assert set(branch.tools) == {"ping", "relist", "x_ping", "x_relist"}
        assert (await branch.act(ActionCall("ping", {})))[0].output == "pong"
        assert server.statistics().starts == 1


# ------------------------------------------------------------------ item 11


async def test_server_log_messages_are_rate_limited(
    caplog: pytest.LogCaptureFixture, mock_clock: trio.testing.MockClock
) -> None:
    """2,000 log notifications at "critical": a burst is logged (at WARNING at most),
    the rest counted and summed up in one record; the call is answered. (trio's clock
    stands still here, so the bucket never refills: exactly the burst is logged.)"""
    caplog.set_level(logging.DEBUG, "pride.mcp")
    async with Session() as session:
        server = await session.spawn_mcp("chatty", command=fake_command("chatty", "2000"))
        result = await server.call_tool("flood")
        assert result.content[0].text == "flooded"
        says = _says(caplog)
        assert len(says) == LOG_BURST
        assert all(record.levelno <= logging.WARNING for record in says)
        assert all(len(record.getMessage()) < 2_200 for record in says)
        assert server.statistics().logs_dropped == 2_000 - LOG_BURST
    dropped = 2_000 - LOG_BURST
    summary = [r for r in caplog.records if "log messages dropped" in r.getMessage()]
    assert summary and f"{dropped} log messages dropped" in summary[-1].getMessage()


# ------------------------------------------------------------------ item 12


@pytest.fixture
def fake_http(request: pytest.FixtureRequest) -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(FAKE_HTTP), request.param],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield announced_url(process, b"fake-http: serving on ")
    finally:
        assert process.stdout is not None
        process.stdout.close()
        process.kill()
        process.wait()


@pytest.mark.parametrize("fake_http", ["endless-line", "endless-event"], indirect=True)
async def test_an_endless_sse_line_or_event_is_cut_at_max_message_bytes(fake_http: str) -> None:
    """The stream is dropped once a line or an event passes the bound, not read whole."""
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp(
            "endless", url=fake_http, max_message_bytes=65_536, restart="temporary"
        )
        tracemalloc.start()
        try:
            with trio.fail_after(20), pytest.raises(McpServerError, match="over 65536 bytes"):
                await server.call_tool("endless")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 * 1024 * 1024, f"{peak:,} bytes held"
        stopped = await waiter.wait_for(lambda s: isinstance(s, BranchStopped))
        assert stopped.reason == "crash"


@pytest.mark.parametrize("fake_http", ["endless-get"], indirect=True)
async def test_an_endless_get_stream_is_cut_at_max_message_bytes(fake_http: str) -> None:
    """The GET stream (messages outside any request) is bounded the same way, and breaking
    it is the same clear crash."""
    async with Session() as session:
        waiter = Waiter(session)
        try:  # the stream opens as the server initialises: it may break before spawn returns
            await session.spawn_mcp(
                "endless", url=fake_http, max_message_bytes=65_536, restart="temporary"
            )
        except McpServerError as exc:
            error = str(exc)
        else:
            with trio.fail_after(20):
                stopped = await waiter.wait_for(lambda s: isinstance(s, BranchStopped))
            assert stopped.reason == "crash"
            error = stopped.error or ""
        assert "sent a message over 65536 bytes" in error, error


@pytest.mark.parametrize("fake_http", ["never-answers"], indirect=True)
async def test_an_http_call_that_ends_unanswered_closes_its_request(fake_http: str) -> None:
    """A call past call_timeout (or cancelled) ends its POST too: left open, each held a
    pooled connection until the read timeout (300 s), and a hundred of them took every
    connection of the pool, so no call reached even a healthy tool."""
    async with Session() as session:
        server = await session.spawn_mcp("slow", url=fake_http, call_timeout=0.3)

        async def hanging() -> int:
            return int((await server.call_tool("hanging")).content[0].text)

        for _ in range(3):
            with pytest.raises(McpToolError, match="call_timeout"):
                await server.call_tool("hang")
        with trio.fail_after(10):
            while await hanging():  # the server sees each hang-up within 20 ms
                await trio.sleep(0.05)


async def test_tools_whose_names_collide_keep_the_one_registered_first() -> None:
    """a.b and a_b both become a_b: the first is registered (and a warning says so), and
    a list that names them the other way round does not swap the tool behind the name."""
    async with Session() as session:
        server = await session.spawn_mcp("twins", command=fake_command("collide"))
        branch = await session.spawn(Branch(name="b", tools=[server]))
        assert branch.acts.get("a_b").remote_name == "a.b"  # type: ignore[union-attr]
        before = server.listings
        await branch.act(ActionCall("swap", {}))
        with trio.fail_after(10):
            await server.wait_listing(before + 1)
        assert branch.acts.get("a_b").remote_name == "a.b"  # type: ignore[union-attr]
        assert branch.acts.get("a_b").description == "The dotted one."  # type: ignore[union-attr]


async def test_a_server_that_dies_mid_write_is_a_crash_and_restarts() -> None:
    """Half an answer, then the exit: the call fails with the crash (the half line is
    not taken for anything), and the restarted server answers the next call."""
    async with Session() as session:
        waiter = Waiter(session)
        server = await session.spawn_mcp("half", command=fake_command("half"))
        with pytest.raises(McpServerError, match="closed its output: it exited with code 0"):
            await server.call_tool("half")
        with trio.fail_after(10):
            await waiter.wait_for(lambda s: isinstance(s, BranchStarted) and s.restart)
        assert (await server.call_tool("ping")).content[0].text == "pong"


# ------------------------------------------------------------------ the notes


async def test_a_bad_result_and_a_long_error_name_the_server_and_are_cut() -> None:
    async with Session() as session:
        server = await session.spawn_mcp("rude", command=fake_command("rude"))
        with pytest.raises(McpToolError) as bad:
            await server.call_tool("bad-shape")
        assert "MCP server 'rude'" in str(bad.value)
        assert "'bad-shape'" in str(bad.value)
        assert len(str(bad.value)) < 9_000
        with pytest.raises(McpToolError) as long:
            await server.call_tool("long-error")
        assert "MCP server 'rude' refused the call" in str(long.value)
        assert len(str(long.value)) < 8_200
        assert str(long.value).endswith("… (cut)")
        assert (await server.call_tool("ping")).content[0].text == "pong"


async def test_answers_to_requests_never_made_are_dropped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Responses with ids pride never used (one 100,000 characters long), and
    notifications that are not MCP's, do not reach the log whole (the SDK logged
    them at WARNING on the root logger), nor the call: it gets its own answer."""
    caplog.set_level(logging.DEBUG)
    async with Session() as session:
        server = await session.spawn_mcp("rude", command=fake_command("rude"))
        assert (await server.call_tool("stray")).content[0].text == "pong"
        assert (await server.call_tool("ping")).content[0].text == "pong"
    longest = max(len(record.getMessage()) for record in caplog.records)
    assert longest < 3_000


async def test_requests_pride_cannot_read_are_refused_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """1,000 requests that are not MCP's: the SDK refused each with a warning of ~3,500
    characters on the root logger, as many as the server cared to send. Each is still
    refused (an error answer the server reads), the first 20 are logged, short, on
    pride.mcp, the rest counted in one line when the incarnation ends (the 20th said
    further ones were not logged, and their count was said nowhere), and the call
    behind them gets its answer."""
    caplog.set_level(logging.DEBUG)
    async with Session() as session:
        server = await session.spawn_mcp("rude", command=fake_command("rude"))
        assert (await server.call_tool("requests")).content[0].text == "pong"
        assert (await server.call_tool("refusals")).content[0].text == "1000"
        assert server.statistics().starts == 1
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r for r in warnings if r.name != "pride.mcp"] == []
    assert len(warnings) <= 21
    assert max(len(r.getMessage()) for r in warnings) < 500
    [counted] = [
        r.getMessage() for r in warnings if "more messages of MCP server" in r.getMessage()
    ]
    assert counted.startswith("980 more messages of MCP server 'rude' that pride cannot read")
    assert counted.endswith("(1000 in all)")


# ------------------------------------------------------------------ item 8


class _ChecksPerStep(trio.abc.Instrument):
    """The most schema checks a server handle counted within one event-loop task step."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.most = 0
        self._before = 0

    def _checked(self) -> int:
        return self.server.statistics().schemas_checked

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._before = self._checked()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self.most = max(self.most, self._checked() - self._before)


async def test_a_large_tool_list_is_checked_off_the_event_loop_and_only_once() -> None:
    """2,000 tools, each with its own schema: checked in worker threads (no task step of
    the event loop sees more than a few of them done), and a list_changed re-checks only
    what changed."""
    async with Session() as session:
        spec = McpServerSpec(name="many", command=fake_command("many", "2000"), init_timeout=60)
        server = McpServer(spec)
        probe = _ChecksPerStep(server)
        trio.lowlevel.add_instrument(probe)
        try:
            await session.spawn(server)
        finally:
            trio.lowlevel.remove_instrument(probe)
        assert server.statistics().schemas_checked == 2_001
        assert probe.most <= 200, probe.most
        branch = await session.spawn(Branch(name="b"))
        assert len(branch.register_mcp(server)) == 2_001
        before = server.listings
        await branch.act(ActionCall("relist", {}))
        with trio.fail_after(60):
            await server.wait_listing(before + 1)
        assert len(branch.tools) == 2_002 and "tool_2001" in branch.tools
        assert server.statistics().schemas_checked == 2_002  # only the new tool was checked


# ------------------------------------------------------------------ a note: descendants


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_descendants_that_left_the_server_s_process_group_end_with_it() -> None:
    """A child in a process group of its own (setpgid) and one in a session of its own
    (setsid) are ended with their server, as the group is."""
    async with Session(grace=0.5) as session:
        server = await session.spawn_mcp("daemons", command=fake_command("daemons"))
        result = await server.call_tool("spawn")
        pids = [int(pid) for pid in result.content[0].text.split()]
        assert all(not _gone(pid) for pid in pids)
    with trio.fail_after(10):
        while not all(_gone(pid) for pid in pids):
            await trio.sleep(0.05)


# ------------------------------------------------------------------ beyond the items


@pytest.mark.parametrize("fake_http", ["cut-event", "not-an-answer", "accepted"], indirect=True)
async def test_an_http_reply_that_ends_without_the_answer_fails_the_call(fake_http: str) -> None:
    """A POST's reply that ends without the response to its request (an event cut short
    by a server that died mid-write, a body that is no JSON-RPC, a 202 as for a
    notification) fails that call at once: nothing else would ever answer it."""
    async with Session() as session:
        server = await session.spawn_mcp("cut", url=fake_http)
        for _ in range(2):
            with trio.fail_after(10), pytest.raises(McpToolError, match="without an answer"):
                await server.call_tool("endless")
        assert server.running and server.statistics().starts == 1


async def test_a_server_that_never_stops_changing_its_list_is_listed_once_a_second(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Its list_changed after every listing would keep pride listing for good; the
    listings it asks for are taken at most once per REFRESH_INTERVAL (trio's clock
    stands still here, and moves only when the test moves it)."""
    async with Session() as session:
        server = await session.spawn_mcp("restless", command=fake_command("restless"))
        await server.wait_listing(2)  # the first list, and at once the change after it

        async def lists() -> int:
            return int((await server.call_tool("lists")).content[0].text)

        assert await lists() == 2
        mock_clock.jump(REFRESH_INTERVAL)
        await server.wait_listing(3)
        assert await lists() == 3
        assert server.listings == 3


async def test_progress_reports_held_for_a_slow_turn_are_bounded_in_memory() -> None:
    """300 progress reports of 200 KB while the caller takes none: the call holds at most
    PROGRESS_BUFFER of them, each cut short, not 51 MB of messages."""
    async with Session() as session:
        server = await session.spawn_mcp("chatty", command=fake_command("chatty", "300"))
        seen: list[str | None] = []

        async def slow(progress: float, total: float | None, message: str | None) -> None:
            while server.statistics().in_flight:  # hold the first report until the call ends
                await trio.sleep(0.01)
            seen.append(message)

        tracemalloc.start()
        try:
            result = await server.call_tool("progress", on_progress=slow)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result.content[0].text == "progressed"
        assert len(seen) == PROGRESS_BUFFER + 1  # the buffer, and the one the caller held
        assert server.statistics().progress_dropped == 300 - len(seen)
        assert all(message is not None and len(message) <= PROGRESS_TEXT for message in seen)
        assert peak < 16 * 1024 * 1024, f"{peak:,} bytes held"


class _TrickledOutput:
    """A server process whose standard output gives a small piece per read."""

    returncode = 0

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.stdout = self
        self._pieces = pieces

    async def receive_some(self, max_bytes: int) -> bytes:
        return next(self._pieces, b"")

    async def wait(self) -> int:
        return 0


async def test_a_line_trickled_in_small_reads_is_searched_once() -> None:
    """An MCP server's output is hostile: a line it sent a little at a time was
    searched whole for its end at each read (15 MB in reads of 1,000 bytes took
    1.5 s of the event loop, quadratic). Searched once, 48 MB in reads of 100 bytes
    is one line at once (a timeout if it is not): a blank one, skipped, then a line
    that is not JSON-RPC, counted. Not a subprocess: a pipe joins what a slow reader
    has not read yet, so only a reader's own input can be cut this fine."""
    size, piece = 48_000_000, b" " * 100
    pieces = itertools.chain(itertools.repeat(piece, size // len(piece)), [b"\nnot json\n"])
    spec = McpServerSpec(name="trickle", command=["server"], max_message_bytes=2 * size)
    state = StdioProcess("trickle")
    state.process = _TrickledOutput(pieces)  # type: ignore[assignment]
    broken = _Broken(lambda error: None)
    with trio.CancelScope() as scope:
        await _read_stdout(spec, state, None, broken, scope)
    assert state.bad_lines == 1
    assert isinstance(broken.error, McpServerError) and "closed its output" in str(broken.error)
