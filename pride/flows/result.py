"""What a flow run returns: each node's outcome, result or error, and the run's usage."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID

import attrs

from ..errors import FlowNodeError
from ..messages import Usage
from .graph import FlowNode, Outcome
from .mermaid import render
from .state import TERMINAL, NodeState

__all__ = ["FlowResult", "NodeOutcome", "collect"]


@attrs.frozen(repr=False)
class NodeOutcome:
    """How one node of a run ended.

    Attributes:
        node: the node (its name, target, command, dependencies).
        outcome: ``"completed"``, ``"failed"``, ``"skipped"`` or ``"cancelled"``.
        result: the command's result (completed nodes only; else None).
        error: the exception (failed nodes; a cancelled node's ``TurnCancelled``
            when its turn was cancelled by someone else); else None.
        reason: why it was skipped or cancelled (a failed node: its error's text).
        turn_id: the id of the node's turn, once it had begun.
        started: seconds from the flow's start to the node's (None: never started).
        duration: seconds the node ran (0 when it never started).
        usage: what the node's turn (and the work it asked of others) used.
    """

    node: FlowNode
    outcome: Outcome
    result: Any = None
    error: BaseException | None = None
    reason: str | None = None
    turn_id: UUID | None = None
    started: float | None = None
    duration: float = 0.0
    usage: Usage = Usage()

    @property
    def name(self) -> str:
        """The node's name."""
        return self.node.name

    def __repr__(self) -> str:
        why = f" ({self.reason})" if self.reason and self.outcome != "completed" else ""
        return f"<NodeOutcome {self.name!r} {self.outcome}{why}>"


@attrs.frozen(repr=False)
class FlowResult:
    """The outcome of every node of a flow run.

    ``result[name]`` is a completed node's result; ``result.outcomes[name]``
    says how each node ended. Nodes spawned while the flow ran are included,
    after the plan's.

    Attributes:
        flow_id: the run's id (the ``flow_id`` of its signals).
        name: the flow's name.
        nodes: each node's [`NodeOutcome`][pride.flows.NodeOutcome], by name,
            in the order they were added.
        elapsed: seconds the run took.
        usage: what every node's turns used (and the work they asked of
            other branches of this process).
    """

    flow_id: UUID
    name: str | None
    nodes: Mapping[str, NodeOutcome]
    elapsed: float = 0.0
    usage: Usage = Usage()

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for node in self.nodes.values():
            counts[node.outcome] = counts.get(node.outcome, 0) + 1
        shown = ", ".join(f"{count} {outcome}" for outcome, count in counts.items())
        label = f" {self.name!r}" if self.name else ""
        return f"<FlowResult{label} {shown or 'no nodes'}>"

    def __getitem__(self, name: str) -> Any:
        """The result of the completed node ``name``.

        Raises:
            KeyError: the flow has no such node.
            FlowNodeError: the node did not complete (a failed node's error
                is the ``__cause__``).
        """
        node = self.nodes[name]
        if node.outcome == "completed":
            return node.result
        # Raised without a local naming it: the traceback holds this frame.
        raise FlowNodeError(name, node.outcome, node.reason or node.outcome) from node.error

    def get(self, name: str, default: Any = None) -> Any:
        """The result of ``name`` if it completed, else ``default``."""
        node = self.nodes.get(name)
        return node.result if node is not None and node.outcome == "completed" else default

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def outcomes(self) -> Mapping[str, Outcome]:
        """Each node's outcome by name: completed, failed, skipped or cancelled."""
        return {name: node.outcome for name, node in self.nodes.items()}

    @property
    def results(self) -> Mapping[str, Any]:
        """The results of the completed nodes, by name."""
        return {
            name: node.result for name, node in self.nodes.items() if node.outcome == "completed"
        }

    @property
    def errors(self) -> Mapping[str, BaseException]:
        """The errors of the nodes that failed (or whose turn was cancelled), by name."""
        return {name: node.error for name, node in self.nodes.items() if node.error is not None}

    @property
    def ok(self) -> bool:
        """True when every node completed."""
        return all(node.outcome == "completed" for node in self.nodes.values())

    def raise_for_failure(self) -> FlowResult:
        """Raise the error of the first node that failed (in the order nodes
        were added), if any; else return the result itself.

        Raises:
            Exception: that node's own error.
        """
        error = next(
            (
                node.error
                for node in self.nodes.values()
                if node.outcome == "failed" and node.error is not None
            ),
            None,
        )
        if error is None:
            return self
        try:  # its traceback holds this frame: no cycle through the local
            raise error
        finally:
            del error

    def to_mermaid(self, *, direction: str = "TD") -> str:
        """The run as Mermaid flowchart text, nodes coloured by outcome."""
        return render(
            [node.node for node in self.nodes.values()], direction=direction, outcomes=self.outcomes
        )


def collect(
    label: str,
    flow_id: UUID,
    name: str | None,
    *,
    states: Mapping[str, NodeState],
    started_at: float,
    ended_at: float,
    usage: Usage,
) -> FlowResult:
    """The result of a run whose nodes are ``states`` (all ended).

    Raises:
        RuntimeError: some node has no outcome yet.
    """
    outcomes: dict[str, NodeOutcome] = {}
    for node_name, state in states.items():
        if state.phase not in TERMINAL:
            raise RuntimeError(f"flow {label!r}: node {node_name!r} has not finished")
        outcomes[node_name] = NodeOutcome(
            node=state.node,
            outcome=state.phase,  # type: ignore[arg-type]
            result=state.result,
            error=state.error,
            reason=state.reason,
            turn_id=state.turn_id,
            started=None if state.started_at is None else state.started_at - started_at,
            duration=state.duration,
            usage=state.account.usage() if state.account is not None else Usage(),
        )
    return FlowResult(flow_id, name, outcomes, ended_at - started_at, usage)
