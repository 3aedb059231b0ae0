"""Structured logs for ``pride run``: one JSON object per line on standard error.

Every record carries ``time`` (UTC, ISO 8601), ``level``, ``logger`` and
``message``; records emitted from inside a turn also carry ``branch``,
``branch_id`` and ``turn_id`` (read from the turn binding of the task that
logged), and the CLI adds ``request_id`` where it knows one. A finished
turn's record adds ``usage`` (its tokens, cost and calls), ``session_usage``
(the whole tree's so far) and ``in_flight`` (the branches still running a
turn). An exception adds ``exception`` (the formatted traceback).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ..actors import turn
from ..messages.codec import dump_json
from ._descriptors import write_all

__all__ = [
    "CONTEXT_FIELDS",
    "DATA_FIELDS",
    "FLUSH",
    "MAX_BUFFERED",
    "MAX_MESSAGE",
    "JsonFormatter",
    "StderrHandler",
    "TurnContext",
    "configure",
    "say",
    "write_off_the_loop",
]

CONTEXT_FIELDS = ("branch", "branch_id", "turn_id", "request_id")
"""Record attributes copied into the JSON object when present."""

DATA_FIELDS = ("usage", "session_usage", "in_flight")
"""Record attributes copied as JSON data (objects, lists) when present: a finished
turn's usage, the tree's usage so far, the branches still running a turn."""

MAX_BUFFERED = 1 << 20
"""Characters of log records that may wait for standard error (a MiB); past it the
records are dropped and counted (`StderrHandler`)."""
FLUSH = 1.0
"""Seconds the records still queued at the end get to be written to standard error."""

MAX_MESSAGE = 8192
"""Characters of a record's message written; the rest is cut and counted. A message
may quote hostile input (an unknown type tag of a request line, up to 16 MiB), and
each such line would otherwise be logged whole."""

R = TypeVar("R")

# Libraries that log every HTTP request at INFO; quiet unless DEBUG was asked for.
_CHATTY = ("httpx", "httpcore")

# Built once: ``json.dumps`` with any option builds a new encoder per call, which
# was half the cost of a record (pride run logs one per finished turn).
# Strict: a record may carry any number (usage summed to infinity, an app's own
# NaN), and a log line is JSON a reader parses like any other pride writes.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False)


def _cut(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    return f"{message[:MAX_MESSAGE]}... ({len(message) - MAX_MESSAGE:,} more characters cut)"


class TurnContext(logging.Filter):
    """Adds the branch and turn of the logging task, when it is part of a turn."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate ``record`` (never drops it)."""
        bound = turn.binding()
        if bound is not None and not hasattr(record, "branch"):
            record.branch = bound.branch.name
            record.branch_id = bound.branch.id_str
            record.turn_id = str(bound.scope.turn_id)
        return True


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON."""

    def __init__(self) -> None:
        super().__init__()
        # The time's text up to its seconds, for the second it was made in: records
        # come many to a second, and building a datetime for each cost a tenth of one.
        self._second: tuple[int, str] = (-1, "")

    def format(self, record: logging.LogRecord) -> str:
        """The record as a JSON object on one line."""
        entry: dict[str, Any] = {
            "time": self.stamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": _cut(record.getMessage()),
        }
        for field in CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = str(value)
        for field in DATA_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            line = _ENCODER.encode(entry)
            line.encode("utf-8")
        except ValueError:
            # A non-finite number (null in its place), or a lone surrogate quoted from
            # a tool (U+FFFD; UnicodeEncodeError is a ValueError): keep the record.
            line = dump_json(entry, replace=True)
        return line

    def stamp(self, created: float) -> str:
        """``created`` (seconds since the epoch) as ISO 8601 in UTC, to the millisecond:
        ``2025-06-01T09:30:14.230+00:00``, what ``datetime.isoformat`` writes."""
        # Whole microseconds first, rounded from the fraction as datetime.fromtimestamp does.
        fraction, whole = math.modf(created)
        second, micro = divmod(round(fraction * 1_000_000), 1_000_000)
        second += int(whole)
        cached, text = self._second
        if cached != second:
            text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._second = (second, text)
        return f"{text}.{micro // 1000:03d}+00:00"


class StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time of each record, off the event loop
    while `write_off_the_loop` runs.

    The problem: a parent that pipes standard error and never reads it (an MCP host
    starting ``pride mcp``, a supervisor with ``stderr=PIPE``) lets the pipe fill, and a
    write on the event loop's thread then blocks the whole process: a few hundred bad
    request lines, each logged, stopped every branch and every answer. Inside
    `write_off_the_loop` a record is queued instead (never blocking) and one writer
    task writes the queue in batches from a worker thread. At most `MAX_BUFFERED`
    characters wait: the records past it are dropped, counted, and one record says how
    many once stderr takes data again. Outside it (starting, exiting) a record is
    written at once, as before, unless stderr was found stuck: then it is dropped too.

    Looking the stream up per write lets a live status display (which draws on the
    terminal's bottom row) and tests that replace ``sys.stderr`` see the records.
    """

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()  # the queue, shared with the threads that log
        self._pending: list[str] = []
        self._pending_size = 0
        self._dropped = 0
        self._wake: Callable[[], None] | None = None  # set while the writer waits for records
        self._writing = False  # a writer runs: records are queued
        self._closing = False  # the writer ends once the queue is written
        self._ended = trio.Event()
        self._stuck = False  # stderr stopped taking data (or broke): records are dropped

    def emit(self, record: logging.LogRecord) -> None:
        """Queue one formatted record (inside `write_off_the_loop`), else write and flush."""
        try:
            self.say(self.format(record))
        except Exception:
            self.handleError(record)

    def say(self, text: str) -> None:
        """Write ``text`` as one line in order with the records around it: queued inside
        `write_off_the_loop` (dropped once stderr is stuck), else written and flushed."""
        if self._stuck or self._writing:
            with self._guard:
                self._queue(text + "\n")
        else:
            stream = sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def _queue(self, line: str) -> None:
        # Under self._guard, from any thread that logs.
        if self._stuck or self._pending_size + len(line) > MAX_BUFFERED:
            self._dropped += 1
            return
        self._pending.append(line)
        self._pending_size += len(line)
        wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def _take(self) -> tuple[str, int]:
        """The queued text and the count of records dropped since the last take."""
        with self._guard:
            text = "".join(self._pending)
            dropped = self._dropped
            self._pending, self._pending_size, self._dropped = [], 0, 0
        return text, dropped

    def _dropped_line(self, dropped: int) -> str:
        record = logging.LogRecord(
            "pride.cli",
            logging.WARNING,
            __file__,
            0,
            "%d log records were dropped: standard error was not taking them "
            "(at most %d characters of records wait for it)",
            (dropped, MAX_BUFFERED),
            None,
        )
        return self.format(record) + "\n"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer: write the queued records in order, from a worker thread, until
        `close` (then what is queued is written first) or cancellation. Started by
        `write_off_the_loop`."""
        token = trio.lowlevel.current_trio_token()
        self._writing, self._closing, self._ended = True, False, trio.Event()
        task_status.started()
        try:
            while True:
                text, dropped = self._take()
                if dropped and not self._stuck:
                    text += self._dropped_line(dropped)
                if text and not self._stuck:
                    await self._write(text)
                    continue
                ready = trio.Event()
                with self._guard:
                    if self._pending or self._dropped:
                        continue
                    if self._closing:
                        return
                    self._wake = functools.partial(_soon, token, ready.set)
                await ready.wait()
        finally:
            with self._guard:
                self._writing, self._wake = False, None
                # What the writer could not write in time is lost: counted with the rest.
                self._dropped += len(self._pending)
                self._pending, self._pending_size = [], 0
            self._ended.set()

    def close(self) -> None:
        """Ask the writer to end once the records queued so far are written."""
        with self._guard:
            self._closing = True
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    async def written(self) -> None:
        """Wait until the writer has ended (after `close`, or cancelled)."""
        await self._ended.wait()

    def give_up(self) -> None:
        """Take stderr for stuck: later records are dropped (counted), never written."""
        self._stuck = True

    async def _write(self, text: str) -> None:
        stream = sys.stderr
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream of no descriptor (a test's)
            stream.write(text)
            stream.flush()
            return
        data = text.encode("utf-8", errors="replace")
        try:
            stream.flush()  # what was printed to it before goes first
            await trio.to_thread.run_sync(write_all, fd, data, abandon_on_cancel=True)
        except trio.Cancelled:
            self._stuck = True  # the write may still be blocked in its thread
            raise
        except OSError:  # the reader went away: nothing more can be said there
            self._stuck = True


def _soon(token: trio.lowlevel.TrioToken, wake: Callable[[], None]) -> None:
    """Run ``wake`` on the event loop, from any thread (a record logged by a worker)."""
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(wake)


def say(text: str) -> None:
    """Print ``text`` as one line on standard error, after the log records already
    queued for it (`StderrHandler`): a command's plain lines (``pride run: cannot use
    the store ...``) must not pass the records logged before them."""
    handler = next(iter(_handlers()), None)
    if handler is None:
        print(text, file=sys.stderr, flush=True)
    else:
        handler.say(text)


def _terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def _handlers() -> list[StderrHandler]:
    return [h for h in logging.getLogger().handlers if isinstance(h, StderrHandler)]


async def write_off_the_loop(main: Callable[..., Awaitable[R]], *args: Any) -> R:
    """Run ``main(*args)`` with the `StderrHandler` records written off the
    event loop (see `StderrHandler`); ``trio.run(write_off_the_loop, main, ...)``.

    When stderr is a terminal, records are written at once as before (in order
    with the status line drawn on it). On the way out the records still queued
    get at most `FLUSH` seconds (shielded) to be written; past it stderr is taken
    for stuck and later records are dropped.
    Whatever ``main`` raises is raised as itself, never in a group.
    """
    if _terminal():
        # A terminal is read as it is written (its only stall is the user's Ctrl-S), and
        # the live status line draws on it from the loop: records written there at
        # once stay in order with it.
        return await main(*args)
    handlers = _handlers()
    failure: BaseException | None = None
    result: R | None = None
    async with trio.open_nursery() as nursery:
        for handler in handlers:
            await nursery.start(handler.run)
        try:
            result = await main(*args)
        except BaseException as exc:  # re-raised as itself, not in the nursery's group
            failure = exc
        finally:
            with trio.CancelScope(shield=True) as flush:
                flush.deadline = trio.current_time() + FLUSH
                for handler in handlers:
                    handler.close()
                for handler in handlers:
                    await handler.written()
            if flush.cancelled_caught:
                for handler in handlers:
                    handler.give_up()
            nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result  # type: ignore[return-value]  # main returned it


def configure(level: str | int, formatter: logging.Formatter | None = None) -> logging.Handler:
    """Send every logger's records at ``level`` and above to standard error.

    Args:
        level: a level name (``"INFO"``) or number.
        formatter: default `JsonFormatter`.

    Returns:
        the installed handler (on the root logger, replacing none).

    Raises:
        ValueError: an unknown level name.
    """
    numeric = logging.getLevelName(level.upper()) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}: use DEBUG, INFO, WARNING or ERROR")
    handler = StderrHandler()
    handler.setFormatter(formatter or JsonFormatter())
    handler.addFilter(TurnContext())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    return handler
