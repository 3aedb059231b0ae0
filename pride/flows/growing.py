"""Finding the running flow from inside a node's work, to grow it.

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

The growing itself is [`FlowRun.add`][pride.flows.run.FlowRun.add]; this
module sits above the run, which it finds.
"""

from __future__ import annotations

from ..budget.allowance import carried_allowance
from .run import FlowRun
from .state import NodeAccount

__all__ = ["current_flow"]


def current_flow() -> FlowRun | None:
    """The flow run whose node the calling work belongs to, or None.

    Inside a node's turn (its operation, its tools, a turn of another branch
    that node asked, in this process) this is the run, so the work can grow
    it: ``pride.current_flow().add(...)``. Outside any flow node: None.
    """
    account = carried_allowance()
    while account is not None:
        if isinstance(account, NodeAccount):
            run = account.run
            if isinstance(run, FlowRun) and not run.finished:
                return run
        account = account.parent
    return None
