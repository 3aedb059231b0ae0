"""Running a flow: nodes as ordinary turns of their branches, in dependency order.

A `FlowRun` is one execution of a [`Flow`][pride.Flow]. It is made by
[`Session.flow`][pride.supervisors.session.Session.flow] (or ``flow_stream``, or
``resume_flow``), which hands it the session's name resolution, observer and
store as a `FlowHost`; everything below works on that host and on the public
send API, so a node is exactly a command sent to a branch: it waits in the
branch's mailbox, runs as one turn with all of a turn's guarantees, and two
nodes on one branch are served in the order they were sent.

This module is the scheduler and the outcomes: refusal before anything runs
(every target resolved, the graph checked: `InvalidFlow` naming the node), a
node started once its dependencies completed, at most ``max_concurrent`` at a
time, in the order they became ready; a node that did not complete skips its
dependents (``fail_fast``: cancels the rest); a spent shared budget starts no
more nodes; a cancelled caller cancels the running nodes and skips the rest;
nodes added while it runs (``max_spawn``). One node's own run is
`pride.flows.node`, the signals `pride.flows.signals`, the journal of a
durable run `pride.flows.journal`, nodes added while it runs
`pride.flows.growing`. docs/flows.md has the rules with examples.
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal
from uuid import UUID

import trio

from ..actors import Target
from ..actors.waits import serving_branch
from ..budget.accounts import Account
from ..budget.allowance import carried_allowance
from ..errors import BudgetExceeded, InvalidFlow, UnknownBranch, one_exception
from ..messages import Budget
from .graph import (
    CommandSource,
    Condition,
    Flow,
    FlowNode,
    Outcome,
    make_node,
    order_nodes,
    target_label,
)
from .journal import FlowJournal
from .node import SendOrder, execute
from .result import FlowResult, collect
from .signals import SignalOut
from .state import (
    TERMINAL,
    FlowHost,
    NodeAccount,
    NodeState,
    blocked_reason,
    check_count,
    mark_skipped,
    settle,
    spawning_node,
)

__all__ = ["DEFAULT_MAX_CONCURRENT", "DEFAULT_MAX_SPAWN", "FlowRun"]

log = logging.getLogger("pride.flows")

DEFAULT_MAX_CONCURRENT = 5
"""Nodes running at once, by default (the reference's default too)."""
DEFAULT_MAX_SPAWN = 50
"""Nodes a run may grow by while it runs, by default (the reference's default too)."""


class FlowRun:
    """One run of a flow: its nodes' states, its signals, its result.

    Made by [`Session.flow`][pride.supervisors.session.Session.flow] and ``flow_stream``; work of
    a running node reaches it with [`current_flow`][pride.current_flow] to
    add nodes.

    Attributes:
        flow_id: the run's id (every node signal carries it; ``resume_flow`` takes it).
        name: the flow's name.

    Raises (when made):
        InvalidFlow: a node's target does not resolve, a dependency names
            no node, the nodes form a cycle, or a node targets the branch
            whose own turn is starting the flow (it would wait on itself).
        ValueError: ``max_concurrent`` < 1 or ``max_spawn`` < 0, or either
            not an int (a bool is not a count). A huge one is no bound at all.
        TypeError: ``budget`` is not a Budget.
    """

    def __init__(
        self,
        flow: Flow,
        host: FlowHost,
        *,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        budget: Budget | None = None,
        fail_fast: bool = False,
        max_spawn: int = DEFAULT_MAX_SPAWN,
        items: bool = False,
        flow_id: UUID | None = None,
    ) -> None:
        if not isinstance(flow, Flow):
            raise TypeError(f"expected a pride.Flow, got {type(flow).__name__}")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pride.Budget or None, got {type(budget).__name__}")
        self.max_concurrent = check_count("max_concurrent", max_concurrent, 1)
        self.max_spawn = check_count("max_spawn", max_spawn, 0)
        self.fail_fast = bool(fail_fast)
        self.budget = budget
        self.items = bool(items)
        self._host = host
        self.flow_id: UUID = flow_id if flow_id is not None else uuid.uuid4()
        self.name: str | None = flow.name
        self.label = flow.name or f"flow-{self.flow_id.hex[:8]}"
        self._waiter = serving_branch()  # a turn starting the flow: its branch must not be a node's
        # One allowance for the whole graph, under whatever the caller draws on (a
        # flow started by a node of another flow counts there too).
        self.account = Account(budget, scope=f"flow {self.label}", parent=carried_allowance())
        self.states: dict[str, NodeState] = {}
        self._nodes: dict[str, FlowNode] = {}
        self._suffixes: dict[str, int] = {}  # default names of added nodes (unique_name)
        for node in order_nodes(flow._nodes, flow=flow.name):
            self._register(node)
        self.planned = len(self.states)  # the plan's nodes; those `add`ed follow
        self._ready: collections.deque[NodeState] = collections.deque()
        self.recount()
        self._phase: Literal["new", "running", "done"] = "new"
        # Set once the scheduler has stopped (every node had an outcome, or the run is
        # unwinding): from then on nothing would start a node `add` accepted, so it refuses.
        self._closed = False
        self._active = 0  # nodes holding a slot (sent, or about to be)
        self.spawned = 0
        self._halt: str | None = None  # why no more nodes start (fail_fast, spent budget)
        # Skipped without their signal yet, in the order they were skipped.
        self._unannounced: collections.deque[NodeState] = collections.deque()
        self._changed = trio.Event()
        self._ended_at: float | None = None
        self.signals = SignalOut(self.flow_id, self.name, host.observer)
        self._node_tasks: trio.Nursery | None = None
        self._finished = trio.Event()
        self.send_order = SendOrder()
        self.item_sink: Callable[[str, Any], Any] | None = None
        # A session with a store journals the run (pride.flows.journal), to resume it.
        self.journal = None if host.journal is None else FlowJournal(host.journal, self.flow_id)

    def __repr__(self) -> str:
        return f"<FlowRun {self.label!r} {self._phase}, {len(self.states)} nodes>"

    # ------------------------------------------------------------ the graph

    @property
    def nodes(self) -> tuple[FlowNode, ...]:
        """Every node of the run (the plan's, then the ones added), in order."""
        return tuple(self._nodes.values())

    @property
    def running(self) -> bool:
        """True from the start of `run` until it returns."""
        return self._phase == "running"

    @property
    def finished(self) -> bool:
        """True once `run` has returned (or raised)."""
        return self._phase == "done"

    def outcome(self, name: str) -> Outcome | None:
        """How node ``name`` ended, or None while it has not (KeyError: no such node)."""
        phase = self.states[name].phase
        return phase if phase in TERMINAL else None  # type: ignore[return-value]

    def node_tag(self, state: NodeState) -> str | None:
        """The tag of ``state``'s envelope: names the node in the turn journal (a
        durable run only; `pride.flows.journal.node_tag`)."""
        journal = self.journal
        return journal.tag(state.name) if journal is not None else None

    def _resolve(self, node: FlowNode) -> Target:
        try:
            target = self._host.resolve(node.target)
        except (UnknownBranch, TypeError) as exc:
            raise InvalidFlow(
                node.name, f"its target does not resolve: {exc}", flow=self.name
            ) from exc
        waiter = self._waiter
        # By id too: a virtual branch's name resolves to its address (a VirtualRef).
        identity = getattr(waiter, "id", None)
        if waiter is not None and (
            target is waiter or (identity is not None and getattr(target, "id", None) == identity)
        ):
            raise InvalidFlow(
                node.name,
                f"targets branch {target.name!r}, whose own turn is running the flow: the turn "
                "would wait on itself (start the flow outside that turn, or do that work inline)",
                flow=self.name,
            )
        return target

    def _register(self, node: FlowNode) -> NodeState:
        target = self._resolve(node)
        state = NodeState(node, target)
        state.account = NodeAccount(self, state, self.account)
        state.branch_id = getattr(target, "id", None)
        state.label = target_label(target)
        state.task_name = f"flow {self.label} node {node.name}"
        for dependency in node.depends_on:
            upstream = self.states[dependency]
            upstream.dependents.append(state)
            if upstream.phase != "completed":
                state.waiting += 1
        self.states[node.name] = state
        self._nodes[node.name] = node
        return state

    def recount(self) -> None:
        """Make the nodes whose dependencies have all completed ready (in order)."""
        self._ready.clear()
        for state in self.states.values():
            if state.phase in ("pending", "ready") and state.waiting == 0:
                state.phase = "ready"
                self._ready.append(state)

    def add(
        self,
        target: Any,
        command: CommandSource,
        *,
        depends_on: FlowNode | str | Iterable[FlowNode | str] = (),
        when: Condition | None = None,
        name: str | None = None,
    ) -> FlowNode:
        """Grow the running flow by a node: the arguments of
        [`Flow.add`][pride.flows.graph.Flow.add]; the rules are `pride.flows.growing`'s.

        The node may depend only on nodes the run already has (so a running
        flow never forms a cycle). It starts as soon as those completed (at
        once if it has none), and its signals and outcome are the run's like
        any other node's, with ``spawned_by`` naming the node whose work added
        it. The plan (the `Flow`) is not changed.

        Raises:
            InvalidFlow: the run has grown by ``max_spawn`` nodes already, the
                name is taken, a dependency is not a node of the run, or the
                target does not resolve.
            RuntimeError: the run has finished, or is finishing: every node
                had ended and nothing was left to start, or the run is unwinding
                (cancelled, or stopped on an error). A ``flow_stream`` consumer
                adding a node after the last node's terminal signal may be told
                so: the scheduler may have seen the run empty already.
            TypeError, ValueError: as for ``Flow.add``.
        """
        if self._closed or self.finished:
            raise RuntimeError(f"flow {self.label!r} has finished; it cannot grow any more")
        node = make_node(
            self._nodes,
            target,
            command,
            depends_on=depends_on,
            when=when,
            name=name,
            flow=self.name,
            spawned_by=spawning_node(self),
            suffixes=self._suffixes,
        )
        if self.spawned >= self.max_spawn:
            raise InvalidFlow(
                node.name,
                f"the flow has already grown by max_spawn={self.max_spawn} nodes "
                "(pass a larger max_spawn to session.flow)",
                flow=self.name,
            )
        for dependency in node.depends_on:
            if dependency not in self.states:
                raise InvalidFlow(
                    node.name,
                    f"depends on {dependency!r}, which is not a node of the running flow "
                    "(a node added while the flow runs depends only on nodes it already has)",
                    flow=self.name,
                )
        state = self._register(node)
        self.spawned += 1
        if self.journal is not None and self._phase != "new":  # else `begin` journals it
            self.journal.spawned(state)
        blocked = next(
            (
                upstream
                for dependency in node.depends_on
                if (upstream := self.states[dependency]).phase in TERMINAL
                and upstream.phase != "completed"
            ),
            None,
        )
        if self._halt is not None:
            self._skip(state, self._halt)
        elif blocked is not None:
            self._skip(state, blocked_reason(blocked))
        elif state.waiting == 0:
            state.phase = "ready"
            self._ready.append(state)
        self._wake()
        return node

    # ------------------------------------------------------------- running

    async def run(self) -> FlowResult:
        """Run every node; return the [`FlowResult`][pride.FlowResult].

        Returns when every node has an outcome (including the nodes added
        while it ran). Node failures are outcomes, not exceptions.

        Raises:
            RuntimeError: the run was started before.
            StoreError: a durable run could not commit its plan (nothing ran)
                or a node's outcome (no node started after it).

        Cancellation: every running node is cancelled (its turn finalises
        with its own terminal signal, then ``NodeCancelled``), every other
        node is skipped (``NodeSkipped``), and ``Cancelled`` propagates. A
        durable run stays in its journal, to be resumed.
        """
        if self._phase != "new":
            raise RuntimeError(f"flow run {self.label!r} has already been started")
        running = self._host.running
        if running is None:
            return await self._run()
        if self.flow_id in running:
            raise RuntimeError(
                f"flow {self.label!r} ({self.flow_id}) is running in this session already"
            )
        running.add(self.flow_id)
        try:
            return await self._run()
        finally:
            running.discard(self.flow_id)

    async def _run(self) -> FlowResult:
        self._phase = "running"
        self.signals.started_at = trio.current_time()
        self.account.begin(self.signals.started_at)
        try:
            try:
                if self.journal is not None:
                    await self.journal.begin(self)
                async with trio.open_nursery() as nursery:
                    self._node_tasks = await nursery.start(self._host_nodes)
                    await self._schedule()
                    self._closed = True  # with no await since it saw the run empty
                    self._finished.set()
            except BaseExceptionGroup as group:  # one exception for the caller, never a group
                raise one_exception(group, log, "while running a flow") from None
        except BaseException as exc:
            self._closed = True
            if isinstance(exc, trio.Cancelled):
                reason = self._halt or "the flow was cancelled"
            else:
                reason = f"the flow stopped on an error: {exc!r}"
            for state in self.states.values():
                if state.phase in ("pending", "ready"):
                    self._skip(state, reason)
            with trio.CancelScope(shield=True):
                await self._announce()
            raise
        finally:
            self._phase = "done"
            self._ended_at = trio.current_time()
        if self.journal is not None:
            await self.journal.finish()
        return self.result()

    async def _host_nodes(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The nursery of the node tasks, apart from the scheduler's: ``fail_fast``
        cancels every running node at once by cancelling it (one cancel scope
        for all nodes, none of their own to pay for)."""
        async with trio.open_nursery() as nodes:
            task_status.started(nodes)
            await self._finished.wait()

    async def _schedule(self) -> None:
        while True:
            self._changed = trio.Event()  # before any await: a wake from now on is seen
            if self._unannounced:
                await self._announce()
                continue
            self._start_ready()
            if self._unannounced:
                continue
            if not self._active and not self._ready:
                return
            await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()

    def cancelled_from_outside(self) -> str:
        """A node saw the run's caller cancel it: nothing else starts, and every
        node still waiting is skipped for that reason."""
        reason = "the flow was cancelled"
        self._stop(reason, cancel=False)
        return self._halt or reason

    def _start_ready(self) -> None:
        nodes = self._node_tasks
        assert nodes is not None
        ready = self._ready
        while ready and self._active < self.max_concurrent:
            state = ready.popleft()
            if state.phase != "ready":
                continue
            if self._halt is None:
                spent = self.account.refusal("model", trio.current_time())
                if spent is not None:
                    self._stop(f"the {spent.scope} budget is spent ({spent})", cancel=False)
            if self._halt is not None:
                self._skip(state, self._halt)
                continue
            state.phase = "running"
            self._active += 1
            self.send_order.join(state)
            nodes.start_soon(self._serve, state, name=state.task_name)

    async def _serve(self, state: NodeState) -> None:
        try:
            await execute(self, state)
        finally:
            self.send_order.leave(state)
            self._active -= 1
            # Wake the scheduler only when it has something to do: a node to start
            # or skip, or the end (in a wide fan-in most endings change nothing).
            if self._ready or self._unannounced or not self._active:
                self._wake()

    # ------------------------------------------------------------ outcomes

    async def conclude(
        self,
        state: NodeState,
        outcome: Outcome,
        *,
        result: Any = None,
        error: BaseException | None = None,
        reason: str | None = None,
    ) -> None:
        """``state``'s node ended: record it (journal it), signal it, settle its dependents.

        Raises:
            StoreError: a durable run could not commit the outcome; the run
                stops starting nodes (its journal still says the node runs, so a
                resumed run finds out from the turn journal).

        Cancellation: shielded; the outcome is journaled and signalled whatever
        is cancelled meanwhile (the cancellation takes effect afterwards).
        """
        state.phase = outcome
        state.result = result
        state.error = error
        state.ended_at = trio.current_time()
        if reason is None and error is not None:
            reason = f"{type(error).__name__}: {error}"
        state.reason = reason
        journal = self.journal
        # Recording the end is cleanup, shielded: a cancellation arriving meanwhile (the
        # caller's, fail_fast's) left a node whose outcome waited for its commit with no
        # terminal signal. Each wait is bounded: the store's commit, and FINALIZE_GRACE
        # for the signal's subscribers.
        with trio.CancelScope(shield=True):
            if journal is not None and (state.unflushed or journal.records(state)):
                try:
                    await journal.ended(state)
                except Exception as exc:
                    self._stop(f"the flow's journal could not commit: {exc}", cancel=True)
                    raise
            await self.signals.ended(state)
        self._settle(state)
        if outcome == "failed":
            if self.fail_fast:
                self._stop(f"fail_fast: node {state.name!r} failed", cancel=True)
            elif isinstance(error, BudgetExceeded) and error.scope not in ("turn", "command"):
                # A shared allowance (the flow's, a session's): no later node could work.
                self._stop(f"the {error.scope} budget is spent ({error})", cancel=False)

    def _settle(self, state: NodeState) -> None:
        """``state`` has ended: its dependents become ready, or are skipped (`settle`)."""
        settle(state, self._ready, self._unannounced)

    def _skip(self, state: NodeState, reason: str) -> None:
        """Skip a node that never started, and what depends on it (their signals go
        out with the next `_announce`)."""
        if mark_skipped(state, reason, self._unannounced):
            settle(state, self._ready, self._unannounced)

    def _stop(self, reason: str, *, cancel: bool) -> None:
        """Start no more nodes (skip the waiting ones); with ``cancel``, cancel the running."""
        if self._halt is not None:
            return
        self._halt = reason
        for state in self.states.values():
            if state.phase in ("pending", "ready"):
                self._skip(state, reason)
            elif cancel and state.phase == "running":
                state.cancel_reason = reason
        if cancel and self._node_tasks is not None:
            self._node_tasks.cancel_scope.cancel()

    async def _announce(self) -> None:
        """Signal the skipped nodes, in the order they were skipped (one cascade's
        deliveries share one grace period: `SignalOut.skipped`)."""
        await self.signals.skipped(self._unannounced, self.label)

    # -------------------------------------------------------------- result

    def result(self) -> FlowResult:
        """The [`FlowResult`][pride.FlowResult] of a finished run.

        Raises:
            RuntimeError: some node has no outcome yet.
        """
        ended = self._ended_at if self._ended_at is not None else trio.current_time()
        return collect(
            self.label,
            self.flow_id,
            self.name,
            states=self.states,
            started_at=self.signals.started_at,
            ended_at=ended,
            usage=self.account.usage(),
        )
