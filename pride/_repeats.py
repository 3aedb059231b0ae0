"""Repeats: a warning a peer can cause at will, said the first few times, then counted.

``pride mcp``'s front door logs why it refused each request it refuses (a tool
call past ``--max-concurrent``, a GET stream past ``--max-watchers``), pride's
MCP client each line of a stdio server's that is not JSON-RPC, ``pride run``
each request line it cannot read; a peer doing so in a loop would make one
warning per request or line, and a flood of them a flood of the log.
`Repeats` says the first `FIRST` in full, then one line every `EVERY` seconds
(at the next occurrence after them) counting those since, and the count still
unsaid when its owner stops (`Repeats.flush`): nothing is dropped unsaid, and
the log grows by a bounded number of lines a minute whatever the peer does.

Why here, beside ``_places``, and not in a package: its users are the front
doors of mcp and cli (``pride run``'s request lines) and mcp's client, which no
package below them all holds; pride-wide helpers sit at pride's top, outside
the layers, and import nothing of pride.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import trio

__all__ = ["EVERY", "FIRST", "Repeats"]

FIRST = 10
"""Occurrences logged one by one before the rest are counted."""

EVERY = 60.0
"""Seconds between two lines counting the occurrences not logged one by one."""


class Repeats:
    """One kind of warning, bounded: the first ``first`` logged, then counted.

    Args:
        logger: where the warnings go.
        what: what an occurrence is, for the counting lines (``"calls refused
            (--max-concurrent)"``).
        first: occurrences logged one by one (at least 1).
        every: seconds between two counting lines.

    Time is trio's clock (`trio.current_time`): call it from inside a trio run.
    """

    __slots__ = ("_since", "_unsaid", "every", "first", "logger", "seen", "what")

    def __init__(
        self, logger: logging.Logger, what: str, *, first: int = FIRST, every: float = EVERY
    ) -> None:
        if first < 1:
            raise ValueError(f"first must be at least 1, got {first!r}")
        self.logger = logger
        self.what = what
        self.first = first
        self.every = every
        self.seen = 0  # occurrences in all
        self._unsaid = 0  # occurrences since the last line that said or counted them
        self._since = 0.0  # when that line was logged

    def warning(
        self, message: str, *args: object, extra: Mapping[str, object] | None = None
    ) -> None:
        """One occurrence: logged as ``message % args`` (with the record's ``extra``
        fields) while fewer than ``first`` were (the last of them says the rest are
        counted), else counted, with a line saying the count once ``every`` seconds
        passed since the last."""
        self.seen += 1
        if self.seen <= self.first:
            if self.seen == self.first:
                further = f" (further {self.what} are counted, every {self.every:g} s)"
                message += further.replace("%", "%%")  # ``what`` is text, not a format
                self._since = trio.current_time()
            self.logger.warning(message, *args, extra=extra)
            return
        self._unsaid += 1
        if trio.current_time() - self._since >= self.every:
            self._count()

    def flush(self) -> None:
        """Say the count of occurrences not said yet, if any (at the owner's end)."""
        if self._unsaid:
            self._count()

    def _count(self) -> None:
        now = trio.current_time()
        self.logger.warning(
            "%d more %s in the last %.0f s (%d in all)",
            self._unsaid,
            self.what,
            now - self._since,
            self.seen,
        )
        self._unsaid, self._since = 0, now
