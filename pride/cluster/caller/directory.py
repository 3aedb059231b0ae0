"""The hosts a Cluster talks to, and which host serves which branch name.

Per host, this process keeps one `Link` (`pride.cluster.caller.link`), made on
first use: the host's Ray actor is found by name in the cluster's namespace,
or created (`pride.cluster.caller.hosts`) when placing a branch there. Per branch
name, it keeps the ref this process knows it by: the branch it placed, or
the one a host said it serves when a ref was resolved (`resolve` asks every
host of the namespace). The same name on two hosts is two branches; by name
alone, the first this process placed wins.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

import attrs
import trio

from ...errors import BranchNotRunning, HostLost, UnknownBranch
from ...messages import Signal
from ..wire.encoding import loads
from .answers import described_branches
from .driver import import_ray, wait_ref
from .hosts import create_host, find_host, is_ray_loss, list_hosts
from .link import Link
from .ref import RefCluster, RemoteBranchRef

if TYPE_CHECKING:
    from ..host.runtime import OpenCluster

__all__ = ["Directory", "HostOptions"]

log = logging.getLogger("pride.cluster")

STOP_UNUSED_GRACE = 10.0
"""Seconds a spawn that made a host as its Cluster closed waits for Ray to end it."""


@attrs.frozen
class HostOptions:
    """How this process creates hosts (the Cluster's arguments, see `Cluster`)."""

    namespace: str
    restarts: int
    reconnect_timeout: float
    cpus: float
    detached: bool  # the hosts outlive this process (``stop_hosts=False``)
    runtime_env: dict[str, Any] | None
    session: dict[str, Any]
    open_cluster: OpenCluster | None  # how a created host opens its own (``host_cluster``)


class Directory:
    """The links of one Cluster and the branch names they serve (see the module docstring).

    `open` it with the Cluster's storage and nursery before use.
    """

    def __init__(
        self,
        cluster: RefCluster,
        options: HostOptions,
        *,
        on_signal: Callable[[Link, Signal], None],
        on_crash: Callable[[str, str, str], None],
    ) -> None:
        self._cluster = cluster
        self.options = options
        self._on_signal = on_signal
        self._on_crash = on_crash
        self.links: dict[str, Link] = {}
        self.handles: dict[str, Any] = {}
        self.owned: list[str] = []  # hosts this process created and stops when it closes
        self.names: dict[str, RemoteBranchRef] = {}
        self.watching = False  # every link asks its host for signals
        self._lock = trio.Lock()
        self._storage: Path | None = None
        self._nursery: trio.Nursery | None = None
        self._closed = False

    def open(self, storage: Path, nursery: trio.Nursery) -> None:
        """Start serving: hosts created from now on use ``storage``; links run in ``nursery``."""
        self._storage, self._nursery = storage, nursery

    def close(self) -> None:
        """Stop serving: close every link (what they carry fails with `HostLost`), and
        make no link from now on (`link` raises `HostLost`)."""
        self._nursery = None
        self._closed = True
        for link in self.links.values():
            link.close()

    # ------------------------------------------------------------ names

    def remember(self, ref: RemoteBranchRef) -> None:
        """``ref`` was placed by this process: its name resolves to it, unless the name
        is already known on another host (a name on two hosts: by name, the first)."""
        known = self.names.get(ref.name)
        if known is None or known.host == ref.host:
            self.names[ref.name] = ref

    def owner(self, name: str) -> str | None:
        """The host this process knows serves ``name``, if any."""
        known = self.names.get(name)
        return known.host if known is not None else None

    async def resolve(self, ref: RemoteBranchRef) -> None:
        """Fill in ``ref``'s host, id and capacity (asking the hosts if need be).

        Raises:
            UnknownBranch: no host of the namespace serves a branch of that name.
        """
        known = self.names.get(ref.name)
        if known is not None:
            ref.host, ref._id, ref.capacity = known.host, known._id, known.capacity
            return
        namespace = self.options.namespace
        hosts = await trio.to_thread.run_sync(list_hosts, namespace)
        for host in hosts:
            link = await self.link(host, create=False)
            if link.state == "connecting":  # a host this process meets for the first time
                with contextlib.suppress(HostLost):
                    await link.wait_up(ref.name)
            if link.state != "up":
                continue
            try:
                info = loads(await wait_ref(link.handle.hello.remote()), "hello")
            except Exception as exc:
                if is_ray_loss(exc):
                    continue
                raise
            for described in described_branches(info, host):
                found = RemoteBranchRef(
                    self._cluster,
                    described["name"],
                    host,
                    UUID(described["id"]),
                    described["capacity"],
                )
                self.names.setdefault(found.name, found)
                link.know_room(found.name, described["capacity"])
            if ref.name in self.names:
                known = self.names[ref.name]
                ref.host, ref._id, ref.capacity = known.host, known._id, known.capacity
                return
        raise UnknownBranch(ref.name, f"the hosts of namespace {namespace!r}")

    # ------------------------------------------------------------ links

    async def link_for(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, once it is up (resolving ``ref`` first if need be).

        Raises:
            UnknownBranch: no host serves it.
            HostLost: its host is gone, or not back within ``reconnect_timeout``.
        """
        link = self.ready_link(ref)
        if link is not None:
            return link
        if ref.host is None:
            await self.resolve(ref)
        assert ref.host is not None
        if ref._id is None and ref.name in self.names:
            known = self.names[ref.name]
            ref._id, ref.capacity = known._id, known.capacity
        link = await self.link(ref.host, create=False)
        await link.wait_up(ref.name)
        return link

    def ready_link(self, ref: RemoteBranchRef) -> Link | None:
        """The link to ``ref``'s host if ``ref`` is resolved and the link up (the
        common case, answered without a coroutine), else None."""
        link = self.links.get(ref.host) if ref.host is not None else None
        if link is not None and link.state == "up" and ref._id is not None:
            return link
        return None

    def known_link(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, without waiting.

        Raises:
            UnknownBranch: this process does not know the host yet.
        """
        host = ref.host or self.owner(ref.name)
        link = self.links.get(host) if host is not None else None
        if link is None:
            raise UnknownBranch(
                ref.name, "this process (await a send or `cluster.lookup(name)` first)"
            )
        return link

    async def link(
        self, host: str, *, create: bool, resources: dict[str, float] | None = None
    ) -> Link:
        """The link to ``host`` (made, and the host created, on first use); it may
        still be connecting: ``await link.wait_up(...)`` before sending.

        Raises:
            UnknownBranch: there is no such host and ``create`` is false.
            BranchNotRunning: the Cluster was never opened.
            HostLost: the Cluster is closed.
        """
        link = self.links.get(host)
        if link is not None:
            return link
        nursery = self._serving(host)
        async with self._lock:
            link = self.links.get(host)
            if link is not None:
                return link
            handle, created = await trio.to_thread.run_sync(self._handle, host, create, resources)
            if self._closed and created and not self.options.detached:
                # The Cluster closed while the host was being made, after it stopped
                # the hosts it knew of: this one would serve on with nobody to use it.
                await _stop_unused(host, handle)
            nursery = self._serving(host)  # the Cluster may have closed meanwhile
            self.handles[host] = handle
            if created and not self.options.detached:
                self.owned.append(host)
            link = Link(
                host,
                handle,
                reconnect_timeout=self.options.reconnect_timeout,
                on_signal=self._on_signal,
                spawn=nursery.start_soon,
                on_crash=self._on_crash,
            )
            link.watching = self.watching
            self.links[host] = link
        # Connecting waits for the host process to start (seconds): outside the lock,
        # so that hosts placed at the same time start at the same time.
        nursery.start_soon(link.run)
        return link

    def _serving(self, host: str) -> trio.Nursery:
        """The nursery links run in.

        Raises:
            BranchNotRunning: the Cluster was never opened.
            HostLost: the Cluster is closed (as every link it had is).
        """
        if self._closed:
            raise HostLost("*", host, "this Cluster is closed")
        if self._nursery is None:
            raise BranchNotRunning(f"cluster {self.options.namespace!r}")
        return self._nursery

    def watch(self) -> None:
        """Ask every host, now and from now on, for the signals of its branches."""
        if self.watching:
            return
        self.watching = True
        for link in self.links.values():
            link.watch()

    def _handle(
        self, host: str, create: bool, resources: dict[str, float] | None
    ) -> tuple[Any, bool]:
        """The Ray handle of ``host``, and whether it was created (in a worker thread)."""
        options = self.options
        found = find_host(options.namespace, host)
        if found is not None:
            return found, False
        if not create:
            raise UnknownBranch(host, f"the hosts of namespace {options.namespace!r}")
        assert self._storage is not None  # set by open
        handle = create_host(
            host,
            namespace=options.namespace,
            storage=self._storage,
            restarts=options.restarts,
            cpus=options.cpus,
            detached=options.detached,
            runtime_env=options.runtime_env,
            resources=resources,
            session_options=options.session,
            reconnect_timeout=options.reconnect_timeout,
            open_cluster=options.open_cluster,
        )
        return handle, True


async def _stop_unused(host: str, handle: Any) -> None:
    """End a host process nothing has used yet (no session to let finish), shielded
    and bounded by `STOP_UNUSED_GRACE`: the caller is on its way out with `HostLost`
    and may itself be cancelled."""
    ray = import_ray()
    with trio.CancelScope(shield=True), trio.move_on_after(STOP_UNUSED_GRACE) as bound:
        try:
            await trio.to_thread.run_sync(
                lambda: ray.kill(handle, no_restart=True), abandon_on_cancel=True
            )
        except Exception:
            log.exception("host %r, made as its Cluster closed, could not be stopped", host)
    if bound.cancelled_caught:
        log.error(
            "host %r, made as its Cluster closed, was not stopped within %s s",
            host,
            STOP_UNUSED_GRACE,
        )
