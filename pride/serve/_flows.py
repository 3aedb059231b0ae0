"""Recent flow runs and their nodes' states, for the console's graph (``GET /v1/flows``).

A flow run reports each node to the session's observer: ``NodeStarted``
when its command is sent, then one of ``NodeCompleted``, ``NodeFailed``,
``NodeSkipped`` or ``NodeCancelled`` (a node that never started gets its
terminal only); each signal names the node's dependencies. `FlowRuns`
follows those signals from the moment the server serves and keeps the last
`KEEP` runs: per node its state, its dependencies (the graph's edges), its
command and how long it took. A node is known from its first signal, or from
being named as a dependency of one: the graph of a run grows as its nodes
start, and shows the whole plan once the run is over.

A run's nodes may target any branch, so only a token that reaches every
branch sees flows (as it alone sees the session-wide ``SessionFailed``).
"""

from __future__ import annotations

import collections
from typing import Any
from uuid import UUID

import attrs

from ..messages import (
    NodeCancelled,
    NodeCompleted,
    NodeFailed,
    NodeSignal,
    NodeSkipped,
    NodeStarted,
)

__all__ = ["KEEP", "MAX_NODES", "FlowRuns"]

KEEP = 20
"""Flow runs kept; the oldest go first."""

MAX_NODES = 1000
"""Nodes kept per run (a growing flow may add many); more are counted, not kept."""

_STATES: dict[type[NodeSignal], str] = {
    NodeStarted: "running",
    NodeCompleted: "completed",
    NodeFailed: "failed",
    NodeSkipped: "skipped",
    NodeCancelled: "cancelled",
}


@attrs.define
class _Node:
    state: str = "waiting"  # named as a dependency, no signal of its own yet
    depends_on: tuple[str, ...] = ()
    command: str = ""
    duration: float | None = None
    error: str | None = None
    spawned_by: str | None = None


@attrs.define
class _Run:
    name: str | None
    nodes: dict[str, _Node] = attrs.field(factory=dict)
    dropped: int = 0

    def node(self, name: str) -> _Node | None:
        found = self.nodes.get(name)
        if found is None:
            if len(self.nodes) >= MAX_NODES:
                self.dropped += 1
                return None
            found = self.nodes[name] = _Node()
        return found


class FlowRuns:
    """The last `KEEP` flow runs, learnt from node signals (see the module docstring)."""

    def __init__(self) -> None:
        self._runs: collections.OrderedDict[UUID, _Run] = collections.OrderedDict()
        self._session: Any = None

    def watch(self, session: Any) -> None:
        """Follow ``session``'s flow runs from now on."""
        self._session = session
        session.observe(*_STATES, handler=self._on_signal)

    def close(self) -> None:
        """Stop following (idempotent)."""
        if self._session is not None:
            self._session.unobserve(self._on_signal)
            self._session = None

    def _on_signal(self, signal: Any) -> None:
        flow_id = signal.flow_id
        if flow_id is None:
            return
        run = self._runs.get(flow_id)
        if run is None:
            run = self._runs[flow_id] = _Run(signal.flow_name)
            while len(self._runs) > KEEP:
                self._runs.popitem(last=False)
        node = run.node(signal.node)
        if node is None:
            return
        node.state = _STATES[type(signal)]
        node.depends_on = tuple(signal.depends_on)
        node.spawned_by = signal.spawned_by
        if isinstance(signal, NodeStarted):
            node.command = signal.command
        if isinstance(signal, NodeCompleted | NodeFailed | NodeCancelled):
            node.duration = signal.duration
        if isinstance(signal, NodeFailed):
            node.error = signal.error_type or None
        for dependency in node.depends_on:
            run.node(dependency)  # known from here on, waiting until its own signal

    def describe(self) -> list[dict[str, Any]]:
        """The runs kept, newest first, as plain data."""
        answer = []
        for flow_id, run in reversed(self._runs.items()):
            states = {node.state for node in run.nodes.values()}
            answer.append(
                {
                    "flow_id": str(flow_id),
                    "name": run.name,
                    "state": "running" if states & {"running", "waiting"} else "done",
                    "dropped": run.dropped,
                    "nodes": [
                        {"name": name, **attrs.asdict(node, recurse=False)}
                        for name, node in run.nodes.items()
                    ],
                }
            )
        return answer
