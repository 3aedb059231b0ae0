"""What a server handle counts (`McpServer.statistics`)."""

from __future__ import annotations

import attrs

__all__ = ["McpServerStatistics"]


@attrs.frozen
class McpServerStatistics:
    """A snapshot of a server handle (see `McpServer.statistics`).

    Attributes:
        running: an incarnation is serving calls.
        starts: incarnations started (restarts included).
        calls: tool calls sent.
        in_flight: calls running now.
        cancelled: calls cancelled by their caller (each sent ``notifications/cancelled``).
        failed: calls that ended in an error (server errors, broken connections).
        progress_dropped: progress reports dropped because a turn did not keep up.
        waited_for_restart: calls that found the server restarting and waited for it.
        timed_out: calls that did not end within ``call_timeout`` (counted in ``failed`` too).
        logs_dropped: log notifications of the server not logged (over the rate limit).
        schemas_checked: listed tools whose schemas were checked (an unchanged
            tool is not checked again when the list changes).
    """

    running: bool
    starts: int
    calls: int
    in_flight: int
    cancelled: int
    failed: int
    progress_dropped: int
    waited_for_restart: int = 0
    timed_out: int = 0
    logs_dropped: int = 0
    schemas_checked: int = 0
