"""Continuing a flow run a crash cut short, from the flow journal and the turn journal.

```python
async with Session(store="app.db") as session:
    for name in ("writer", "critic"):
        await session.spawn(Branch(name=name, chat_model=model))  # resumes their turns
    for unfinished in await session.unfinished_flows():
        result = await session.resume_flow(unfinished.flow_id, build_flow())
```

`resume_run` makes a [`FlowRun`][pride.flows.FlowRun] with the journaled
run's id and options and sets it up from the journal
(`pride.flows.journal`):

* a node whose outcome was journaled keeps it (its result as journaled):
  it is not run again, and nothing is signalled for it;
* a node whose turn a crash interrupted is not sent again: its branch,
  spawned again, resumed the turn from the turn journal before anything
  else, and the node waits for that
  turn's result (its ``NodeStarted`` says ``command="Resume"``);
* every other node runs as in any run: when its dependencies have
  completed, with late-bound commands built from the (journaled) upstream
  results;
* what the journal cannot hold (a command function, a ``when``) comes from
  the application: pass the same `Flow` rebuilt by the same code. It is
  matched node by node (names, targets, dependencies, static commands, which
  nodes are late-bound or conditional) and refused with
  [`InvalidFlow`][pride.InvalidFlow] naming the first node that differs.
  Without it, a run resumes only if every node still to run has a journaled
  command and no condition.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from ..errors import FlowNodeError, InvalidFlow, InvalidMessage, StoreError, UnknownBranch
from ..messages import Usage, unstructure
from ..store import BranchStore, StoredFlow
from .graph import CommandSource, Flow, FlowNode, Outcome, make_node, target_label
from .journal import (
    EventWire,
    FlowJournal,
    NodeWire,
    PlanWire,
    command_of,
    node_tag,
    read_events,
    read_plan,
)
from .run import FlowRun
from .state import TERMINAL, FlowHost, NodeState, blocked_reason

__all__ = ["resume_run"]

log = logging.getLogger("pride.flows")


def resume_run(
    stored: StoredFlow,
    flow: Flow | None,
    host: FlowHost,
    store: BranchStore,
    resumed_turns: dict[str, Any],
    *,
    max_concurrent: int | None = None,
) -> FlowRun:
    """The run that continues ``stored`` (see the module docstring); not started.

    ``resumed_turns`` maps node tags to the envelopes of the turns the
    session resumed when it spawned their branches; the ones this run takes
    are removed from it.

    Raises:
        InvalidFlow: ``flow`` differs from the journaled plan, a node still to
            run has no command to run (a function, and no ``flow`` given), or a
            target does not resolve.
        StoreError: the journal does not read back (a damaged row).
        TypeError, ValueError: ``flow`` is not a Flow, a bad ``max_concurrent``.
    """
    if flow is not None and not isinstance(flow, Flow):
        raise TypeError(f"resume_flow takes the rebuilt pride.Flow or None, got {type(flow)!r}")
    try:
        plan = read_plan(stored)
        events = read_events(stored)
        flow_id = UUID(stored.flow_id)
    except (InvalidMessage, ValueError) as exc:
        raise StoreError(
            f"flow {stored.flow_id} in {store.path}: its journal does not read back ({exc}); "
            "it cannot be resumed"
        ) from None
    ended = {event.node for event in events if event.kind == "ended"}
    given = _check_given(plan, events, flow, host) if flow is not None else {}
    built = Flow(plan.name)
    for wire in plan.nodes:
        command, when = _code_of(wire, given.get(wire.name), wire.name in ended, plan.name)
        built.add(_target_of(wire), command, depends_on=wire.depends_on, when=when, name=wire.name)
    run = FlowRun(
        built,
        host,
        max_concurrent=plan.max_concurrent if max_concurrent is None else max_concurrent,
        budget=plan.budget,
        fail_fast=plan.fail_fast,
        max_spawn=plan.max_spawn,
        flow_id=flow_id,
    )
    for event in events:
        if event.kind == "spawned":
            _add_spawned(run, event, given, ended)
        else:
            _restore(run, event, stored)
    _settle_restored(run)
    resumed = [
        state
        for state in run.states.values()
        if state.phase in ("pending", "ready") and node_tag(flow_id, state.name) in resumed_turns
    ]
    for state in resumed:
        state.resumed = resumed_turns.pop(node_tag(flow_id, state.name))
    _put_first(run, resumed)
    next_seq = max((seq for seq, _ in stored.events), default=-1) + 1
    run.journal = FlowJournal(store, flow_id, next_seq=next_seq, resumed=True)
    for state in resumed:
        reply = state.resumed
        if reply.rider is None and not reply.done:  # still running: its commit takes the outcome
            reply.rider = run.journal.rider(state)
    log.info(
        "resuming flow %r (%s): %d of %d nodes finished, %d turns resumed",
        run.label,
        flow_id,
        len(ended),
        len(run.states),
        len(resumed),
    )
    return run


def _check_given(
    plan: PlanWire, events: list[EventWire], flow: Flow, host: FlowHost
) -> dict[str, FlowNode]:
    """The nodes of ``flow`` by name, once checked against the journaled plan."""
    label = plan.name
    if flow.name != plan.name:
        raise InvalidFlow(
            "<flow>",
            f"the flow given is named {flow.name!r}, the journaled one {plan.name!r}",
            flow=label,
        )
    spawned = {event.node: event.spec for event in events if event.spec is not None}
    planned = {wire.name: wire for wire in plan.nodes}
    for wire in plan.nodes:
        if wire.name not in flow:
            raise InvalidFlow(
                wire.name, "is in the journaled plan but not in the flow given", flow=label
            )
    for node in flow:
        found = planned.get(node.name) or spawned.get(node.name)
        if found is None:
            raise InvalidFlow(
                node.name,
                "is not in the journaled plan (resume the flow that was started, unchanged)",
                flow=label,
            )
        difference = _difference(node, found, host)
        if difference is not None:
            raise InvalidFlow(
                node.name, f"differs from the journaled plan: {difference}", flow=label
            )
    return {node.name: node for node in flow}


def _difference(node: FlowNode, wire: NodeWire, host: FlowHost) -> str | None:
    if node.depends_on != wire.depends_on:
        return f"it depends on {list(node.depends_on)}, journaled {list(wire.depends_on)}"
    try:
        target = target_label(host.resolve(node.target))
    except (UnknownBranch, TypeError):
        target = target_label(node.target)
    if target != wire.target:
        return f"its target is {target!r}, journaled {wire.target!r}"
    if node.late_bound != wire.late_bound:
        return (
            "its command is "
            + ("a function" if node.late_bound else "a command")
            + (", journaled " + ("a function" if wire.late_bound else "a command"))
        )
    if (node.when is not None) != wire.when:
        return "it has a condition (when)" if node.when is not None else "it has no condition"
    if not node.late_bound and wire.command is not None:
        try:
            same = unstructure(node.command) == wire.command
        except Exception:
            same = False
        if not same:
            return f"its command is {node.command!r}, not the journaled one"
    return None


def _target_of(wire: NodeWire) -> Any:
    return wire.target


def _code_of(
    wire: NodeWire, given: FlowNode | None, finished: bool, flow: str | None
) -> tuple[CommandSource, Any]:
    """The command and condition a node of the resumed run runs with."""
    if given is not None:
        return given.command, given.when
    try:
        command = command_of(wire)
    except InvalidMessage as exc:
        if not finished:
            raise InvalidFlow(
                wire.name, f"its journaled command does not read back: {exc}", flow=flow
            ) from None
        command = None
    if finished:  # never run again: what it ran does not matter
        return (command if command is not None else _gone(wire.name)), None
    if command is None or wire.when:
        what = "its condition (when)" if wire.when else "its command"
        raise InvalidFlow(
            wire.name,
            f"{what} is a function, which the journal cannot hold, and the node has not "
            "finished: rebuild the same Flow and pass it, session.resume_flow(flow_id, flow)",
            flow=flow,
        )
    return command, None


def _gone(name: str) -> CommandSource:
    def gone(upstream: Mapping[str, Any]) -> Any:
        raise RuntimeError(f"node {name!r} finished before the restart; it is not run again")

    return gone


def _add_spawned(
    run: FlowRun, event: EventWire, given: Mapping[str, FlowNode], ended: set[str]
) -> None:
    wire = event.spec
    assert wire is not None
    if wire.name in run.states or any(name not in run.states for name in wire.depends_on):
        raise StoreError(
            f"flow {run.flow_id}: the journal adds node {wire.name!r} twice or before its "
            "dependencies; it cannot be resumed"
        )
    missing: str | None = None
    known = given.get(wire.name)
    command: CommandSource
    when = None
    if known is not None:
        command, when = known.command, known.when
    else:
        try:
            journaled = command_of(wire)
        except InvalidMessage:
            journaled = None
        if journaled is not None and not wire.when:
            command = journaled
        else:
            command = _gone(wire.name)
            if wire.name not in ended:
                missing = (
                    "it was added while the flow ran, with a function for its command or "
                    "condition, which the journal cannot hold; the flow given to resume_flow "
                    "has no node of that name"
                )
    node = make_node(
        {name: state.node for name, state in run.states.items()},
        wire.target,
        command,
        depends_on=wire.depends_on,
        when=when,
        name=wire.name,
        flow=run.name,
        spawned_by=wire.spawned_by,
    )
    run.spawned += 1
    state = run._register(node)
    if missing is not None:
        _restored(
            run,
            state,
            "failed",
            error=InvalidFlow(wire.name, missing, flow=run.name),
            reason=missing,
        )


def _restore(run: FlowRun, event: EventWire, stored: StoredFlow) -> None:
    state = run.states.get(event.node)
    if state is None or state.phase not in ("pending", "ready"):
        raise StoreError(
            f"flow {stored.flow_id}: the journal ends node {event.node!r}, which it does not "
            "have or ended before; it cannot be resumed"
        )
    outcome = event.outcome
    assert outcome is not None
    reason = event.reason
    error: BaseException | None = None
    if outcome == "failed" or (outcome == "cancelled" and event.error_type):
        why = reason or f"{event.error_type}: {event.error_message}"
        error = FlowNodeError(event.node, outcome, f"{why} (before the flow was resumed)")
    turn_id = None
    if event.turn_id is not None:
        try:
            turn_id = UUID(event.turn_id)
        except ValueError:
            turn_id = None
    _restored(
        run,
        state,
        outcome,
        result=event.result if outcome == "completed" else None,
        error=error,
        reason=reason,
        turn_id=turn_id,
    )
    _charge(state, event.usage, run)


def _charge(state: NodeState, usage: Usage, run: FlowRun) -> None:
    """Count a finished node's journaled usage again: the flow's budget is one
    allowance across the restart."""
    for account in (state.account, run.account):
        if account is None:
            continue
        account.input_tokens += usage.input_tokens
        account.output_tokens += usage.output_tokens
        account.model_calls += usage.model_calls
        account.tool_calls += usage.tool_calls
        if usage.cost_usd is not None:
            account.cost_usd = (account.cost_usd or 0.0) + usage.cost_usd


# Setting the run up before it starts (the run's own bookkeeping, from outside
# its scheduler: nothing runs yet, nothing is signalled, nothing journaled again).


def _restored(run: FlowRun, state: NodeState, outcome: Outcome, **fields: Any) -> None:
    """Give a node the outcome it had before the restart; its dependents count it."""
    state.phase = outcome
    for name, value in fields.items():
        setattr(state, name, value)
    state.journaled = True
    for dependent in state.dependents:
        if outcome == "completed" and dependent.phase == "pending":
            dependent.waiting -= 1


def _settle_restored(run: FlowRun) -> None:
    """Skip the nodes a restored outcome blocks; make the others ready."""
    for state in run.states.values():
        if state.phase not in ("pending", "ready"):
            continue
        for dependency in state.node.depends_on:
            upstream = run.states[dependency]
            if upstream.phase in TERMINAL and upstream.phase != "completed":
                run._skip(state, blocked_reason(upstream))
                break
    run.recount()


def _put_first(run: FlowRun, states: list[NodeState]) -> None:
    """Start ``states`` before the other ready nodes: their turns were resumed, and
    are first in their branches' mailboxes."""
    ready = run._ready
    for state in reversed(states):
        if state in ready:
            ready.remove(state)
            ready.appendleft(state)
