"""`pride._repeats.Repeats`, the one bound on a warning a peer can cause at will
(a refused MCP call, a refused GET stream): the first few said, the rest counted
once a while, and the count still unsaid at the owner's end said then."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from pride._repeats import Repeats


def _logger(records: list[str]) -> logging.Logger:
    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("tests.repeats")
    logger.handlers[:] = [Kept()]
    logger.propagate = False
    return logger


async def test_the_first_are_said_the_rest_counted_and_the_last_count_said_at_the_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first ``first`` are logged, the rest counted once ``every`` seconds passed,
    and `flush` says the count left."""
    records: list[str] = []
    repeats = Repeats(_logger(records), "knocks", first=2, every=10.0)
    for number in range(5):
        repeats.warning("knock %d", number)
    assert records == ["knock 0", "knock 1 (further knocks are counted, every 10 s)"]
    await trio.sleep(10)
    repeats.warning("knock %d", 5)  # ten seconds after the last line: counted now
    assert records[2:] == ["4 more knocks in the last 10 s (6 in all)"]
    repeats.warning("knock %d", 6)
    repeats.flush()
    repeats.flush()  # nothing unsaid: nothing more
    assert records[3:] == ["1 more knocks in the last 0 s (7 in all)"]


def test_a_bound_of_none_said_is_refused() -> None:
    """A ``first`` under 1 is refused with a ValueError naming it."""
    with pytest.raises(ValueError, match="first must be at least 1, got 0"):
        Repeats(logging.getLogger("tests.repeats"), "knocks", first=0)


async def test_what_is_counted_is_text_not_a_format() -> None:
    """``what`` names a peer (an MCP server's name) and may hold a ``%``: appended
    to the last message said, it stays text."""
    records: list[str] = []
    repeats = Repeats(_logger(records), "lines of 'a%sb'", first=1)
    repeats.warning("line %d", 1)
    assert records == ["line 1 (further lines of 'a%sb' are counted, every 60 s)"]
