"""``GET /metrics``: the tree's figures in Prometheus' text exposition format (0.0.4).

Turns by outcome, model and tool calls, tokens and cost come from the
session's own accounts (``session.statistics()``, ``session.usage``), read
when scraped, so nothing is counted twice on the side; mailbox depth and
the turn in flight are read from each branch. Only the HTTP figures
(requests by route and status, their latency) are counted here, as they
happen.

Written by hand rather than with ``prometheus_client``: the format is a
few lines of rules (``# HELP``/``# TYPE``, escaped label values), and that
library's registry is process-wide, where two servers in one process (a
test's) must each report their own.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import Any

__all__ = ["BUCKETS", "CONTENT_TYPE", "Metrics"]

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Upper bounds (seconds) of the request-latency histogram's buckets."""


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


class _Histogram:
    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.total = 0.0


class Metrics:
    """The HTTP figures of one server, and the rendering of all of them."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, int], int] = {}
        self._latency: dict[str, _Histogram] = {}

    def request(self, route: str, status: int, seconds: float) -> None:
        """Count one answered request of ``route`` (its template) with ``status``."""
        key = (route, status)
        self._requests[key] = self._requests.get(key, 0) + 1
        histogram = self._latency.get(route)
        if histogram is None:
            histogram = self._latency[route] = _Histogram()
        histogram.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        histogram.count += 1
        histogram.total += seconds

    def render(self, session: Any, branches: Iterable[Any], in_flight: int, watchers: int) -> bytes:
        """The exposition text for ``session``'s tree (``branches``: those to report;
        ``in_flight`` and ``watchers``: the places of turns and of event streams held)."""
        out: list[str] = []

        def family(name: str, kind: str, text: str) -> None:
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")

        stats = session.statistics()
        family("pride_turns_total", "counter", "Turns ended, by outcome.")
        for outcome, value in (
            ("ended", stats.turns_done),
            ("failed", stats.turns_failed),
            ("suspended", stats.turns_suspended),
        ):
            out.append(f'pride_turns_total{{outcome="{outcome}"}} {value}')
        usage = session.usage
        for name, value, text in (
            ("pride_model_calls_total", usage.model_calls, "Model calls made."),
            ("pride_tool_calls_total", usage.tool_calls, "Tool calls made."),
            ("pride_cost_usd_total", usage.cost_usd or 0.0, "Cost of the model calls, in USD."),
            ("pride_restarts_total", stats.restarts, "Restart events of the supervisors."),
        ):
            family(name, "counter", text)
            out.append(f"{name} {_number(value)}")
        family("pride_tokens_total", "counter", "Tokens used, by kind.")
        out.append(f'pride_tokens_total{{kind="input"}} {usage.input_tokens}')
        out.append(f'pride_tokens_total{{kind="output"}} {usage.output_tokens}')
        depth: list[str] = []
        busy = 0
        for branch in branches:
            mailbox = branch.mailbox_statistics()
            queued = mailbox.queued if mailbox is not None else 0
            depth.append(f'pride_mailbox_depth{{branch="{_label(branch.name)}"}} {queued}')
            busy += branch.active_turn_id is not None
        family("pride_mailbox_depth", "gauge", "Work envelopes waiting in a branch's mailbox.")
        out.extend(depth)
        family("pride_turns_in_flight", "gauge", "Branches running a turn now.")
        out.append(f"pride_turns_in_flight {busy}")
        family("pride_http_in_flight", "gauge", "Requests holding a --max-concurrent place.")
        out.append(f"pride_http_in_flight {in_flight}")
        family("pride_http_watchers", "gauge", "Event streams holding a --max-watchers place.")
        out.append(f"pride_http_watchers {watchers}")
        family("pride_http_requests_total", "counter", "HTTP requests answered.")
        for (route, status), count in sorted(self._requests.items()):
            out.append(
                f'pride_http_requests_total{{route="{_label(route)}",status="{status}"}} {count}'
            )
        family("pride_http_request_duration_seconds", "histogram", "HTTP request latency.")
        for route, histogram in sorted(self._latency.items()):
            name = "pride_http_request_duration_seconds"
            route_label = f'route="{_label(route)}"'
            cumulative = 0
            bounds = [_number(bound) for bound in BUCKETS] + ["+Inf"]
            for le, count in zip(bounds, histogram.counts, strict=True):
                cumulative += count
                out.append(f'{name}_bucket{{{route_label},le="{le}"}} {cumulative}')
            out.append(f"{name}_sum{{{route_label}}} {_number(histogram.total)}")
            out.append(f"{name}_count{{{route_label}}} {histogram.count}")
        return ("\n".join(out) + "\n").encode()
