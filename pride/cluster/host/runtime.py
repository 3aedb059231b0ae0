"""The trio side of a host process: a Session serving the branches placed on it.

A host is one Ray actor process. Its Ray glue (`pride.cluster.host.actor`)
runs on Ray's asyncio loop and hands everything to this runtime, which runs
``trio.run`` in a thread of its own: it opens the host's durable store and
`Session`, replays the placements recorded in its directory
(`pride.cluster.host.placements`), and hands what callers send to
`pride.cluster.host.serving` (order, backpressure, cancellation, streams,
signals). What it sends back leaves through `pride.cluster.host.outbox`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import attrs
import trio

from ...branch import Branch
from ...durable import Durability
from ...errors import InvalidMessage, StoreLocked
from ...messages import BranchStopped
from ...supervisors import Session
from .calls import backlog
from .outbox import Outbound, Outbox
from .placements import MAX_SPAWN_TIMEOUT, SPAWN_TIMEOUT, Placements, build_branch
from .serving import Connections

__all__ = ["HostRuntime", "OpenCluster", "Outbound"]

log = logging.getLogger("pride.cluster")

STORE_OPEN_PATIENCE = 10.0
"""Seconds a restarted host retries opening its store (the old process may still hold it)."""
FACTORY_THREADS = 8
"""Factories running at once on a host, each in a worker thread of its own."""

OpenCluster = Callable[[dict[str, Any]], AbstractAsyncContextManager[object]]
"""How a host opens its own Cluster for its branches' tools, from its cluster
options, for its serving life (``host_cluster``): the caller's side hands it
over when it creates the host, so this side never imports that one."""


class HostRuntime:
    """The trio runtime of one host (see the module docstring).

    Args:
        name: the host's name.
        directory: where its store (``branches.db``) and placements live.
        outbound: where replies go (the glue's outboxes).
        session_options: keyword arguments for the host's Session.
        cluster_options: the namespace, storage and reconnect timeout of the
            host's own Cluster; with ``open_cluster``, the host opens one.
        open_cluster: how it opens it (None: the host has no Cluster of its own).
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        outbound: Outbound,
        session_options: dict[str, Any] | None = None,
        *,
        cluster_options: dict[str, Any] | None = None,
        open_cluster: OpenCluster | None = None,
    ) -> None:
        self.name = name
        self.cluster_options = cluster_options
        self.open_cluster = open_cluster
        self.directory = directory
        self.outbound = outbound
        self.session_options = dict(session_options or {})
        self.session: Session | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop = trio.Event()
        self.outbox = Outbox(outbound, name, backlog)
        self.restored: list[str] = []
        self.placements = Placements(directory / "placements.json")
        self.connections = Connections(self)
        # Placements under way, by branch name: one at a time per name (see `_place`).
        self._placing: dict[str, trio.Event] = {}
        # Factories run in threads of their own limiter: one that never returns holds
        # one of these, never a thread the store or the placements file waits for.
        self._factories = trio.CapacityLimiter(FACTORY_THREADS)

    # ------------------------------------------------------------ lifecycle

    async def main(
        self,
        ready: Callable[[HostRuntime], None],
        turn_notes: Callable[[list[tuple[str, str]]], None] | None = None,
    ) -> None:
        """Serve until `stop`; call ``ready(self)`` once restored and serving."""
        self.token = trio.lowlevel.current_trio_token()
        self.outbox.turn_notes = turn_notes
        async with trio.open_nursery() as nursery, self._cluster():
            self._nursery = nursery
            nursery.start_soon(self.outbox.run)
            session = await self._open_session()
            async with session:
                self.session = session
                session.observe(BranchStopped, handler=self.connections.on_stopped)
                for spec in self.placements.load():
                    await self._place(spec, record=False)
                    self.restored.append(spec["name"])
                ready(self)
                await self._stop.wait()
            self.session = None
            with trio.CancelScope(shield=True):
                await self._store.aclose()  # the session was handed it: closing it is ours
            nursery.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _cluster(self) -> AsyncIterator[None]:
        """The host's own Cluster (for its branches' tools, see ``host_cluster``)."""
        options, open_cluster = self.cluster_options, self.open_cluster
        if options is None or "namespace" not in options or open_cluster is None:
            yield
            return
        async with open_cluster(options):
            yield

    async def _open_session(self) -> Session:
        from ...store import BranchStore

        path = self.directory / "branches.db"
        deadline = trio.current_time() + STORE_OPEN_PATIENCE
        while True:
            store = BranchStore(path)
            try:
                await store.open()
            except StoreLocked:
                # A restarted host: the process it replaces may still hold the store.
                if trio.current_time() > deadline:
                    raise
                await trio.sleep(0.2)
                continue
            break
        options = _abandoning(self.session_options)
        session = Session(name=f"host:{self.name}", store=store, **options)
        self._store = store
        return session

    def start_soon(self, function: Callable[[], Any]) -> None:
        """Run ``function()`` as a task of the host's nursery (from the trio thread)."""
        assert self._nursery is not None
        self._nursery.start_soon(function)

    def stop(self) -> None:
        """Ask `main` to stop the session and return (thread-safe through the token)."""
        self._stop.set()

    # ------------------------------------------------------------ placement

    async def place(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Build a branch with its factory and spawn it; return its description."""
        return await self._place(spec, record=True)

    async def _place(self, spec: dict[str, Any], *, record: bool) -> dict[str, Any]:
        """Place ``spec`` (or find it placed before); its branch's description.

        Placements of one name are made one at a time: a second placement of a
        name (another process spawning it at the same moment) waits for the
        first, then finds it placed, the same branch, or is refused if its
        factory or arguments differ.

        Raises:
            ValueError: a branch of that name was placed with another factory
                or other arguments (or, as `build_branch` raises).
            TimeoutError: the factory did not return within the placement's timeout.
            Exception: whatever `build_branch` or the session's spawn raise.
        """
        session = self.session
        assert session is not None
        name = spec["name"]
        if not isinstance(name, str):
            raise InvalidMessage([("placement.name", "expected a branch name")])
        while (placing := self._placing.get(name)) is not None:
            await placing.wait()
        placed = self._placing[name] = trio.Event()
        try:
            if record and self.placements.placed_before(spec, self.name):
                # Placed before (by an earlier run of the caller, or by another
                # caller a moment ago): the same branch, kept.
                return self.describe(session.get_branch(name))
            branch = await self._build(spec)
            await session.spawn(branch, restart=spec.get("restart", "permanent"))
            if record:
                await trio.to_thread.run_sync(self.placements.add, spec)
            return self.describe(branch)
        finally:
            del self._placing[name]
            placed.set()

    async def _build(self, spec: dict[str, Any]) -> Branch:
        """The placement's branch, made by its factory in a worker thread, so the host
        serves its other branches meanwhile; bounded by the spec's ``timeout``.

        Raises:
            InvalidMessage: the spec's timeout is not a positive number of seconds.
            TimeoutError: the factory did not return in time (it is left to finish
                in its thread; what it makes then is dropped).
            Exception: as `build_branch`.
        """
        timeout = spec.get("timeout", SPAWN_TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_SPAWN_TIMEOUT
        ):
            raise InvalidMessage(
                [("placement.timeout", f"expected seconds in (0, {MAX_SPAWN_TIMEOUT:g}]")]
            )
        with trio.move_on_after(timeout) as bound:
            return await trio.to_thread.run_sync(
                build_branch, spec, abandon_on_cancel=True, limiter=self._factories
            )
        assert bound.cancelled_caught
        raise TimeoutError(
            f"factory {spec['factory']!r} did not return within {timeout:g} s on host "
            f"{self.name!r} (a factory should build the branch and return: connect, load "
            "or warm up in the branch's first turn, or give Cluster(spawn_timeout=) more)"
        )

    def describe(self, branch: Branch) -> dict[str, Any]:
        return {"name": branch.name, "id": branch.id_str, "capacity": branch.mailbox_size}

    def branches(self) -> list[dict[str, Any]]:
        session = self.session
        return [] if session is None else [self.describe(b) for b in session.branches]

    # ------------------------------------------------------------ connections

    @property
    def nursery(self) -> trio.Nursery:
        """The host's nursery (tasks that serve callers run in it)."""
        assert self._nursery is not None
        return self._nursery

    def on_batch(self, conn_id: str, seq: int, items: list[dict[str, Any]], seen: set[str]) -> None:
        """Take one batch from a connection (in the trio thread; see `Connections.on_batch`)."""
        self.connections.on_batch(conn_id, seq, items, seen)

    def forget(self, conn_id: str) -> None:
        """A connection is gone: cancel what it still has running."""
        self.connections.forget(conn_id)


def _abandoning(session_options: dict[str, Any]) -> dict[str, Any]:
    """The host session's options, its durability set to abandon interrupted turns.

    Every turn on a host was sent by a caller in another process, and when the
    host dies that caller is answered `HostLost` and told to send again (its
    journalled turn was not committed). A restarted host that resumed the turn
    would run it a second time beside the caller's resend, so the turns a death
    interrupted are abandoned (`TurnAbandoned`, nothing recorded), whatever the
    options say; turns suspended for approval are kept, as their callers were
    answered `ApprovalRequired`.
    """
    durability = session_options.get("durability") or Durability()
    if durability.resume != "abandon":
        if "durability" in session_options:
            log.info(
                "host sessions abandon the turns a host's death interrupted (their callers "
                "were answered HostLost): Durability(resume=%r) is not applied",
                durability.resume,
            )
        durability = attrs.evolve(durability, resume="abandon")
    return {**session_options, "durability": durability}
