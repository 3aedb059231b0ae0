"""Running one node: its condition, its late-bound command, its place in its
branch's send order, and its turn, to exactly one outcome.

A node is a command sent to a branch with the public send API, so it runs
as one ordinary turn of that branch. What this module adds is the node's
side of it:

* the condition (``when``) and a late-bound command are evaluated from the
  upstream results when the node starts; either raising fails the node, and
  a command function returning anything but a work command fails it with a
  ``TypeError`` naming the node;
* nodes on one branch are sent in the order they started, whatever order
  trio runs their tasks in and however long their conditions and command
  functions take (`SendOrder`): that order is the branch's mailbox order,
  so it is not left to chance. Nodes on different branches never wait for
  each other;
* the envelope carries the node's account (the flow's allowance) and a tag
  naming the node (`pride.flows.journal.node_tag`), so a turn resumed from
  the turn journal after a crash can be matched back to its node; in a
  durable run it also carries a commit rider
  (`pride.flows.journal.FlowJournal.rider`), which journals the node's
  outcome in its turn's own commit;
* cancellation: a running node's turn is cancelled and allowed to finalise
  (bounded) before the node ends as cancelled, so its terminal signal comes
  before ``NodeCancelled``.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import trio

from ..actors import Reply, send, stream
from ..actors.riders import riding
from ..actors.turn import FINALIZE_GRACE
from ..budget.allowance import carry, uncarry
from ..errors import TurnCancelled
from ..messages import ReActStream, ReasoningDelta, Run, WorkCommand
from .graph import Outcome, call_maybe_async
from .journal import WHEN_FALSE, FlowJournal
from .signals import SignalOut
from .state import NodeState, turn_outcome

__all__ = [
    "CANCEL_GRACE",
    "STREAMING_COMMANDS",
    "NodeRun",
    "SendOrder",
    "UpstreamResults",
    "execute",
    "upstream_results",
]

log = logging.getLogger("pride.flows")

# How long a cancelled node waits for its turn to finalise (the turn's own
# finalisation is bounded by FINALIZE_GRACE; this adds room for its cancellation).
CANCEL_GRACE = 2 * FINALIZE_GRACE

# The item kinds whose turns stream (``pride.stream``) when a stream asks for items.
STREAMING_COMMANDS = (Run, ReActStream)


class NodeRun(Protocol):
    """What a node's run needs of its flow run (a `FlowRun`): its signals, journal
    and send order, the upstream results, and the outcome's recording."""

    label: str
    states: dict[str, NodeState]
    signals: SignalOut
    journal: FlowJournal | None
    send_order: SendOrder
    item_sink: Callable[[str, Any], Any] | None

    def node_tag(self, state: NodeState) -> str | None:
        """The tag of ``state``'s envelope (a durable run only)."""
        ...

    def cancelled_from_outside(self) -> str:
        """A node saw the run's caller cancel it; the reason."""
        ...

    async def conclude(
        self,
        state: NodeState,
        outcome: Outcome,
        *,
        result: Any = None,
        error: BaseException | None = None,
        reason: str | None = None,
    ) -> None:
        """``state``'s node ended: record it, signal it, settle its dependents."""
        ...


def upstream_results(states: Mapping[str, NodeState], state: NodeState) -> UpstreamResults:
    """The results of every node ``state`` depends on, directly or not, by name
    (nearest first; all completed, or the node would not be starting), as a
    read-only `UpstreamResults` view."""
    return UpstreamResults(states, state.node.depends_on)


class UpstreamResults(Mapping[str, Any]):
    """What a late-bound command or a condition is handed: a read-only mapping
    from the name of every node above one node (directly or not) to its result,
    nearest first (breadth-first from the node's own dependencies).

    A view, not a copy: it walks the graph only as far as a look-up needs and
    remembers what it found, so reading a direct dependency costs the same at
    any depth, and a chain of n late-bound nodes costs O(n), not the O(n²) of
    handing each node a dict of everything above it. Iterating it, its
    ``len``, or looking up a node of the run that is not above it walks every
    node above once. The results it shows are final
    (every node above has completed before the node starts); ``dict(up)`` is
    a copy to change or to serialise.
    """

    __slots__ = ("_found", "_pending", "_states")

    def __init__(self, states: Mapping[str, NodeState], depends_on: Iterable[str]) -> None:
        self._states = states
        self._found: dict[str, Any] = {}  # walked so far, in walk order
        self._pending: collections.deque[str] | None = collections.deque(depends_on)

    def _walk(self, wanted: str | None) -> None:
        """Walk on until ``wanted`` is found (None: to the end)."""
        pending = self._pending
        found = self._found
        while pending:
            name = pending.popleft()
            if name in found:
                continue
            upstream = self._states[name]
            found[name] = upstream.result
            pending.extend(upstream.node.depends_on)
            if name == wanted:
                return
        self._pending = None  # walked it all: let go of the queue

    def __getitem__(self, name: str) -> Any:
        found = self._found
        # A name the run has no node for is no node above: no walk to find that out.
        if name not in found and self._pending is not None and name in self._states:
            self._walk(name)
        return found[name]

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        if self._pending is not None:
            self._walk(None)
        return iter(self._found)

    def __len__(self) -> int:
        if self._pending is not None:
            self._walk(None)
        return len(self._found)

    def __repr__(self) -> str:
        return f"UpstreamResults({dict(self)!r})"


class SendOrder:
    """Per target, the nodes started on it and not sent yet, in start order.

    Targets are told apart by their equality (a branch by identity): two
    `VirtualRef`s of one name, which one flow's nodes hold when they name a
    virtual branch, are one branch and one send order.

    Each operation is O(1) amortised, however many nodes wait on one target (a
    fan-out of 10,000 nodes on one branch with no ``max_concurrent`` bound): a
    node that leaves is only marked (``NodeState.in_send_order``) and dropped
    once it reaches the front, instead of being searched for in the queue.
    The front of a queue is always a node still in it.
    """

    __slots__ = ("_queues",)

    def __init__(self) -> None:
        self._queues: dict[Any, collections.deque[NodeState]] = {}

    def join(self, state: NodeState) -> None:
        """``state`` has started: it is sent after the nodes that started before it."""
        state.in_send_order = True
        self._queues.setdefault(_key(state.target), collections.deque()).append(state)

    async def wait_turn(self, state: NodeState) -> None:
        """Return once every node that started before ``state`` on its target was sent."""
        queue = self._queues[_key(state.target)]
        while queue[0] is not state:
            state.send_turn = trio.Event()
            await state.send_turn.wait()
        await trio.lowlevel.checkpoint_if_cancelled()

    def leave(self, state: NodeState) -> None:
        """``state`` was sent (or ended): the next node on its target may be sent.
        A second call for one node does nothing."""
        if not state.in_send_order:
            return
        state.in_send_order = False
        key = _key(state.target)
        queue = self._queues[key]
        if queue[0] is not state:
            return  # it leaves from the middle: dropped once the nodes before it have left
        while queue and not queue[0].in_send_order:
            queue.popleft()
        if not queue:
            del self._queues[key]
        elif queue[0].send_turn is not None:
            queue[0].send_turn.set()


def _key(target: Any) -> Any:
    """What tells ``target`` apart in a `SendOrder`: itself, or its identity if unhashable."""
    try:
        hash(target)
    except TypeError:
        return id(target)
    return target


async def execute(run: NodeRun, state: NodeState) -> None:
    """Run ``state``'s node to its outcome (concluded on ``run``).

    Cancellation: a node cancelled before it was sent is skipped; one whose
    turn runs is cancelled (see the module docstring); ``Cancelled`` propagates.
    """
    node = state.node
    command = node.command
    try:
        await trio.lowlevel.checkpoint_if_cancelled()  # cancelled already: it never starts
        if state.resumed is None and (node.when is not None or node.late_bound):
            upstream = upstream_results(run.states, state)
            if node.when is not None:
                verdict = await call_maybe_async(node.when, upstream)
                if not isinstance(verdict, bool):  # a predicate that forgot its return
                    raise TypeError(
                        f"node {node.name!r}: its condition (when) returned "
                        f"{type(verdict).__name__}, not a bool"
                    )
                if not verdict:
                    await run.conclude(state, "skipped", reason=WHEN_FALSE)
                    return
            if node.late_bound:
                command = await call_maybe_async(node.command, upstream)  # type: ignore[arg-type]
                if not isinstance(command, WorkCommand):
                    raise TypeError(
                        f"node {node.name!r}: its command function returned "
                        f"{type(command).__name__}, not a work command (Chat, Run, Call, ...)"
                    )
        await run.send_order.wait_turn(state)
    except trio.Cancelled:
        reason = state.cancel_reason or run.cancelled_from_outside()
        with trio.CancelScope(shield=True):
            await run.conclude(state, "skipped", reason=reason)
        raise
    except Exception as exc:
        await run.conclude(state, "failed", error=exc)
        return
    await _send_and_wait(run, state, command)  # type: ignore[arg-type]


async def _send_and_wait(run: NodeRun, state: NodeState, command: WorkCommand) -> None:
    state.started_at = trio.current_time()
    reply: Reply | None = state.resumed
    try:
        kind = "Resume" if reply is not None else type(command).__name__
        await run.signals.started(state, kind)
        if reply is not None:  # its turn was resumed from the turn journal: no new send
            run.send_order.leave(state)
            result = await reply.result()
        elif run.item_sink is not None and isinstance(command, STREAMING_COMMANDS):
            result = await _stream_items(run, state, command)
        else:
            carried = carry(state.account)  # the envelope draws on the flow's allowance
            try:
                if run.journal is None:
                    reply = await send(state.target, command, tag=run.node_tag(state))
                else:  # the outcome is journaled in the turn's own commit
                    with riding(run.journal.rider(state)):
                        reply = await send(state.target, command, tag=run.node_tag(state))
            finally:
                uncarry(carried)
                run.send_order.leave(state)  # the branch's next node may be sent
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
                    run.label,
                    state.name,
                    CANCEL_GRACE,
                )
        if reply is not None:
            state.turn_id = reply.turn_id
        reason = state.cancel_reason or run.cancelled_from_outside()
        own = _own_outcome(reply)
        with trio.CancelScope(shield=True):
            if own is None:
                await run.conclude(state, "cancelled", reason=reason)
            else:  # its turn ended on its own first: that is the node's outcome
                ended, result, error, why = own
                await run.conclude(state, ended, result=result, error=error, reason=why)
        raise
    except Exception as exc:  # failed, or someone else cancelled its turn (a restart, a shutdown)
        if reply is not None:
            if not reply.done:  # refused before waiting (a deadlock found): drop it
                reply.cancel("caller")
            state.turn_id = reply.turn_id
        ended, _, error, why = turn_outcome(None, exc)
        await run.conclude(state, ended, error=error, reason=why)
    else:
        if reply is not None:
            state.turn_id = reply.turn_id
        await run.conclude(state, "completed", result=result)


def _own_outcome(
    reply: Reply | None,
) -> tuple[Outcome, Any, BaseException | None, str | None] | None:
    """The outcome of a cancelled node's turn that ended of its own accord, or None.

    The caller's cancellation races the turn's end: a turn past its commit when
    ``reply.cancel`` reached it still ends with its result (or its own error),
    and its commit rider journaled that (`pride.flows.journal.FlowJournal.rider`).
    The node then ends as its turn did, the outcome its rider journaled
    (`turn_outcome`), not ``cancelled``. None when there is no turn, it has not
    finished (past ``CANCEL_GRACE``), or the flow's own cancel ended it.
    """
    if reply is None or not reply.done:
        return None
    try:
        result = reply.take_result()
    except TurnCancelled as exc:
        if exc.reason == "caller":
            return None  # the flow's cancel: not an outcome of the node's own
        return turn_outcome(None, exc)
    except Exception as exc:
        return turn_outcome(None, exc)
    return turn_outcome(result, None)


async def _stream_items(run: NodeRun, state: NodeState, command: WorkCommand) -> list[Any]:
    """Run a streaming command through ``pride.stream``, handing each item on.

    The node's result is what ``ask`` would have returned: the items, less a
    ``Run``'s token chunks (its text arrives whole in its messages)."""
    sink = run.item_sink
    assert sink is not None
    collected: list[Any] = []
    carried = carry(state.account)  # the envelope draws on the flow's allowance
    try:
        async with stream(state.target, command, tag=run.node_tag(state)) as items:
            run.send_order.leave(state)  # the branch's next node may be sent
            try:
                async for item in items:
                    collected.append(item)
                    await sink(state.name, item)
            finally:
                state.turn_id = items.reply.turn_id if items.reply is not None else None
    finally:
        uncarry(carried)
    if isinstance(command, Run):
        # What ask returns: the messages, without the chunks of text or reasoning.
        return [item for item in collected if not isinstance(item, str | ReasoningDelta)]
    return collected
