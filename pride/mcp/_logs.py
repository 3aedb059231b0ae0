"""An MCP server's log notifications, logged within bounds.

A server chooses how much it logs and at which level; neither is pride's
process's to accept whole (20,000 notifications at "critical" became 20,003
log records, 41 MB). So, as the lines a stdio server prints on its stdout
that are not JSON-RPC are capped, its ``notifications/message`` are
rate-limited by a token bucket (`LOG_BURST` at once, `LOG_RATE` a second),
logged at most at WARNING (a server's message is its own news, not an error
of this process) and cut at `LOG_TEXT` characters; the rest are counted
(``statistics().logs_dropped``) and summed up in one warning when logging
resumes and when the incarnation ends.
"""

from __future__ import annotations

import logging
import reprlib

from mcp import types

__all__ = ["LOG_BURST", "LOG_RATE", "LOG_TEXT", "ServerLog"]

log = logging.getLogger("pride.mcp")

LOG_BURST = 20
"""Log notifications of one server logged at once; more wait for the rate below."""

LOG_RATE = 10.0
"""Log notifications of one server logged per second, on average; the rest are counted."""

LOG_TEXT = 2_000
"""Characters of one log notification's data logged."""

_LOG_REPR = reprlib.Repr()  # data that is not text, shown short however large it is
_LOG_REPR.maxlevel, _LOG_REPR.maxstring, _LOG_REPR.maxother = 4, LOG_TEXT // 4, 200
_LOG_REPR.maxdict = _LOG_REPR.maxlist = 20


class ServerLog:
    """One server's log notifications: a token bucket, and the count of those dropped."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.dropped = 0
        self._unreported = 0
        self._tokens = float(LOG_BURST)
        self._at: float | None = None

    def log(self, params: types.LoggingMessageNotificationParams, now: float) -> None:
        """Log one notification (trio time ``now``), or count it as dropped."""
        if not self._take(now):
            return
        level = min(_LOG_LEVELS.get(params.level, logging.INFO), logging.WARNING)
        data = params.data
        text = data[:LOG_TEXT] if isinstance(data, str) else _LOG_REPR.repr(data)
        log.log(level, "MCP server %r says: %s", self.server, text)

    def _take(self, now: float) -> bool:
        """True if one more message may be logged now; else it is counted as dropped."""
        if self._at is not None:
            self._tokens = min(float(LOG_BURST), self._tokens + (now - self._at) * LOG_RATE)
        self._at = now
        if self._tokens < 1:
            self.dropped += 1
            self._unreported += 1
            return False
        self._tokens -= 1
        self.report()
        return True

    def report(self) -> None:
        """Log how many messages were dropped, if some were since the last report."""
        if self._unreported:
            self._unreported = 0
            log.warning(
                "MCP server %r: %d log messages dropped so far (more than %d at once, "
                "or %g a second)",
                self.server,
                self.dropped,
                LOG_BURST,
                LOG_RATE,
            )


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
