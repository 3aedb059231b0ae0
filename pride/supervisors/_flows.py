"""A session's flows: run a plan of work across its branches, and continue one a crash cut short.

The flow surface of [`Session`][pride.supervisors.session.Session]
(``flow``, ``flow_stream``, ``resume_flow``, ``unfinished_flows``,
``abandon_flow``), bound onto the class the way Branch binds its verbs: each
function here takes the session as its first argument. The algorithms are
`pride.flows`'; what a session adds is its name resolution, its observer and
its store, handed to a run as a `FlowHost`, and the resumed turns of flow
nodes its membership holds until ``resume_flow`` takes them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from ..errors import UnknownFlow
from ..flows import (
    DEFAULT_MAX_CONCURRENT,
    DEFAULT_MAX_SPAWN,
    Flow,
    FlowEvents,
    FlowHost,
    FlowResult,
    FlowRun,
    open_flow_stream,
)
from ..flows.journal import FlowJournal, UnfinishedFlow, summary
from ..flows.resume import resume_run
from ..messages import Budget

if TYPE_CHECKING:
    from ..store import BranchStore
    from ._membership import Membership
    from .observer import Observer

__all__ = [
    "FlowSession",
    "abandon_flow",
    "flow",
    "flow_stream",
    "resume_flow",
    "unfinished_flows",
]

log = logging.getLogger("pride.session")


class FlowSession(Protocol):
    """What the flow surface needs of a session (a [`Session`][pride.Session] is one)."""

    name: str

    @property
    def store(self) -> BranchStore | None: ...

    @property
    def observer(self) -> Observer: ...

    @property
    def _members(self) -> Membership: ...


async def flow(
    session: FlowSession,
    flow: Flow,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    budget: Budget | None = None,
    fail_fast: bool = False,
    *,
    max_spawn: int = DEFAULT_MAX_SPAWN,
) -> FlowResult:
    """Run ``flow``'s nodes as turns of this session's branches; return a
    [`FlowResult`][pride.FlowResult].

    A node starts when its dependencies have completed, at most
    ``max_concurrent`` at once; a node whose dependency did not complete
    is skipped, independent ones go on (``fail_fast``: the first failure
    cancels the running nodes and skips the rest). Node signals
    ([`NodeStarted`][pride.NodeStarted], ...) go to the observer. See
    docs/flows.md and `pride.flows.run`.

    Args:
        flow: the plan.
        max_concurrent: nodes running at once (>= 1).
        budget: one allowance for every node's turn (and the work those
            turns ask of other branches); the session's budget applies too.
        fail_fast: stop the flow at its first failed node.
        max_spawn: how many nodes the running flow may grow by
            ([`current_flow`][pride.current_flow]``().add(...)``).

    Raises:
        InvalidFlow: the flow cannot start (a cycle, a dependency on a
            missing node, a target this session cannot resolve); nothing ran.
        ValueError, TypeError: a bad option.
        RuntimeError: the session is not running.

    Cancellation: every running node's turn is cancelled and finalised
    (its terminal signal, then ``NodeCancelled``), the other nodes are
    skipped, and no node starts afterwards.
    """
    run = _flow_run(
        session,
        flow,
        max_concurrent=max_concurrent,
        budget=budget,
        fail_fast=fail_fast,
        max_spawn=max_spawn,
    )
    return await run.run()


@contextlib.asynccontextmanager
async def flow_stream(
    session: FlowSession,
    flow: Flow,
    max_concurrent: int = DEFAULT_MAX_CONCURRENT,
    budget: Budget | None = None,
    fail_fast: bool = False,
    *,
    max_spawn: int = DEFAULT_MAX_SPAWN,
    items: bool = False,
) -> AsyncIterator[FlowEvents]:
    """Run ``flow`` while the block iterates its events, as they happen.

    ``async with session.flow_stream(flow) as events: async for event in
    events: ...``; afterwards ``events.result`` is the
    [`FlowResult`][pride.FlowResult]. The events are the node signals (also
    sent to the observer) and, with ``items=True``, each streaming node's
    items as [`NodeItem`][pride.flows.NodeItem]s (nodes running ``Run`` or
    ``ReActStream``; their result is still what ``ask`` would return). Leaving
    the block early cancels the flow, as cancelling
    [`flow`][pride.supervisors.session.Session.flow] would. The other arguments
    and errors are [`flow`][pride.supervisors.session.Session.flow]'s;
    ``InvalidFlow`` is raised on entering, before anything runs.
    """
    run = _flow_run(
        session,
        flow,
        max_concurrent=max_concurrent,
        budget=budget,
        fail_fast=fail_fast,
        max_spawn=max_spawn,
        items=items,
    )
    async with open_flow_stream(run) as events:
        yield events


async def resume_flow(
    session: FlowSession,
    flow_id: UUID | str,
    flow: Flow | None = None,
    *,
    max_concurrent: int | None = None,
) -> FlowResult:
    """Continue a flow run a crash (or a cancellation) cut short; return its result.

    The run is the journaled one (same id, options, nodes): nodes that
    finished keep their outcome and result and are not run again; a node
    whose turn was interrupted waits for that turn, which its branch
    resumed from the turn journal when it was spawned; the rest run as in
    any flow. Spawn the flow's branches first. A late-bound command or a
    ``when`` is code the journal cannot hold: pass ``flow``, the same
    Flow rebuilt by the same code; it is checked against the journal.
    See docs/flows.md, "Resuming a flow".

    Args:
        flow_id: the run's id (``unfinished_flows()`` lists them; every
            node signal carries it).
        flow: the rebuilt plan, giving back its functions; None: the
            journal's own commands.
        max_concurrent: nodes running at once (default: as journaled).

    Raises:
        UnknownFlow: the store holds no unfinished flow with that id.
        InvalidFlow: ``flow`` differs from the journaled plan, or a node
            still to run needs a function and ``flow`` was not given.
        StoreError: the journal does not read back.
        RuntimeError: the session has no store, or is not running.
    """
    session._members.require_running()
    store = session.store
    if store is None:
        raise RuntimeError(
            f"session {session.name!r} has no store: only a flow run with one can be resumed"
        )
    key = str(flow_id)
    found = await store.unfinished_flows(str(UUID(key))) if _is_uuid(key) else []
    if not found:
        raise UnknownFlow(flow_id, f"the store {store.path}")
    run = resume_run(
        found[0],
        flow,
        _flow_host(session),
        store,
        session._members.flow_turns,
        max_concurrent=max_concurrent,
    )
    return await run.run()


async def abandon_flow(session: FlowSession, flow_id: UUID | str) -> None:
    """Forget a flow run the store's journal holds, without running it: it is
    no longer listed, and cannot be resumed. (Turns of its nodes a crash
    interrupted were resumed with their branches; they are not stopped.)

    Raises:
        UnknownFlow: the store holds no unfinished flow with that id.
        RuntimeError: the session has no store.
    """
    store = session.store
    if store is None:
        raise RuntimeError(f"session {session.name!r} has no store: it journals no flow")
    key = str(flow_id)
    found = await store.unfinished_flows(str(UUID(key))) if _is_uuid(key) else []
    if not found:
        raise UnknownFlow(flow_id, f"the store {store.path}")
    await FlowJournal(store, UUID(found[0].flow_id)).finish()
    log.info("flow %s abandoned: forgotten by the store's journal", found[0].flow_id)


async def unfinished_flows(session: FlowSession) -> list[UnfinishedFlow]:
    """The flow runs the store's journal holds, oldest first: cut short by a
    crash or a cancellation, to be continued with ``resume_flow`` (empty
    without a store). A run that does not read back is logged and left out."""
    store = session.store
    if store is None:
        return []
    found = [summary(stored) for stored in await store.unfinished_flows()]
    return [item for item in found if item is not None]


def _flow_run(
    session: FlowSession,
    flow: Flow,
    *,
    max_concurrent: int,
    budget: Budget | None,
    fail_fast: bool,
    max_spawn: int,
    items: bool = False,
) -> FlowRun:
    session._members.require_running()
    return FlowRun(
        flow,
        _flow_host(session),
        max_concurrent=max_concurrent,
        budget=budget,
        fail_fast=fail_fast,
        max_spawn=max_spawn,
        items=items,
    )


def _flow_host(session: FlowSession) -> FlowHost:
    return FlowHost(session.name, session._members.target, session.observer, session.store)


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
