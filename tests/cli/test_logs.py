"""Tests for ``pride.cli._logs``: the JSON lines ``pride run`` logs."""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime

from hypothesis import given, strategies as st

from pride.cli._logs import JsonFormatter
from pride.messages.codec import parse_json
from tests.cli.driver import CLI, cli_env, request


@given(st.floats(min_value=0, max_value=2**33, allow_nan=False))
def test_the_time_is_what_datetime_writes(created: float) -> None:
    """The cached-second stamp equals ``datetime.isoformat`` to the millisecond."""
    expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    assert JsonFormatter().stamp(created) == expected


def test_one_formatter_stamps_records_across_seconds() -> None:
    """The cached second is replaced when a record of another second comes."""
    formatter = JsonFormatter()
    for created in (1.9995, 1.0004, 2.5, 1.25, 1e9 + 0.1):
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert formatter.stamp(created) == expected


def test_a_turn_record_has_every_documented_field() -> None:
    """Context fields as text, data fields as JSON, non-ASCII kept and a lone
    surrogate replaced (the line stays UTF-8)."""
    record = logging.LogRecord(
        "pride.cli", logging.INFO, __file__, 1, "turn ended: %s", ("é",), None
    )
    record.branch, record.turn_id, record.request_id = "ada", 12, None
    record.usage = {"input_tokens": 3, "cost_usd": None}
    record.in_flight = ["bob", chr(0xD800)]
    line = JsonFormatter().format(record)
    line.encode("utf-8")
    entry = json.loads(line)
    assert entry["message"] == "turn ended: é" and "é" in line
    assert entry["branch"] == "ada" and entry["turn_id"] == "12" and "request_id" not in entry
    assert entry["usage"] == {"input_tokens": 3, "cost_usd": None}
    assert entry["in_flight"] == ["bob", "\ufffd"]
    assert entry["level"] == "INFO" and entry["logger"] == "pride.cli"
    assert entry["time"] == datetime.fromtimestamp(record.created, UTC).isoformat(
        timespec="milliseconds"
    )


def test_issue36_a_record_s_non_finite_numbers_are_written_as_null() -> None:
    """Whatever a record carries, its line is strict JSON: no NaN or Infinity."""
    record = logging.LogRecord("app", logging.INFO, __file__, 1, "odd figures", (), None)
    record.usage = {"cost_usd": math.inf, "ratio": math.nan, "low": -math.inf, "n": 2}
    entry = parse_json(JsonFormatter().format(record))
    assert entry["usage"] == {"cost_usd": None, "ratio": None, "low": None, "n": 2}


async def test_issue36_pride_run_writes_strict_json_when_usage_sums_to_infinity() -> None:
    """Two costs of 1e308 (the application's own model) sum to infinity: every answer
    line and every log line of a real ``pride run`` is still strict JSON."""
    app = "tests.cli.app:lavish"
    async with CLI.start("run", app, "--no-status", "--exit-on-eof", env=cli_env()) as cli:
        for request_id in ("r1", "r2"):
            await cli.send(request(request_id, "lavish", "spend"))
        await cli.close_stdin()
        assert await cli.exit_code() == 0
    lines = [line for line in cli.stdout + cli.stderr if line.strip()]
    assert any("session_usage" in line for line in cli.stderr)
    for line in lines:
        if line.startswith("{"):
            parse_json(line)  # raises InvalidMessage on NaN or Infinity
    assert all("Infinity" not in line and "NaN" not in line for line in lines)


async def test_records_wait_for_a_non_blocking_stderr_that_is_full() -> None:
    """stderr shares its open file with a non-blocking stdout (``pride mcp`` over stdio
    makes stdout non-blocking; a terminal or ``2>&1`` shares it): records written while
    the pipe is full wait for it and all arrive, in order, instead of the first
    EAGAIN taking stderr for broken and dropping every later record."""
    import logging
    import os
    import sys

    import trio

    from pride.cli._logs import StderrHandler, write_off_the_loop

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    handler = StderrHandler()
    logger = logging.getLogger("tests.cli.nonblocking")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)  # where write_off_the_loop finds it
    original = sys.stderr
    stream = os.fdopen(write_end, "w", closefd=False)
    received = bytearray()

    async def main() -> None:
        for number in range(400):  # 400 records of ~300 bytes: past a 64 KiB pipe
            logger.info("record %d %s", number, "x" * 200)
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(30):  # a hang guard: before, the records stopped coming
            while received.count(b"\n") < 400:  # the reader catches up: the writer goes on
                read = trio.to_thread.run_sync(os.read, read_end, 1 << 20, abandon_on_cancel=True)
                received.extend(await read)

    try:
        sys.stderr = stream
        await write_off_the_loop(main)
    finally:
        sys.stderr = original
        root.removeHandler(handler)
        logger.removeHandler(handler)
        stream.close()
        os.close(read_end)
        os.close(write_end)
    lines = bytes(received).decode().splitlines()
    assert [line.split()[1] for line in lines] == [str(n) for n in range(400)]
