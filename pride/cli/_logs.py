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

import json
import logging
import math
import sys
import time
from typing import Any

from ..actors import turn
from ..messages.codec import dump_json

__all__ = [
    "CONTEXT_FIELDS",
    "DATA_FIELDS",
    "JsonFormatter",
    "StderrHandler",
    "TurnContext",
    "configure",
]

CONTEXT_FIELDS = ("branch", "branch_id", "turn_id", "request_id")
"""Record attributes copied into the JSON object when present."""

DATA_FIELDS = ("usage", "session_usage", "in_flight")
"""Record attributes copied as JSON data (objects, lists) when present: a finished
turn's usage, the tree's usage so far, the branches still running a turn."""

# Libraries that log every HTTP request at INFO; quiet unless DEBUG was asked for.
_CHATTY = ("httpx", "httpcore")

# Built once: ``json.dumps`` with any option builds a new encoder per call, which
# was half the cost of a record (pride run logs one per finished turn).
# Strict: a record may carry any number (usage summed to infinity, an app's own
# NaN), and a log line is JSON a reader parses like any other pride writes.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, allow_nan=False)


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
            "message": record.getMessage(),
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
    """Writes to whatever ``sys.stderr`` is at the time of each record.

    Looking the stream up per record lets a live status display (which
    redirects ``sys.stderr`` while it is shown) print log lines above itself.
    """

    def emit(self, record: logging.LogRecord) -> None:
        """Write one formatted record and flush."""
        try:
            stream = sys.stderr
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


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
