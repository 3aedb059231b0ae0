"""The flow journal: a run's plan and its nodes' outcomes, in the session's store.

A flow run by a session with a store is **durable**:

* its plan (every node: name, target, command, dependencies; the run's
  options) is committed before any node starts;
* each node that ends with an outcome of its own (completed, failed, skipped
  because its condition was false, or cancelled by someone else) is
  committed before any dependent starts, with its result; a node a running
  flow grows by is journaled with the next commit;
* a node's outcome is queued by its envelope's commit rider
  (`pride.actors.riders`, `FlowJournal.rider`) right before its turn's own
  commit, so the turn's messages, its turn-journal end and the node's
  outcome are one transaction: a crash leaves either none of them (the turn
  is resumed or run again) or all (the node is finished). Where no rider
  runs (a turn of another process, a streamed node, a turn that ended
  before a resumed run took it), the outcome gets a commit of its own just
  after, and a crash between the two makes the resumed run send the node
  again;
* each node's envelope is tagged with `node_tag` (the flow's id and the
  node's name), which the turn journal keeps with the node's turn: a turn
  a crash interrupted is resumed when its branch is spawned again, and its
  tag says which node it belongs to;
* a run that returns its [`FlowResult`][pride.FlowResult] is forgotten. A
  run cut short (the process died, the caller was cancelled, the journal
  could not commit) stays, to be continued by
  [`Session.resume_flow`][pride.supervisors.session.Session.resume_flow]
  (`pride.flows.resume`).

What cannot be journaled is said, never guessed: a command function (late
binding) or a ``when`` predicate is code, so the plan marks it and a
resumed run needs the application's rebuilt `Flow` to get it back; a
command the codec cannot serialise is marked the same way. A result that is
not JSON data is journaled as JSON data where it has a form (an attrs class
of pride's, a pydantic model: its dict) and else as its text, with a
warning: a resumed run's dependents see that form.

The rows are `pride.store.flows`'; every write goes through the store's
pending batch and group commit, like the turn journal's.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any, Literal, Protocol
from uuid import UUID

import attrs

from ..actors.riders import CommitRider
from ..errors import InvalidMessage, TurnCancelled
from ..messages import Budget, Usage, WorkCommand, structure, unstructure
from ..messages.codec import dump_json, parse_json
from ..store import MAX_SEQ, BranchStore, StoredFlow, flow_key
from .state import TERMINAL, NodeState, turn_outcome

__all__ = [
    "PLAN_VERSION",
    "WHEN_FALSE",
    "EventWire",
    "FlowJournal",
    "NodeWire",
    "PlanWire",
    "PlannedRun",
    "UnfinishedFlow",
    "node_tag",
    "parse_node_tag",
    "read_events",
    "read_plan",
]

log = logging.getLogger("pride.flows")

PLAN_VERSION = 1
"""The version of the journaled plan's shape."""

WHEN_FALSE = "its condition (when) was false"
"""The reason of a node skipped by its own condition (journaled: it is not asked again)."""

_TAG = "pride-flow:"


def node_tag(flow_id: UUID, node: str) -> str:
    """The envelope tag of ``node`` of flow run ``flow_id`` (kept by the turn journal)."""
    return f"{_TAG}{flow_id}:{node}"


def parse_node_tag(tag: Any) -> tuple[UUID, str] | None:
    """``(flow_id, node)`` of a tag made by `node_tag`, else None (any other tag)."""
    if not isinstance(tag, str) or not tag.startswith(_TAG):
        return None
    identity, sep, node = tag[len(_TAG) :].partition(":")
    if not sep or not node:
        return None
    try:
        return UUID(identity), node
    except ValueError:
        return None


# The wire forms: attrs classes the codec checks field by field (strict types,
# no extra keys) when a journal is read back: a file is not trusted.


@attrs.frozen
class NodeWire:
    """A journaled node: ``command`` is the command's data, None when it is a
    function (``late_bound``) or could not be serialised."""

    name: str
    target: str
    target_id: str | None = None
    command: Any = None
    late_bound: bool = False
    when: bool = False
    depends_on: tuple[str, ...] = ()
    spawned_by: str | None = None


@attrs.frozen
class PlanWire:
    """A journaled plan: the nodes as added, and the run's options."""

    version: int
    name: str | None
    nodes: tuple[NodeWire, ...]
    max_concurrent: int
    fail_fast: bool
    max_spawn: int
    budget: Budget | None = None


@attrs.frozen
class EventWire:
    """A journaled event: a node added to the running flow, or a node's outcome."""

    kind: Literal["spawned", "ended"]
    node: str
    spec: NodeWire | None = None
    outcome: Literal["completed", "failed", "skipped", "cancelled"] | None = None
    result: Any = None
    result_text: bool = False  # the result was not JSON data: this is its text
    error_type: str | None = None
    error_message: str | None = None
    reason: str | None = None
    turn_id: str | None = None
    usage: Usage = Usage()


@attrs.frozen
class UnfinishedFlow:
    """A flow run the store's journal holds: cut short, to be resumed.

    Attributes:
        flow_id: the run's id (pass it to ``session.resume_flow``).
        name: the flow's name.
        nodes: every node's name, the plan's then the ones it grew by.
        outcomes: the outcomes journaled so far, by node name.
        started_at: wall-clock time it started.
    """

    flow_id: UUID
    name: str | None
    nodes: tuple[str, ...]
    outcomes: Mapping[str, str]
    started_at: float


def node_wire(state: NodeState) -> NodeWire:
    """The journaled form of a node of a run."""
    node = state.node
    command = None
    if not node.late_bound:
        try:
            command = unstructure(node.command)
            dump_json(command)
        except (InvalidMessage, TypeError, ValueError, RecursionError) as exc:
            log.info(
                "flow journal: node %r's command cannot be journaled (%s); a resumed run "
                "needs the rebuilt Flow to get it back",
                node.name,
                exc,
            )
            command = None
    identity = getattr(state.target, "id", None)
    return NodeWire(
        node.name,
        state.label,
        str(identity) if isinstance(identity, UUID) else None,
        command,
        node.late_bound,
        node.when is not None,
        node.depends_on,
        node.spawned_by,
    )


def _result_data(name: str, result: Any) -> tuple[Any, bool]:
    """``(data, as_text)``: the result as JSON data, else as its text."""
    data = result
    dump = getattr(result, "model_dump", None)
    try:
        if callable(dump) and not isinstance(result, type):
            data = dump(mode="json")
        else:
            data = unstructure(result)
        dump_json(data)
    except Exception as exc:  # not JSON data: its text, said out loud
        log.warning(
            "flow journal: node %r's result is not JSON data (%s); journaled as its text",
            name,
            exc,
        )
        return str(result), True
    return data, False


class PlannedRun(Protocol):
    """What a run's plan is read from (a `FlowRun`): its name, nodes and bounds.

    ``planned`` counts the first of ``states`` that are the plan's (the `Flow`'s);
    the others were added to the run (``run.add``) before it started."""

    name: str | None
    states: dict[str, NodeState]
    planned: int
    max_concurrent: int
    fail_fast: bool
    max_spawn: int
    budget: Budget | None


class FlowJournal:
    """A durable run's journal: what it writes to the store, and when it commits."""

    __slots__ = ("flow_id", "key", "next_seq", "resumed", "store")

    def __init__(
        self, store: BranchStore, flow_id: UUID, *, next_seq: int = 0, resumed: bool = False
    ) -> None:
        self.store = store
        self.flow_id = flow_id
        self.key = flow_key(str(flow_id))
        self.next_seq = next_seq
        self.resumed = resumed  # its plan is in the store already

    def __repr__(self) -> str:
        return f"<FlowJournal of {self.flow_id} in {self.store!r}>"

    def tag(self, node: str) -> str:
        """The envelope tag of ``node``."""
        return node_tag(self.flow_id, node)

    async def begin(self, run: PlannedRun) -> None:
        """Commit the plan (a resumed run's is there already).

        Raises:
            StoreError: the commit failed (no node has started).
        """
        if self.resumed:
            return
        states = list(run.states.values())
        plan = PlanWire(
            PLAN_VERSION,
            run.name,
            tuple(node_wire(state) for state in states[: run.planned]),
            run.max_concurrent,
            run.fail_fast,
            run.max_spawn,
            run.budget,
        )
        self.store.flow_begin(str(self.flow_id), run.name, dump_json(unstructure(plan)))
        for state in states[run.planned :]:  # added before the run started: after its plan
            self.spawned(state)
        await self.store.flush(self.key)

    def spawned(self, state: NodeState) -> None:
        """Queue a node the running flow grew by (committed with the next commit); one
        added before the run started is queued by `begin`, after the plan."""
        wire = EventWire("spawned", state.name, spec=node_wire(state))
        self._event(wire)

    @staticmethod
    def records(state: NodeState) -> bool:
        """True for an outcome of the node's own, which a resumed run keeps; the
        others (skipped or cancelled by the flow) a resumed run finds again."""
        if state.journaled:
            return False
        phase = state.phase
        return (
            phase in ("completed", "failed")
            or (phase == "cancelled" and state.error is not None)
            or (phase == "skipped" and state.reason == WHEN_FALSE)
        )

    async def ended(self, state: NodeState) -> None:
        """Commit ``state``'s outcome (before its dependents start); if its turn's
        rider queued it already, make sure that commit happened.

        Raises:
            StoreError: the commit failed.
        """
        if not state.unflushed:
            state.journaled = True
            self._ended(
                state,
                state.phase,
                result=state.result,
                error=state.error,
                reason=state.reason,
                turn_id=state.turn_id,
            )
        await self.store.flush(self.key)
        state.unflushed = False

    def rider(self, state: NodeState) -> CommitRider:
        """The commit rider of ``state``'s envelope: it queues the node's outcome
        for its turn's own commit (`pride.actors.riders`).

        It queues nothing for a node that has an outcome already, or whose
        turn the flow itself cancelled (the run's own cancellation is not the
        node's outcome: a resumed run sends such a node again).
        """

        def ride(turn_id: UUID | None, result: Any, failure: BaseException | None) -> None:
            if state.journaled or state.phase in TERMINAL:
                return
            if isinstance(failure, TurnCancelled) and failure.reason == "caller":
                return  # the flow cancelled it (or gave up on it): not an outcome of its own
            outcome, result, error, reason = turn_outcome(result, failure)
            # Counted as the branch's own rows too: its turn's commit (which
            # flushes only what the branch queued) takes it, even for a turn
            # that recorded no message (a Chat).
            branch = getattr(state.target, "name", None)
            self._ended(
                state,
                outcome,
                result=result,
                error=error,
                reason=reason,
                turn_id=turn_id,
                branch=branch,
            )
            state.journaled = state.unflushed = True

        return ride

    def _ended(
        self,
        state: NodeState,
        outcome: str,
        *,
        result: Any,
        error: BaseException | None,
        reason: str | None,
        turn_id: UUID | None,
        branch: str | None = None,
    ) -> None:
        as_text = False
        if outcome == "completed":
            result, as_text = _result_data(state.name, result)
        else:
            result = None
        self._event(
            EventWire(
                "ended",
                state.name,
                outcome=outcome,  # type: ignore[arg-type]
                result=result,
                result_text=as_text,
                error_type=type(error).__name__ if error is not None else None,
                error_message=str(error) if error is not None else None,
                reason=reason,
                turn_id=str(turn_id) if turn_id is not None else None,
                usage=state.account.usage() if state.account is not None else Usage(),
            ),
            branch=branch,
        )

    async def finish(self) -> None:
        """The run returned its result: forget it.

        Raises:
            StoreError: the commit failed (the run stays in the journal; resuming
                it finds every node finished).
        """
        self.store.flow_end(str(self.flow_id))
        await self.store.flush(self.key)

    def _event(self, wire: EventWire, *, branch: str | None = None) -> None:
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        data = dump_json(unstructure(wire), replace=True)
        refused = functools.partial(_refused, wire) if wire.kind == "ended" else None
        self.store.flow_event(str(self.flow_id), seq, data, branch_name=branch, refused=refused)


def _refused(wire: EventWire, reason: str) -> str:
    """The event journaled instead of ``wire``, a node's outcome the store refused (a
    result over its ``max_row_bytes``): the node failed there, as its commit failed its
    turn, so a resumed run keeps that failure instead of sending the node again."""
    failed = attrs.evolve(
        wire,
        outcome="failed",
        result=None,
        result_text=False,
        error_type="StoreError",
        error_message=reason,
        reason=f"StoreError: {reason}",
    )
    return dump_json(unstructure(failed), replace=True)


def read_plan(stored: StoredFlow) -> PlanWire:
    """The plan of a stored flow, checked.

    Raises:
        InvalidMessage: it does not read back (a damaged or foreign row), or a row
            of the flow was too large to be read (``stored.problem``).
    """
    if stored.problem is not None:  # a row of it over the store's bound, not read
        raise InvalidMessage([("flow", stored.problem)])
    if stored.plan is None:
        raise InvalidMessage([("plan", "missing")])
    plan: PlanWire = structure(parse_json(stored.plan), PlanWire)
    if plan.version != PLAN_VERSION:
        raise InvalidMessage([("plan.version", f"{plan.version} (this pride reads 1)")])
    return plan


def read_events(stored: StoredFlow) -> list[EventWire]:
    """The events of a stored flow, checked, in order.

    Raises:
        InvalidMessage: one does not read back, or is numbered outside 0 to
            `MAX_SEQ` (naming its number).
    """
    events = []
    for seq, text in stored.events:
        if not 0 <= seq <= MAX_SEQ:  # the next event is numbered from it: it must be writable
            raise InvalidMessage(
                [(f"event {seq}", f"a number pride never writes (0 to {MAX_SEQ})")]
            )
        try:
            event: EventWire = structure(parse_json(text), EventWire)
        except InvalidMessage as exc:
            raise InvalidMessage([(f"event {seq}", str(exc))]) from None
        if (event.kind == "spawned") != (event.spec is not None):
            raise InvalidMessage([(f"event {seq}", "a spawned event, and only one, has a spec")])
        if event.kind == "ended" and event.outcome is None:
            raise InvalidMessage([(f"event {seq}", "an ended event without an outcome")])
        events.append(event)
    return events


def summary(stored: StoredFlow) -> UnfinishedFlow | None:
    """What ``session.unfinished_flows()`` says of a stored flow (None: unreadable, logged)."""
    try:
        plan = read_plan(stored)
        events = read_events(stored)
        identity = UUID(stored.flow_id)
    except (InvalidMessage, ValueError) as exc:
        log.error("flow journal: flow %s does not read back: %s", stored.flow_id, exc)
        return None
    names = [node.name for node in plan.nodes]
    names += [event.node for event in events if event.kind == "spawned"]
    outcomes = {
        event.node: event.outcome for event in events if event.kind == "ended" and event.outcome
    }
    return UnfinishedFlow(identity, plan.name, tuple(names), outcomes, stored.started_at)


def command_of(wire: NodeWire) -> WorkCommand | None:
    """The journaled command of a node, or None (a function, or not journaled).

    Raises:
        InvalidMessage: it does not read back as a work command.
    """
    if wire.command is None:
        return None
    command: WorkCommand = structure(wire.command, WorkCommand)
    return command
