"""A session's flows: run a plan of work across its branches, and continue one a crash cut short.

What the flow methods of [`Session`][pride.supervisors.session.Session]
(``flow``, ``flow_stream``, ``resume_flow``, ``unfinished_flows``,
``abandon_flow``) do: each function here takes the session as its first
argument, and the methods document the contract. The algorithms are
`pride.flows`'; what a session adds is its name resolution, its observer and
its store, handed to a run as a `FlowHost`, and the resumed turns of flow
nodes its membership holds until ``resume_flow`` takes them.
"""

from __future__ import annotations

import contextlib
import functools
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
    """[`Session.flow`][pride.supervisors.session.Session.flow]."""
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
    """[`Session.flow_stream`][pride.supervisors.session.Session.flow_stream]."""
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
    """[`Session.resume_flow`][pride.supervisors.session.Session.resume_flow]."""
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
    _refuse_running(session, found[0].flow_id)  # resumed beside itself: nodes sent twice
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
    """[`Session.abandon_flow`][pride.supervisors.session.Session.abandon_flow]."""
    store = session.store
    if store is None:
        raise RuntimeError(f"session {session.name!r} has no store: it journals no flow")
    key = str(flow_id)
    found = await store.unfinished_flows(str(UUID(key))) if _is_uuid(key) else []
    if not found:
        raise UnknownFlow(flow_id, f"the store {store.path}")
    _refuse_running(session, found[0].flow_id)  # its journal is still being written
    await FlowJournal(store, UUID(found[0].flow_id)).finish()
    log.info("flow %s abandoned: forgotten by the store's journal", found[0].flow_id)


async def unfinished_flows(session: FlowSession) -> list[UnfinishedFlow]:
    """[`Session.unfinished_flows`][pride.supervisors.session.Session.unfinished_flows]."""
    store = session.store
    if store is None:
        return []
    found = [summary(stored) for stored in await store.unfinished_flows()]
    running = session._members.flow_runs  # in the journal, but not cut short
    return [item for item in found if item is not None and item.flow_id not in running]


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
    # A node's send may come long after the flow resolved its target: a virtual
    # branch's name resolves to its address (a VirtualRef), which activates it again
    # if passivation stopped it meanwhile, not to the live branch, which stays closed.
    members = session._members
    return FlowHost(
        session.name,
        functools.partial(members.target, address=True),
        session.observer,
        session.store,
        members.flow_runs,
    )


def _refuse_running(session: FlowSession, flow_id: str) -> None:
    """RuntimeError if run ``flow_id`` is running in ``session``: journaled, but not cut short."""
    if UUID(flow_id) in session._members.flow_runs:
        raise RuntimeError(
            f"flow {flow_id} is running in session {session.name!r}: it was not cut short "
            "(resume_flow and abandon_flow take a run a crash or a cancellation cut short; "
            "wait for this one, or cancel its caller first)"
        )


def _is_uuid(text: str) -> bool:
    try:
        UUID(text)
    except ValueError:
        return False
    return True
