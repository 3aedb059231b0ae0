"""Running a flow: nodes as ordinary turns of their branches, in dependency order.

A `FlowRun` is one execution of a [`Flow`][pride.Flow]. It is made by
[`Session.flow`][pride.supervisors.session.Session.flow] (or ``flow_stream``), which hands it the
session's name resolution and observer as a `FlowHost`; everything
below works on that host and on the public send API, so a node is exactly a
command sent to a branch: it waits in the branch's mailbox, runs as one
turn with all of a turn's guarantees, and two nodes on one branch are
served in the order they were sent.

The rules (docs/flows.md has them with examples):

* **Refusal first.** Every target is resolved and the graph checked (no
  dependency on a missing node, no cycle) when the run is made, before any
  node runs; problems raise [`InvalidFlow`][pride.InvalidFlow] naming the node.
* **Start.** A node starts once all its dependencies completed, at most
  ``max_concurrent`` at a time, in the order they became ready (roots in
  the order they were added). Its condition (``when``) is checked first,
  and a late-bound command is built then, from the upstream results.
  ``NodeStarted`` means its command was sent.
* **Failure.** A node that fails, is skipped or is cancelled never lets its
  dependents run: they are skipped, with the reason. Independent nodes go
  on, unless ``fail_fast``: then the first failure cancels the running
  nodes and skips the rest. A spent shared budget (the flow's or a
  session's) stops new nodes from starting.
* **Cancellation.** Cancelling the caller cancels every running node's turn
  (which ends with its own terminal signal first), skips the rest and
  re-raises; no node starts after it.
* **Budget.** The flow's budget is one allowance for every node's turn and
  for the work those turns ask of other branches of this process: each
  node's envelope carries it (`pride.actors.budget.drawing_on`).
* **Growing.** Work of a running node (its operation, a tool) may add nodes
  with [`current_flow`][pride.current_flow]``().add(...)``, at most
  ``max_spawn`` per run; they may depend only on nodes the run already has.
"""

from __future__ import annotations

import collections
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal
from uuid import UUID

import attrs
import trio

from ..actors import Reply, Target, send, stream
from ..actors.budget import Account, carried_allowance, carry, uncarry
from ..actors.turn import FINALIZE_GRACE, await_bounded
from ..actors.waits import serving_branch
from ..errors import BudgetExceeded, InvalidFlow, TurnCancelled, UnknownBranch, exception_leaves
from ..messages import (
    Budget,
    NodeCancelled,
    NodeCompleted,
    NodeFailed,
    NodeSignal,
    NodeSkipped,
    NodeStarted,
    ReActStream,
    Run,
    Signal,
    WorkCommand,
)
from .graph import (
    CommandSource,
    Condition,
    Flow,
    FlowNode,
    Outcome,
    call_maybe_async,
    make_node,
    order_nodes,
    target_label,
)
from .result import FlowResult, NodeOutcome

__all__ = [
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_MAX_SPAWN",
    "FlowHost",
    "FlowRun",
    "current_flow",
]

log = logging.getLogger("pride.flows")

DEFAULT_MAX_CONCURRENT = 5
"""Nodes running at once, by default (the reference's default too)."""
DEFAULT_MAX_SPAWN = 50
"""Nodes a run may grow by while it runs, by default (the reference's default too)."""

# How long a cancelled node waits for its turn to finalise (the turn's own
# finalisation is bounded by FINALIZE_GRACE; this adds room for its cancellation).
CANCEL_GRACE = 2 * FINALIZE_GRACE

# The item kinds whose turns stream (``pride.stream``) when a stream asks for items.
STREAMING_COMMANDS = (Run, ReActStream)

_Phase = Literal["pending", "ready", "running", "completed", "failed", "skipped", "cancelled"]
_TERMINAL = frozenset({"completed", "failed", "skipped", "cancelled"})


@attrs.frozen
class FlowHost:
    """What a run needs from the session that runs it.

    Attributes:
        name: the session's name (for messages).
        resolve: turns a node's target (a Branch, a name, an id, a ref) into
            the [`Target`][pride.Target] to send to; raises ``UnknownBranch``.
        observer: where node signals go (``dispatch(signal)``), or None.
    """

    name: str
    resolve: Callable[[Any], Target]
    observer: Any = None


class _NodeAccount(Account):
    """A node's usage, under its flow's allowance; its envelope carries it, so
    work the node causes can find the run (`current_flow`)."""

    __slots__ = ("run", "state")

    def __init__(self, run: FlowRun, state: _State, parent: Account) -> None:
        super().__init__(None, scope=f"flow node {state.node.name}", parent=parent)
        self.run = run
        self.state = state


@attrs.define(eq=False)
class _State:
    """One node of a run, as the run tracks it."""

    node: FlowNode
    target: Target
    phase: _Phase = "pending"
    waiting: int = 0  # dependencies not completed yet
    dependents: list[_State] = attrs.Factory(list)
    result: Any = None
    error: BaseException | None = None
    reason: str | None = None
    turn_id: UUID | None = None
    started_at: float | None = None
    ended_at: float | None = None
    cancel_reason: str | None = None
    account: _NodeAccount | None = None
    send_turn: trio.Event | None = None  # set when the node is first in its branch's send order
    branch_id: UUID | None = None
    label: str = ""  # the target's name
    task_name: str = ""

    @property
    def name(self) -> str:
        return self.node.name


def _check_count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


class FlowRun:
    """One run of a flow: its nodes' states, its signals, its result.

    Made by [`Session.flow`][pride.supervisors.session.Session.flow] and ``flow_stream``; work of
    a running node reaches it with [`current_flow`][pride.current_flow] to
    add nodes.

    Attributes:
        flow_id: the run's id (every node signal carries it).
        name: the flow's name.

    Raises (when made):
        InvalidFlow: a node's target does not resolve, a dependency names
            no node, the nodes form a cycle, or a node targets the branch
            whose own turn is starting the flow (it would wait on itself).
        ValueError: ``max_concurrent`` < 1 or ``max_spawn`` < 0.
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
    ) -> None:
        if not isinstance(flow, Flow):
            raise TypeError(f"expected a pride.Flow, got {type(flow).__name__}")
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pride.Budget or None, got {type(budget).__name__}")
        self._max_concurrent = _check_count("max_concurrent", max_concurrent, 1)
        self._max_spawn = _check_count("max_spawn", max_spawn, 0)
        self._fail_fast = bool(fail_fast)
        self._items = bool(items)
        self._host = host
        self.flow_id: UUID = uuid.uuid4()
        self.name: str | None = flow.name
        self._label = flow.name or f"flow-{self.flow_id.hex[:8]}"
        self._waiter = serving_branch()  # a turn starting the flow: its branch must not be a node's
        # One allowance for the whole graph, under whatever the caller draws on (a
        # flow started by a node of another flow counts there too).
        self._account = Account(budget, scope=f"flow {self._label}", parent=carried_allowance())
        self._states: dict[str, _State] = {}
        self._nodes: dict[str, FlowNode] = {}
        for node in order_nodes(flow._nodes, flow=flow.name):
            self._register(node)
        self._ready: collections.deque[_State] = collections.deque(
            state for state in self._states.values() if state.waiting == 0
        )
        for state in self._ready:
            state.phase = "ready"
        self._phase: Literal["new", "running", "done"] = "new"
        self._active = 0  # nodes holding a slot (sent, or about to be)
        self._spawned = 0
        self._halt: str | None = None  # why no more nodes start (fail_fast, spent budget)
        self._unannounced: list[_State] = []  # skipped without their signal yet
        self._changed = trio.Event()
        self._started_at = 0.0
        self._ended_at: float | None = None
        self._listeners: list[Callable[[Signal], None]] = []
        self._node_tasks: trio.Nursery | None = None
        self._finished = trio.Event()
        self._send_order: dict[int, collections.deque[_State]] = {}
        self._item_sink: Callable[[str, Any], Any] | None = None

    def __repr__(self) -> str:
        return f"<FlowRun {self._label!r} {self._phase}, {len(self._states)} nodes>"

    # ------------------------------------------------------------ the graph

    @property
    def nodes(self) -> tuple[FlowNode, ...]:
        """Every node of the run (the plan's, then the ones added), in order."""
        return tuple(self._nodes.values())

    @property
    def running(self) -> bool:
        """True from the start of `run` until it returns."""
        return self._phase == "running"

    def outcome(self, name: str) -> Outcome | None:
        """How node ``name`` ended, or None while it has not (KeyError: no such node)."""
        phase = self._states[name].phase
        return phase if phase in _TERMINAL else None  # type: ignore[return-value]

    def _resolve(self, node: FlowNode) -> Target:
        try:
            target = self._host.resolve(node.target)
        except (UnknownBranch, TypeError) as exc:
            raise InvalidFlow(
                node.name, f"its target does not resolve: {exc}", flow=self.name
            ) from exc
        if self._waiter is not None and target is self._waiter:
            raise InvalidFlow(
                node.name,
                f"targets branch {target.name!r}, whose own turn is running the flow: the turn "
                "would wait on itself (start the flow outside that turn, or do that work inline)",
                flow=self.name,
            )
        return target

    def _register(self, node: FlowNode) -> _State:
        target = self._resolve(node)
        state = _State(node, target)
        state.account = _NodeAccount(self, state, self._account)
        state.branch_id = getattr(target, "id", None)
        state.label = target_label(target)
        state.task_name = f"flow {self._label} node {node.name}"
        for dependency in node.depends_on:
            upstream = self._states[dependency]
            upstream.dependents.append(state)
            if upstream.phase != "completed":
                state.waiting += 1
        self._states[node.name] = state
        self._nodes[node.name] = node
        return state

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
        [`Flow.add`][pride.flows.graph.Flow.add].

        The node may depend only on nodes the run already has (so a running
        flow never forms a cycle). It starts as soon as those completed (at
        once if it has none), and its signals and outcome are the run's like
        any other node's, with ``spawned_by`` naming the node whose work added
        it. The plan (the `Flow`) is not changed.

        Raises:
            InvalidFlow: the run has grown by ``max_spawn`` nodes already, the
                name is taken, a dependency is not a node of the run, or the
                target does not resolve.
            RuntimeError: the run has finished.
            TypeError, ValueError: as for ``Flow.add``.
        """
        if self._phase == "done":
            raise RuntimeError(f"flow {self._label!r} has finished; it cannot grow any more")
        spawner = _spawning_node(self)
        node = make_node(
            self._nodes,
            target,
            command,
            depends_on=depends_on,
            when=when,
            name=name,
            flow=self.name,
            spawned_by=spawner,
        )
        if self._spawned >= self._max_spawn:
            raise InvalidFlow(
                node.name,
                f"the flow has already grown by max_spawn={self._max_spawn} nodes "
                "(pass a larger max_spawn to session.flow)",
                flow=self.name,
            )
        for dependency in node.depends_on:
            if dependency not in self._states:
                raise InvalidFlow(
                    node.name,
                    f"depends on {dependency!r}, which is not a node of the running flow "
                    "(a node added while the flow runs depends only on nodes it already has)",
                    flow=self.name,
                )
        state = self._register(node)
        self._spawned += 1
        blocked = next(
            (
                upstream
                for dependency in node.depends_on
                if (upstream := self._states[dependency]).phase in _TERMINAL
                and upstream.phase != "completed"
            ),
            None,
        )
        if self._halt is not None:
            self._skip(state, self._halt)
        elif blocked is not None:
            self._skip(state, _blocked_reason(blocked))
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

        Cancellation: every running node is cancelled (its turn finalises
        with its own terminal signal, then ``NodeCancelled``), every other
        node is skipped (``NodeSkipped``), and ``Cancelled`` propagates.
        """
        if self._phase != "new":
            raise RuntimeError(f"flow run {self._label!r} has already been started")
        self._phase = "running"
        self._started_at = trio.current_time()
        self._account.begin(self._started_at)
        try:
            try:
                async with trio.open_nursery() as nursery:
                    self._node_tasks = await nursery.start(self._host_nodes)
                    await self._schedule()
                    self._finished.set()
            except BaseExceptionGroup as group:  # one exception for the caller, never a group
                raise _one_of(group) from None
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled):
                reason = self._halt or "the flow was cancelled"
            else:
                reason = f"the flow stopped on an error: {exc!r}"
            for state in self._states.values():
                if state.phase in ("pending", "ready"):
                    self._skip(state, reason)
            with trio.CancelScope(shield=True):
                await self._announce()
            raise
        finally:
            self._phase = "done"
            self._ended_at = trio.current_time()
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

    def _cancelled_from_outside(self) -> str:
        """A node saw the run's caller cancel it: nothing else starts, and every
        node still waiting is skipped for that reason."""
        reason = "the flow was cancelled"
        self._stop(reason, cancel=False)
        return self._halt or reason

    def _start_ready(self) -> None:
        nodes = self._node_tasks
        assert nodes is not None
        ready = self._ready
        while ready and self._active < self._max_concurrent:
            state = ready.popleft()
            if state.phase != "ready":
                continue
            if self._halt is None:
                spent = self._account.refusal("model", trio.current_time())
                if spent is not None:
                    self._stop(f"the {spent.scope} budget is spent ({spent})", cancel=False)
            if self._halt is not None:
                self._skip(state, self._halt)
                continue
            state.phase = "running"
            self._active += 1
            self._queue_send(state)
            nodes.start_soon(self._serve, state, name=state.task_name)

    async def _serve(self, state: _State) -> None:
        try:
            await self._execute(state)
        finally:
            self._leave_send_queue(state)
            self._active -= 1
            # Wake the scheduler only when it has something to do: a node to start
            # or skip, or the end (in a wide fan-in most endings change nothing).
            if self._ready or self._unannounced or not self._active:
                self._wake()

    # Nodes on one branch are sent in the order they started, whatever order trio
    # runs their tasks in (and however long their conditions and command functions
    # take): that order is the branch's mailbox order, so it must not be left to
    # chance. Nodes on different branches do not wait for each other.

    def _queue_send(self, state: _State) -> None:
        self._send_order.setdefault(id(state.target), collections.deque()).append(state)

    async def _wait_to_send(self, state: _State) -> None:
        queue = self._send_order[id(state.target)]
        while queue[0] is not state:
            state.send_turn = trio.Event()
            await state.send_turn.wait()
        await trio.lowlevel.checkpoint_if_cancelled()

    def _leave_send_queue(self, state: _State) -> None:
        key = id(state.target)
        queue = self._send_order.get(key)
        if queue is None or state not in queue:
            return
        first = queue[0] is state
        queue.remove(state)
        if not queue:
            del self._send_order[key]
        elif first and queue[0].send_turn is not None:
            queue[0].send_turn.set()

    async def _execute(self, state: _State) -> None:
        node = state.node
        command = node.command
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # cancelled already: it never starts
            if node.when is not None or node.late_bound:
                upstream = self._upstream(state)
                if node.when is not None and not await call_maybe_async(node.when, upstream):
                    await self._conclude(state, "skipped", reason="its condition (when) was false")
                    return
                if node.late_bound:
                    command = await call_maybe_async(node.command, upstream)  # type: ignore[arg-type]
                    if not isinstance(command, WorkCommand):
                        raise TypeError(
                            f"node {node.name!r}: its command function returned "
                            f"{type(command).__name__}, not a work command (Chat, Run, Call, ...)"
                        )
            await self._wait_to_send(state)
        except trio.Cancelled:
            reason = state.cancel_reason or self._cancelled_from_outside()
            await self._conclude_shielded(state, "skipped", reason=reason)
            raise
        except Exception as exc:
            await self._conclude(state, "failed", error=exc)
            return
        await self._send_and_wait(state, command)  # type: ignore[arg-type]

    async def _send_and_wait(self, state: _State, command: WorkCommand) -> None:
        state.started_at = trio.current_time()
        reply: Reply | None = None
        try:
            pending = self._dispatch(
                self._signal(NodeStarted, state, command=type(command).__name__)
            )
            if pending is not None:
                await self._drain(pending, "NodeStarted")
            if self._item_sink is not None and isinstance(command, STREAMING_COMMANDS):
                result = await self._stream_items(state, command)
            else:
                carried = carry(state.account)  # the envelope draws on the flow's allowance
                try:
                    reply = await send(state.target, command)
                finally:
                    uncarry(carried)
                    self._leave_send_queue(state)  # the branch's next node may be sent
                result = await reply.result()
        except trio.Cancelled:
            if reply is not None and not reply.done:
                reply.cancel("caller")
                with trio.move_on_after(CANCEL_GRACE) as bound:
                    bound.shield = True
                    await reply.wait_done()  # its turn ends with its own terminal first
                if bound.cancelled_caught:
                    log.error(
                        "flow %r: node %r's turn did not finalise within %ss",
                        self._label,
                        state.name,
                        CANCEL_GRACE,
                    )
            if reply is not None:
                state.turn_id = reply.turn_id
            reason = state.cancel_reason or self._cancelled_from_outside()
            await self._conclude_shielded(state, "cancelled", reason=reason)
            raise
        except TurnCancelled as exc:  # someone else cancelled its turn (a restart, a shutdown)
            if reply is not None:
                state.turn_id = reply.turn_id
            await self._conclude(
                state, "cancelled", error=exc, reason=f"its turn was cancelled ({exc.reason})"
            )
        except Exception as exc:
            if reply is not None:
                if not reply.done:  # refused before waiting (a deadlock found): drop it
                    reply.cancel("caller")
                state.turn_id = reply.turn_id
            await self._conclude(state, "failed", error=exc)
        else:
            if reply is not None:
                state.turn_id = reply.turn_id
            await self._conclude(state, "completed", result=result)

    async def _stream_items(self, state: _State, command: WorkCommand) -> list[Any]:
        """Run a streaming command through ``pride.stream``, handing each item on.

        The node's result is what ``ask`` would have returned: the items, less a
        ``Run``'s token chunks (its text arrives whole in its messages)."""
        sink = self._item_sink
        assert sink is not None
        collected: list[Any] = []
        carried = carry(state.account)  # the envelope draws on the flow's allowance
        try:
            async with stream(state.target, command) as items:
                self._leave_send_queue(state)  # the branch's next node may be sent
                try:
                    async for item in items:
                        collected.append(item)
                        await sink(state.name, item)
                finally:
                    state.turn_id = items.reply.turn_id if items.reply is not None else None
        finally:
            uncarry(carried)
        if isinstance(command, Run):
            return [item for item in collected if not isinstance(item, str)]
        return collected

    # ------------------------------------------------------------ outcomes

    def _upstream(self, state: _State) -> dict[str, Any]:
        """The results of every node ``state`` depends on, directly or not, by name
        (nearest first; all completed, or the node would not be starting)."""
        found: dict[str, Any] = {}
        stack = list(state.node.depends_on)
        while stack:
            name = stack.pop(0)
            if name in found:
                continue
            upstream = self._states[name]
            found[name] = upstream.result
            stack.extend(upstream.node.depends_on)
        return found

    async def _conclude(
        self,
        state: _State,
        outcome: Outcome,
        *,
        result: Any = None,
        error: BaseException | None = None,
        reason: str | None = None,
    ) -> None:
        state.phase = outcome
        state.result = result
        state.error = error
        state.ended_at = trio.current_time()
        if reason is None and error is not None:
            reason = f"{type(error).__name__}: {error}"
        state.reason = reason
        signal = self._terminal(state)
        pending = self._dispatch(signal)
        if pending is not None:
            await self._drain(pending, type(signal).__name__)
        self._settle(state)
        if outcome == "failed":
            if self._fail_fast:
                self._stop(f"fail_fast: node {state.name!r} failed", cancel=True)
            elif isinstance(error, BudgetExceeded) and error.scope not in ("turn", "command"):
                # A shared allowance (the flow's, a session's): no later node could work.
                self._stop(f"the {error.scope} budget is spent ({error})", cancel=False)

    async def _conclude_shielded(self, state: _State, outcome: Outcome, *, reason: str) -> None:
        with trio.CancelScope(shield=True):
            await self._conclude(state, outcome, reason=reason)

    def _settle(self, state: _State) -> None:
        """``state`` has ended: its dependents become ready, or are skipped."""
        for dependent in state.dependents:
            if dependent.phase != "pending":
                continue
            if state.phase == "completed":
                dependent.waiting -= 1
                if dependent.waiting == 0:
                    dependent.phase = "ready"
                    self._ready.append(dependent)
            else:
                self._skip(dependent, _blocked_reason(state))

    def _skip(self, state: _State, reason: str) -> None:
        """Skip a node that never started (its signal goes out with the next `_announce`)."""
        if state.phase in _TERMINAL or state.phase == "running":
            return
        state.phase = "skipped"
        state.reason = reason
        state.ended_at = trio.current_time()
        self._unannounced.append(state)
        self._settle(state)

    def _stop(self, reason: str, *, cancel: bool) -> None:
        """Start no more nodes (skip the waiting ones); with ``cancel``, cancel the running."""
        if self._halt is not None:
            return
        self._halt = reason
        for state in self._states.values():
            if state.phase in ("pending", "ready"):
                self._skip(state, reason)
            elif cancel and state.phase == "running":
                state.cancel_reason = reason
        if cancel and self._node_tasks is not None:
            self._node_tasks.cancel_scope.cancel()

    async def _announce(self) -> None:
        while self._unannounced:
            state = self._unannounced.pop(0)
            signal = self._terminal(state)
            pending = self._dispatch(signal)
            if pending is not None:
                await self._drain(pending, type(signal).__name__)

    # ------------------------------------------------------------- signals

    def _signal(self, kind: type[NodeSignal], state: _State, **fields: Any) -> Any:
        return kind(
            branch_id=state.branch_id,
            branch_name=state.label,
            flow_id=self.flow_id,
            flow_name=self.name,
            node=state.name,
            elapsed=trio.current_time() - self._started_at,
            depends_on=state.node.depends_on,
            spawned_by=state.node.spawned_by,
            **fields,
        )

    def _terminal(self, state: _State) -> NodeSignal:
        duration = self._duration(state)
        if state.phase == "completed":
            return self._signal(NodeCompleted, state, turn_id=state.turn_id, duration=duration)  # type: ignore[no-any-return]
        if state.phase == "failed":
            error = state.error
            return self._signal(  # type: ignore[no-any-return]
                NodeFailed,
                state,
                turn_id=state.turn_id,
                duration=duration,
                error_type=type(error).__name__ if error is not None else "",
                error_message=str(error) if error is not None else "",
            )
        if state.phase == "cancelled":
            return self._signal(  # type: ignore[no-any-return]
                NodeCancelled,
                state,
                turn_id=state.turn_id,
                duration=duration,
                reason=state.reason or "",
            )
        return self._signal(NodeSkipped, state, reason=state.reason or "")  # type: ignore[no-any-return]

    @staticmethod
    def _duration(state: _State) -> float:
        if state.started_at is None or state.ended_at is None:
            return 0.0
        return state.ended_at - state.started_at

    def _dispatch(self, signal: NodeSignal) -> Any:
        """Hand ``signal`` to the listeners (a stream) and the observer; return the
        observer's pending asynchronous work, or None (the common case)."""
        for listener in self._listeners:
            listener(signal)
        observer = self._host.observer
        return observer.dispatch(signal) if observer is not None else None

    @staticmethod
    async def _drain(pending: Any, kind: str) -> None:
        await await_bounded(pending, f"observers of {kind}", log)

    # -------------------------------------------------------------- result

    def result(self) -> FlowResult:
        """The [`FlowResult`][pride.FlowResult] of a finished run.

        Raises:
            RuntimeError: some node has no outcome yet.
        """
        outcomes: dict[str, NodeOutcome] = {}
        for name, state in self._states.items():
            if state.phase not in _TERMINAL:
                raise RuntimeError(f"flow {self._label!r}: node {name!r} has not finished")
            outcomes[name] = NodeOutcome(
                node=state.node,
                outcome=state.phase,  # type: ignore[arg-type]
                result=state.result,
                error=state.error,
                reason=state.reason,
                turn_id=state.turn_id,
                started=None if state.started_at is None else state.started_at - self._started_at,
                duration=self._duration(state),
                usage=state.account.usage() if state.account is not None else _NO_USAGE,
            )
        ended = self._ended_at if self._ended_at is not None else trio.current_time()
        return FlowResult(
            flow_id=self.flow_id,
            name=self.name,
            nodes=outcomes,
            elapsed=ended - self._started_at,
            usage=self._account.usage(),
        )


_NO_USAGE = Account(None, scope="none").usage()
_BLOCKED_VERBS = {"failed": "failed", "skipped": "was skipped", "cancelled": "was cancelled"}


def _blocked_reason(upstream: _State) -> str:
    return f"its dependency {upstream.name!r} {_BLOCKED_VERBS[upstream.phase]}"


def _one_of(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception a group from the run's nursery stands for: the first that is
    not ``Cancelled`` (the others are logged), else a ``Cancelled``."""
    leaves = exception_leaves(group)
    chosen = next((exc for exc in leaves if not isinstance(exc, trio.Cancelled)), leaves[0])
    for other in leaves:
        if other is not chosen and not isinstance(other, trio.Cancelled):
            log.error("flow: another error while running: %r", other, exc_info=other)
    return chosen


def current_flow() -> FlowRun | None:
    """The flow run whose node the calling work belongs to, or None.

    Inside a node's turn (its operation, its tools, a turn of another branch
    that node asked, in this process) this is the run, so the work can grow
    it: ``pride.current_flow().add(...)``. Outside any flow node: None.
    """
    account = carried_allowance()
    while account is not None:
        if isinstance(account, _NodeAccount) and account.run._phase != "done":
            return account.run
        account = account.parent
    return None


def _spawning_node(run: FlowRun) -> str | None:
    """The name of ``run``'s node whose work is calling, if any."""
    account = carried_allowance()
    while account is not None:
        if isinstance(account, _NodeAccount) and account.run is run:
            return account.state.name
        account = account.parent
    return None
