"""What a flow run tracks: its host, each node's state and account, and how a
node's end settles the nodes below it (`settle`).

A run ([`FlowRun`][pride.flows.FlowRun]) keeps one `NodeState` per node: its
phase, its result or error, its timing, and a `NodeAccount`, the node's usage
under the flow's allowance. The node's envelope carries that account to its
branch (`pride.budget.allowance.carry`), so everything the node's turn causes in
this process draws on the flow's allowance and can find the run again:
that is how [`current_flow`][pride.current_flow] (`pride.flows.growing`)
works, with no global state.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, Literal
from uuid import UUID

import attrs
import trio

from ..actors import Target
from ..budget.accounts import Account
from ..budget.allowance import carried_allowance
from ..errors import TurnCancelled
from .graph import FlowNode, Outcome

__all__ = [
    "TERMINAL",
    "FlowHost",
    "NodeAccount",
    "NodeState",
    "Phase",
    "blocked_reason",
    "check_count",
    "mark_skipped",
    "settle",
    "spawning_node",
    "turn_outcome",
]

Phase = Literal["pending", "ready", "running", "completed", "failed", "skipped", "cancelled"]
TERMINAL = frozenset({"completed", "failed", "skipped", "cancelled"})


@attrs.frozen
class FlowHost:
    """What a run needs from the session that runs it.

    Attributes:
        name: the session's name (for messages).
        resolve: turns a node's target (a Branch, a name, an id, a ref) into
            the [`Target`][pride.Target] to send to; raises ``UnknownBranch``.
        observer: where node signals go (``dispatch(signal)``), or None.
        journal: where the run's plan and outcomes are journaled (a session
            with a store), or None (`pride.flows.journal`).
        running: the ids of the session's runs in progress, or None: a run is
            in it from its start until it returned (its journal forgotten) or
            raised, so the session tells a run cut short from one still running.
    """

    name: str
    resolve: Callable[[Any], Target]
    observer: Any = None
    journal: Any = None
    running: set[UUID] | None = None


class NodeAccount(Account):
    """A node's usage, under its flow's allowance; its envelope carries it, so
    work the node causes can find the run (`current_flow`).

    ``run`` is the node's `FlowRun`, held as an ``object``: this module sits
    below the run (`current_flow` checks what it finds).
    """

    __slots__ = ("run", "state")

    def __init__(self, run: object, state: NodeState, parent: Account) -> None:
        super().__init__(None, scope=f"flow node {state.node.name}", parent=parent)
        self.run = run
        self.state = state


def spawning_node(run: object) -> str | None:
    """The name of ``run``'s node whose work is calling, if any."""
    account = carried_allowance()
    while account is not None:
        if isinstance(account, NodeAccount) and account.run is run:
            return account.state.name
        account = account.parent
    return None


@attrs.define(eq=False)
class NodeState:
    """One node of a run, as the run tracks it."""

    node: FlowNode
    target: Target
    phase: Phase = "pending"
    waiting: int = 0  # dependencies not completed yet
    dependents: list[NodeState] = attrs.Factory(list)
    result: Any = None
    error: BaseException | None = None
    reason: str | None = None
    turn_id: UUID | None = None
    started_at: float | None = None
    ended_at: float | None = None
    cancel_reason: str | None = None
    account: NodeAccount | None = None
    send_turn: trio.Event | None = None  # set when the node is first in its branch's send order
    in_send_order: bool = False  # started and not sent yet (pride.flows.node.SendOrder)
    branch_id: UUID | None = None
    label: str = ""  # the target's name
    task_name: str = ""
    journaled: bool = False  # its outcome came from (or went to) the flow's journal
    unflushed: bool = False  # its outcome was queued by its turn's rider, maybe not committed
    resumed: Any = None  # the Reply of its turn, resumed from the turn journal after a crash

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def duration(self) -> float:
        """Seconds it ran (0 when it never started)."""
        if self.started_at is None or self.ended_at is None:
            return 0.0
        return self.ended_at - self.started_at


def turn_outcome(
    result: Any, failure: BaseException | None
) -> tuple[Outcome, Any, BaseException | None, str | None]:
    """``(outcome, result, error, reason)`` of a node whose turn answered its
    envelope with ``result`` or ``failure``: completed, cancelled (someone
    else cancelled its turn: a restart, a shutdown, a directive) or failed.
    The one mapping both the node (`pride.flows.node`) and its commit rider
    (`pride.flows.journal`) use, so the outcome journaled with the turn is the
    outcome the run records."""
    if failure is None:
        return "completed", result, None, None
    if isinstance(failure, TurnCancelled):
        return "cancelled", None, failure, f"its turn was cancelled ({failure.reason})"
    return "failed", None, failure, f"{type(failure).__name__}: {failure}"


def check_count(name: str, value: Any, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum`` (a bool is not a count); else
    ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


_BLOCKED_VERBS = {"failed": "failed", "skipped": "was skipped", "cancelled": "was cancelled"}


def blocked_reason(upstream: NodeState) -> str:
    """Why a dependent of ``upstream`` (which did not complete) is skipped."""
    return f"its dependency {upstream.name!r} {_BLOCKED_VERBS[upstream.phase]}"


def mark_skipped(state: NodeState, reason: str, skipped: collections.deque[NodeState]) -> bool:
    """Mark ``state`` skipped and queue it on ``skipped`` (for its signal); False,
    and nothing changed, if it started or ended already."""
    if state.phase in TERMINAL or state.phase == "running":
        return False
    state.phase = "skipped"
    state.reason = reason
    state.ended_at = trio.current_time()
    skipped.append(state)
    return True


def settle(
    ended: NodeState,
    ready: collections.deque[NodeState],
    skipped: collections.deque[NodeState],
) -> None:
    """``ended`` has ended: each pending dependent whose last dependency it was
    goes on ``ready``; if it did not complete, its pending dependents are
    skipped (`mark_skipped`), and theirs, all the way down the graph.

    A walk with a stack of its own, not a recursion: a chain of 2,000 nodes
    whose first fails is 2,000 levels deep, past Python's recursion limit
    (issue 36). Nodes are skipped in the order a depth-first recursion would
    skip them (each dependent, then everything below it, then the next), which
    is the order their ``NodeSkipped`` signals go out in.
    """
    walk = [(ended, iter(ended.dependents))]
    while walk:
        upstream, dependents = walk[-1]
        dependent = next(dependents, None)
        if dependent is None:
            walk.pop()
            continue
        if dependent.phase != "pending":
            continue
        if upstream.phase == "completed":
            dependent.waiting -= 1
            if dependent.waiting == 0:
                dependent.phase = "ready"
                ready.append(dependent)
        elif mark_skipped(dependent, blocked_reason(upstream), skipped):
            walk.append((dependent, iter(dependent.dependents)))
