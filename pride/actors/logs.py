"""A branch's call log: one record per model call and tool call.

Records carry what an operator needs to see what a branch did (kind, name,
start, duration, status, usage, error type) and never a credential. Prompts
and outputs are included only when the log config says so. The log is
bounded: past ``capacity`` the oldest records are dropped (and counted).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import attrs

from ..messages.codec import dump_json

__all__ = ["DEFAULT_LOG_CAPACITY", "DataLogger", "LogConfig", "LogEntry"]

DEFAULT_LOG_CAPACITY = 1000

_EMPTY: Mapping[str, Any] = {}


@attrs.frozen(kw_only=True)
class LogConfig:
    """How a branch logs.

    Attributes:
        capacity: records kept in memory; older ones are dropped first.
        include_content: also record prompts and outputs (off by default).
        persist_dir: default directory for [`DataLogger.dump`][pride.actors.logs.DataLogger.dump].
    """

    capacity: int = attrs.field(default=DEFAULT_LOG_CAPACITY)
    include_content: bool = False
    persist_dir: str | None = None

    @capacity.validator
    def _check_capacity(self, _: Any, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"log capacity must be a positive int, got {value!r}")

    @classmethod
    def coerce(cls, value: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        """A config from a config, a truthy dict of its fields, or defaults.

        Raises:
            ValueError: the dict names unknown fields or invalid values.
            TypeError: ``value`` is neither a LogConfig nor a mapping.
        """
        if isinstance(value, LogConfig):
            return value
        if not value:
            return cls()
        if not isinstance(value, Mapping):
            raise TypeError(f"log_config must be a LogConfig or a dict, got {type(value).__name__}")
        unknown = set(value) - {field.name for field in attrs.fields(cls)}
        if unknown:
            raise ValueError(f"unknown log_config field(s): {', '.join(sorted(unknown))}")
        return cls(**dict(value))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for serialisation."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class LogEntry:
    """One model or tool call."""

    kind: Literal["model", "tool"]
    name: str
    started_at: float
    duration_ms: float
    status: Literal["ok", "error", "cancelled"]
    turn_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    error_type: str | None = None
    detail: Mapping[str, Any] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogEntry:
        """Rebuild an entry from [`to_dict`][pride.actors.logs.LogEntry.to_dict] output."""
        return cls(**dict(data))


_SHORT = 8
"""Records kept in a plain list before the log becomes a bounded deque."""


class DataLogger:
    """The bounded, in-memory log of one branch.

    Records are kept as plain tuples and turned into [`LogEntry`][pride.actors.LogEntry]
    values only when read: every model and tool call is recorded, and most
    records are never looked at.
    """

    __slots__ = ("_entries", "config", "dropped")

    def __init__(self, config: LogConfig | None = None, entries: Iterable[Any] | None = None):
        self.config = config or LogConfig()
        # An empty shared tuple until the first record, then a short list, and a
        # bounded deque only past `_SHORT` records: an idle branch's log costs
        # nothing and one with a turn or two ~100 bytes, where a deque is ~760
        # bytes from its first record (what a session of idle members adds up).
        self._entries: deque[LogEntry | tuple[Any, ...]] | list[Any] | tuple[()] = ()
        self.dropped = 0
        for entry in entries or ():
            self.append(entry if isinstance(entry, LogEntry) else LogEntry.from_dict(entry))

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[LogEntry]:
        return (_entry(item) for item in self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def append(self, entry: LogEntry | tuple[Any, ...]) -> None:
        """Add a record (an entry, or its fields in LogEntry order); the oldest go past capacity."""
        entries = self._entries
        if not isinstance(entries, deque):
            capacity = self.config.capacity
            if len(entries) < _SHORT and len(entries) < capacity:
                if entries:
                    entries.append(entry)
                else:
                    self._entries = [entry]
                return
            entries = self._entries = deque(entries, maxlen=capacity)
        if len(entries) == entries.maxlen:
            self.dropped += 1
        entries.append(entry)

    def record(
        self,
        kind: Literal["model", "tool"],
        name: str,
        *,
        started: float,
        status: Literal["ok", "error", "cancelled"],
        turn_id: Any = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        error: BaseException | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Record a call that started at ``started`` (``time.perf_counter()``)."""
        elapsed = time.perf_counter() - started
        self.append(
            (
                kind,
                name,
                time.time() - elapsed,
                elapsed * 1000.0,
                status,
                _plain_id(turn_id),
                input_tokens,
                output_tokens,
                cost_usd,
                type(error).__name__ if error is not None else None,
                dict(detail) if detail and self.config.include_content else None,
            )
        )

    def record_measured(
        self,
        kind: Literal["model", "tool"],
        name: str,
        *,
        started_at: float,
        duration_ms: float,
        status: Literal["ok", "error", "cancelled"],
        turn_id: Any = None,
        error_type: str | None = None,
    ) -> None:
        """Record a call whose start (POSIX time) and duration were measured elsewhere."""
        self.append(
            (
                kind,
                name,
                started_at,
                duration_ms,
                status,
                _plain_id(turn_id),
                0,
                0,
                None,
                error_type,
                None,
            )
        )

    def to_list(self) -> list[dict[str, Any]]:
        """Every record as plain data, oldest first."""
        return [entry.to_dict() for entry in self]

    def clear(self) -> None:
        """Forget every record."""
        self._entries = ()

    def dump(self, path: str | Path | None = None, *, clear: bool = True) -> Path:
        """Append the records as JSON lines to ``path`` and return it.

        ``path`` defaults to ``<persist_dir>/pride-logs-<time>.jsonl``.

        Raises:
            ValueError: no path given and no ``persist_dir`` configured.
        """
        if path is None:
            if self.config.persist_dir is None:
                raise ValueError("dump_logs needs a path (or a log_config persist_dir)")
            path = Path(self.config.persist_dir) / f"pride-logs-{int(time.time())}.jsonl"
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a", encoding="utf-8") as file:
            for entry in self:
                file.write(dump_json(entry.to_dict(), replace=True) + "\n")
        if clear:
            self.clear()
        return target


def _plain_id(turn_id: Any) -> Any:
    """A turn id as a record keeps it: a UUID as its 128-bit integer.

    A record of plain values (text, numbers, None) is a tuple the garbage
    collector stops tracking once it survives a collection; a UUID (or a dict:
    no detail is kept as None) in it would keep it, and itself, tracked and
    collected over for as long as the log holds it: up to ``capacity``
    records per branch.
    """
    return turn_id.int if type(turn_id) is UUID else turn_id


def _id_text(turn_id: Any) -> str | None:
    """The text of a turn id a record keeps (see `_plain_id`)."""
    if turn_id is None:
        return None
    if type(turn_id) is int:
        return str(UUID(int=turn_id))
    return str(turn_id)


def _entry(item: LogEntry | tuple[Any, ...]) -> LogEntry:
    if isinstance(item, LogEntry):
        return item
    (
        kind,
        name,
        started_at,
        duration_ms,
        status,
        turn_id,
        tokens_in,
        tokens_out,
        cost,
        error,
        detail,
    ) = item
    return LogEntry(
        kind=kind,
        name=name,
        started_at=started_at,
        duration_ms=duration_ms,
        status=status,
        turn_id=_id_text(turn_id),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost_usd=cost,
        error_type=error,
        detail=_EMPTY if detail is None else detail,
    )
