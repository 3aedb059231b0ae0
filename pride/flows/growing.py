"""Growing a running flow: nodes added by the work of its own nodes.

A planner node that decides on its fan-out while it runs adds the work to
its flow with ``pride.current_flow().add(...)`` (the arguments of
[`Flow.add`][pride.flows.graph.Flow.add]):

* `current_flow` finds the run from inside a node's work (its operation, its
  tools, a turn of another branch that node asked, in this process) through
  the node's account, which its envelope carries: no global state;
* an added node may depend only on nodes the run already has, so a running
  flow never forms a cycle; its signals carry ``spawned_by`` (`spawning_node`);
* a run grows by at most ``max_spawn`` nodes (default 50), the bound on a
  planner that keeps planning; a name already taken or an unknown dependency
  is refused too (`InvalidFlow` naming the node);
* an added node starts as soon as its dependencies completed (at once if it
  has none); it is skipped if one of them did not complete, or if the run has
  stopped starting nodes (``fail_fast``, a spent budget); a durable run
  journals it with its next commit (`pride.flows.journal`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..actors.allowance import carried_allowance
from ..errors import InvalidFlow
from .graph import CommandSource, Condition, FlowNode, make_node
from .state import TERMINAL, NodeAccount, blocked_reason

if TYPE_CHECKING:
    from .run import FlowRun

__all__ = ["current_flow", "grow", "spawning_node"]


def current_flow() -> FlowRun | None:
    """The flow run whose node the calling work belongs to, or None.

    Inside a node's turn (its operation, its tools, a turn of another branch
    that node asked, in this process) this is the run, so the work can grow
    it: ``pride.current_flow().add(...)``. Outside any flow node: None.
    """
    account = carried_allowance()
    while account is not None:
        if isinstance(account, NodeAccount) and not account.run.finished:
            return account.run
        account = account.parent
    return None


def spawning_node(run: FlowRun) -> str | None:
    """The name of ``run``'s node whose work is calling, if any."""
    account = carried_allowance()
    while account is not None:
        if isinstance(account, NodeAccount) and account.run is run:
            return account.state.name
        account = account.parent
    return None


def grow(
    run: FlowRun,
    target: Any,
    command: CommandSource,
    *,
    depends_on: FlowNode | str | Iterable[FlowNode | str] = (),
    when: Condition | None = None,
    name: str | None = None,
) -> FlowNode:
    """Add a node to ``run`` while it runs ([`FlowRun.add`][pride.flows.run.FlowRun.add]).

    Raises:
        InvalidFlow: the run has grown by ``max_spawn`` nodes already, the name
            is taken, a dependency is not a node of the run, or the target does
            not resolve.
        RuntimeError: the run has finished.
        TypeError, ValueError: as for ``Flow.add``.
    """
    if run.finished:
        raise RuntimeError(f"flow {run.label!r} has finished; it cannot grow any more")
    node = make_node(
        run._nodes,
        target,
        command,
        depends_on=depends_on,
        when=when,
        name=name,
        flow=run.name,
        spawned_by=spawning_node(run),
        suffixes=run._suffixes,
    )
    if run.spawned >= run.max_spawn:
        raise InvalidFlow(
            node.name,
            f"the flow has already grown by max_spawn={run.max_spawn} nodes "
            "(pass a larger max_spawn to session.flow)",
            flow=run.name,
        )
    for dependency in node.depends_on:
        if dependency not in run.states:
            raise InvalidFlow(
                node.name,
                f"depends on {dependency!r}, which is not a node of the running flow "
                "(a node added while the flow runs depends only on nodes it already has)",
                flow=run.name,
            )
    state = run._register(node)
    run.spawned += 1
    if run.journal is not None:
        run.journal.spawned(run, node)
    blocked = next(
        (
            upstream
            for dependency in node.depends_on
            if (upstream := run.states[dependency]).phase in TERMINAL
            and upstream.phase != "completed"
        ),
        None,
    )
    if run._halt is not None:
        run._skip(state, run._halt)
    elif blocked is not None:
        run._skip(state, blocked_reason(blocked))
    elif state.waiting == 0:
        state.phase = "ready"
        run._ready.append(state)
    run._wake()
    return node
