"""Cluster and RemoteBranchRef: branches hosted by other processes, on Ray.

```python
async with Cluster() as cluster:               # a local Ray cluster, or address=...
    ref = await cluster.spawn("myapp.team:make_researcher", name="researcher")
    answer = await pride.ask(ref, Chat("what do the notes say?"))
```

A **host** is a Ray actor process running a pride Session with a durable
store; ``spawn`` places a branch on one (``host=`` names it; it is created on
first use) by calling an importable factory *on the host*, so tools and
models are built there and never pickled. The `RemoteBranchRef` it
returns is a target for ``pride.send``, ``send_nowait``, ``ask`` and
``stream`` like a local branch. ``cluster.ref(name)`` gives the ref of a
branch any process placed, from any process attached to the same cluster.

Failure semantics (see docs/cluster.md): a host that dies fails every call
waiting on it with `HostLost` within about a second; Ray
restarts the process (``host_restarts`` times), the host reloads its branches
from its store, and sends made meanwhile wait for it (up to
``reconnect_timeout``). Ray never retries a delivery, and every envelope id
is journalled by its host before it can run, so no turn runs twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Self
from uuid import UUID

import trio

from ...actors.nursery import leave_unwrapped
from ...errors import HostLost, InvalidMessage
from ...messages import Signal
from ...supervisors import Observer, Session
from ...supervisors.strategy import RestartType, check_restart_type
from ..host.placements import MAX_SPAWN_TIMEOUT, SPAWN_TIMEOUT
from ..wire.encoding import decode_error, dumps, loads
from ..wire.storage import new_storage, remove_storage
from .answers import described_branches
from .directory import Directory, HostOptions
from .driver import RayConnection, wait_ref
from .hosts import default_runtime_env, is_ray_loss, placement, shutdown_host
from .link import Link
from .ref import RemoteBranchRef
from .signals import SignalRoute
from .supervision import RemoteChild, report_crash

__all__ = ["DEFAULT_HOST", "DEFAULT_STREAM_WINDOW", "Cluster", "host_cluster", "hosting_cluster"]

log = logging.getLogger("pride.cluster")

DEFAULT_HOST = "default"
"""The host ``spawn`` places a branch on when no ``host=`` is given."""
DEFAULT_STREAM_WINDOW = 16
"""Items a remote stream's turn may run ahead of the caller's consumption."""
SHUTDOWN_GRACE = 30.0
"""Seconds a host this cluster created gets to stop its session when the cluster closes."""

_HOST_CLUSTER: Cluster | None = None


def host_cluster() -> Cluster | None:
    """The cluster of the host process this code runs in, or None outside a host.

    A branch's tools use it to reach branches on other hosts:

    ```python
    cluster = host_cluster()
    answer = await pride.ask(cluster.ref("researcher"), Run(question))
    ```
    """
    return _HOST_CLUSTER


@contextlib.asynccontextmanager
async def hosting_cluster(options: dict[str, Any]) -> AsyncIterator[Cluster]:
    """A host process's own Cluster, `host_cluster` while the host serves (handed to
    each host this side creates: `pride.cluster.host.runtime.OpenCluster`)."""
    global _HOST_CLUSTER
    async with Cluster(
        namespace=options["namespace"],
        storage=options.get("storage"),
        reconnect_timeout=options.get("reconnect_timeout", 30.0),
        stop_hosts=False,
    ) as cluster:
        _HOST_CLUSTER = cluster
        try:
            yield cluster
        finally:
            _HOST_CLUSTER = None


class Cluster:
    """A connection to a Ray cluster, and the hosts and branches placed through it.

    Args:
        address: a running cluster's address (``"auto"``, ``"ray://..."``,
            ``"host:6379"``); None starts a local one (or uses the
            connection this process already has).
        num_cpus: CPUs of a local cluster (None: Ray's default, all of them).
        namespace: the Ray namespace of the hosts; processes sharing it see
            each other's branches.
        storage: the directory under which each host keeps its store and
            journal (``<storage>/<namespace>/<host>/``, private to this user),
            on the machine the host runs on. Default: a fresh private
            directory of this Cluster's own (``tempfile.mkdtemp``), removed
            when it closes if it stops its hosts (``stop_hosts=True``), kept
            otherwise; so conversations that must outlive the Cluster need
            an explicit path. A directory another user owns or may write to
            is refused (`StoreError`): hosts replay what they find there.
        host_restarts: times Ray restarts a host process that died (Ray's
            ``max_restarts``); past it the host is gone for good.
        reconnect_timeout: seconds a send waits for a lost host to come back.
        runtime_env: Ray's runtime environment for host processes; default:
            ``PYTHONPATH`` set to this process's import path, so factories
            importable here are importable on the hosts of a local cluster.
        host_session: keyword arguments of each host's Session (strategy,
            max_restarts, period, grace).
        session: a local Session whose observer also receives the signals
            of the remote branches.
        num_cpus_per_host: CPUs Ray reserves for each host process (default 0).
        stream_window: items a remote stream's turn may run ahead of its
            consumer (the host waits for credits past it).
        spawn_timeout: seconds a host waits for a placement's factory (which
            runs in a worker thread there, so the host serves its other
            branches meanwhile) before the spawn fails with `TimeoutError`
            naming the factory.
        stop_hosts: stop the hosts this cluster created when it closes
            (their sessions get their grace). False creates them *detached*:
            they go on serving other processes after this one exits, until
            killed (``ray kill``) or the Ray cluster stops.
        init_options: more keyword arguments for ``ray.init``.

    Use as ``async with Cluster(...) as cluster:``. Leaving it stops the
    hosts this cluster created (unless ``stop_hosts=False``) and disconnects
    from a cluster it started.
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        *,
        namespace: str = "pride",
        storage: str | Path | None = None,
        host_restarts: int = 3,
        reconnect_timeout: float = 30.0,
        runtime_env: dict[str, Any] | None = None,
        host_session: dict[str, Any] | None = None,
        session: Session | None = None,
        num_cpus_per_host: float = 0,
        stop_hosts: bool = True,
        stream_window: int = DEFAULT_STREAM_WINDOW,
        spawn_timeout: float = SPAWN_TIMEOUT,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        if host_restarts < 0:
            raise ValueError(f"host_restarts must be >= 0, got {host_restarts!r}")
        if not isinstance(stream_window, int) or stream_window < 1:
            raise ValueError(
                f"stream_window must be a positive number of items, got {stream_window!r}"
            )
        if not reconnect_timeout > 0:
            raise ValueError(f"reconnect_timeout must be positive, got {reconnect_timeout!r}")
        if not 0 < spawn_timeout <= MAX_SPAWN_TIMEOUT:
            raise ValueError(
                f"spawn_timeout must be in (0, {MAX_SPAWN_TIMEOUT:g}] seconds, "
                f"got {spawn_timeout!r}"
            )
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        options.update(init_options or {})
        if address is not None:
            options["address"] = address
        if num_cpus is not None:
            options["num_cpus"] = num_cpus
        self.address = address
        self.namespace = namespace
        self.storage: Path | None = Path(storage) if storage is not None else None
        self._own_storage = False
        self.host_restarts = host_restarts
        self.reconnect_timeout = float(reconnect_timeout)
        self.spawn_timeout = float(spawn_timeout)
        self._stop_hosts = stop_hosts
        self.stream_window = stream_window
        self._connection = RayConnection(options)
        self._route = SignalRoute(session.observer if session is not None else None)
        self._directory = Directory(
            self,
            HostOptions(
                namespace=namespace,
                restarts=host_restarts,
                reconnect_timeout=self.reconnect_timeout,
                cpus=num_cpus_per_host,
                detached=not stop_hosts,
                runtime_env=runtime_env if runtime_env is not None else default_runtime_env(),
                session=dict(host_session or {}),
                open_cluster=hosting_cluster,
            ),
            on_signal=self._on_signal,
            on_crash=self._on_crash,
        )
        self._nursery: trio.Nursery | None = None
        self._cm: Any = None
        self._supervised: dict[str, RemoteChild] = {}
        self.closing = False

    def __repr__(self) -> str:
        return f"<Cluster namespace={self.namespace!r} hosts={self.hosts}>"

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        if self.storage is None:
            self.storage = new_storage()
            self._own_storage = True
        try:
            await trio.to_thread.run_sync(self._connection.start)
        except BaseException:
            if self._own_storage:
                remove_storage(self.storage)
            raise
        cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        self._cm, self._nursery = cm, nursery
        self._directory.open(self.storage, nursery)
        await nursery.start(self._route.run)
        return self

    async def __aexit__(self, *exc_info: Any) -> bool:
        try:
            with trio.CancelScope(shield=True):
                await self._close()
        except BaseException as late:
            exc_info = (type(late), late, late.__traceback__)
        cm, self._cm = self._cm, None
        try:
            return await leave_unwrapped(cm, exc_info)
        finally:
            exc_info = ()  # an error leaving holds this frame: no cycle through it
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._connection.stop)

    async def _close(self) -> None:
        self.closing = True
        directory = self._directory
        for host, link in directory.links.items():
            if host not in directory.owned and link.state == "up":
                link.handle.forget.remote(link.conn)  # fire and forget: the host drops our calls
        directory.close()  # before stopping hosts: their end is no loss to report
        with trio.move_on_after(SHUTDOWN_GRACE):
            async with trio.open_nursery() as nursery:
                for host in directory.owned:
                    nursery.start_soon(shutdown_host, directory.handles[host])
        if self._own_storage and self.storage is not None:
            if self._stop_hosts:  # every host that used it is stopped: nothing to keep
                await trio.to_thread.run_sync(remove_storage, self.storage)
            else:
                log.warning(
                    "cluster %r: its hosts serve on; their storage %s is kept (remove it "
                    "once they are stopped)",
                    self.namespace,
                    self.storage,
                )
        self._route.close()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()

    # ------------------------------------------------------------ placing

    async def spawn(
        self,
        factory: Callable[..., Any] | str,
        *args: Any,
        name: str,
        host: str = DEFAULT_HOST,
        resources: dict[str, float] | None = None,
        restart: str = "permanent",
        **kwargs: Any,
    ) -> RemoteBranchRef:
        """Build a branch on a host with ``factory(*args, name=name, **kwargs)``; return its ref.

        ``factory`` is an importable callable (or its ``"module:function"``
        path) returning a `Branch` named ``name``; it runs on
        the host, so tools, models and connections are made there. ``args``
        and ``kwargs`` must be JSON data (they are recorded, and replayed
        when the host restarts). A branch stored under that name on the host
        comes back with its conversation.

        Args:
            host: the host process's name; created on first use.
            resources: Ray resources the host needs (``{"GPU": 1}``), used
                when this call creates it.
            restart: the branch's restart type in its host's session.

        Raises:
            TypeError: ``factory`` is not importable by name, or an argument is not JSON data.
            ValueError: the factory made a branch with another name, or the
                host already has a branch with this name made by another
                factory or other arguments (the same placement made at once
                by two processes gives both the one branch).
            TimeoutError: the factory did not return within ``spawn_timeout``.
            HostLost: the host died while placing it.
            ImportError, AttributeError: the host cannot import the factory.
        """
        spec = placement(factory, args, kwargs, name, restart)
        ref, _ = await self._place(spec, host, resources)
        return ref

    async def supervise(
        self,
        session: Session,
        factory: Callable[..., Any] | str,
        *args: Any,
        name: str,
        host: str = DEFAULT_HOST,
        resources: dict[str, float] | None = None,
        restart: RestartType = "permanent",
        **kwargs: Any,
    ) -> RemoteChild:
        """Place a branch on a host as a child of the local ``session``; return the child.

        The branch is built and placed as by `spawn`; ``session`` then
        supervises it like a branch of its own: a crash of its host
        (`HostLost`) or of the branch there is a crash of the child, to
        which the session applies its strategy, ``restart`` type and
        intensity; a restart waits for the host to come back and finds the
        branch restored from the host's store. The session's observer sees
        the child's lifecycle signals (from the session) and its turns' signals
        (from the host). The child is a target: ``pride.ask(child, ...)``.
        See docs/cluster.md, "Supervision across processes".

        Returns after the branch is placed and the session has started the child.

        Raises:
            ValueError: ``restart`` is not a restart type, or as `spawn` does;
                or the session already has a member of that name.
            TypeError, ImportError, AttributeError, HostLost: as `spawn` does.
            RuntimeError: ``session`` is not running.
        """
        restart = check_restart_type(restart)
        on_host = "temporary" if restart == "temporary" else "permanent"
        spec = placement(factory, args, kwargs, name, on_host)
        if name in self._supervised:
            raise ValueError(f"branch {name!r} already has a supervisor in this process")
        child = RemoteChild(self, spec, host, resources, session)
        self._supervised[name] = child
        self._watch()  # the host's signals of the branch reach the session's observer
        try:
            await session.spawn(child, restart=restart)
        except BaseException:
            self._supervised.pop(name, None)
            raise
        return child

    async def _place(
        self, spec: dict[str, Any], host: str, resources: dict[str, float] | None
    ) -> tuple[RemoteBranchRef, trio.Event]:
        """Place ``spec`` on ``host``; the ref, and the loss event of the connection used."""
        name = spec["name"]
        link = await self._directory.link(host, create=True, resources=resources)
        await link.wait_up(name)
        lost = link.lost
        link.served.add(name)  # its signals (BranchStarted...) may come before the answer
        try:
            sent = dumps({**spec, "timeout": self.spawn_timeout})
            answer = loads(await wait_ref(link.handle.place.remote(sent)), "placement")
        except Exception as exc:
            if is_ray_loss(exc):
                raise HostLost(name, host, type(exc).__name__) from exc
            raise
        if isinstance(answer, dict) and "error" in answer:
            raise decode_error(answer["error"])
        branch = answer.get("branch") if isinstance(answer, dict) else None
        described = described_branches({"branches": [branch]}, host)
        if not described or described[0]["name"] != name:
            raise InvalidMessage([("placement", f"host {host!r} described {name!r} badly")])
        ref = RemoteBranchRef(self, name, host, UUID(described[0]["id"]), described[0]["capacity"])
        self._directory.remember(ref)
        link.know_room(name, ref.capacity or 0)
        return ref, lost

    async def _place_supervised(
        self, child: RemoteChild, spec: dict[str, Any], resources: dict[str, float] | None
    ) -> tuple[RemoteBranchRef, trio.Event]:
        """A run of ``child`` begins: place its branch and ask the host for its crashes."""
        self._supervised.setdefault(child.name, child)
        ref, lost = await self._place(spec, child.host, resources)
        if self._supervised.get(child.name) is child:
            self._directory.links[child.host].supervise(child.name)
        return ref, lost

    def _unsupervise(self, child: RemoteChild) -> None:
        if self._supervised.get(child.name) is child:
            del self._supervised[child.name]

    def _loss_of(self, host: str) -> str:
        link = self._directory.links.get(host)
        return link.loss if link is not None else "not connected"

    def _on_crash(self, host: str, branch: str, error: str) -> None:
        report_crash(self._supervised.get(branch), host, error)

    def ref(self, name: str, host: str | None = None) -> RemoteBranchRef:
        """The ref of the branch named ``name``, placed by any process of the cluster.

        Never waits: a name this process has not seen is resolved (by asking
        the hosts) on the first send; no host serving it raises UnknownBranch there.
        """
        known = self._directory.names.get(name)
        if known is not None and host in (None, known.host):
            return known
        return RemoteBranchRef(self, name, host)

    async def lookup(self, name: str) -> RemoteBranchRef:
        """The ref of ``name``, resolved now (its host, id and mailbox capacity).

        Raises:
            UnknownBranch: no host of this cluster's namespace serves it.
        """
        ref = self.ref(name)
        await self._link_for(ref)
        return self._directory.names.get(name, ref)

    @property
    def hosts(self) -> list[str]:
        """The hosts this cluster has connected to."""
        return sorted(self._directory.links)

    # ------------------------------------------------------------ observing

    def observe(self, *filters: Any, handler: Any = None) -> Any:
        """Subscribe to the signals of every remote branch (see `pride.Observer.observe`).

        Signals arrive in the order their host emitted them: per turn,
        RunStart, its messages, then one terminal, all with the turn's id.
        """
        result = self._route.observer.observe(*filters, handler=handler)
        self._watch()
        return result

    def unobserve(self, handler: Any) -> int:
        """Remove ``handler``'s subscriptions; return how many there were."""
        return self._route.observer.unobserve(handler)

    @property
    def observer(self) -> Observer:
        """The observer remote signals are dispatched to."""
        return self._route.observer

    def _watch(self) -> None:
        self._directory.watch()

    def _on_signal(self, link: Link, signal: Signal) -> None:
        name = signal.branch_name
        if name is not None and name not in link.served:
            # A host speaks for its own branches only: a signal naming a branch this
            # process knows on another host is a forgery (or a bug), not an event.
            child = self._supervised.get(name)
            owner = self._directory.owner(name) or (child.host if child else None)
            if owner is not None and owner != link.host:
                log.warning(
                    "host %r sent a signal of branch %r, served by host %r; dropped",
                    link.host,
                    name,
                    owner,
                )
                return
        supervised = self._supervised.get(name or "")
        self._route.dispatch(signal, supervised.session.observer if supervised else None)

    # ------------------------------------------------------------ links

    def _ready_link(self, ref: RemoteBranchRef) -> Link | None:
        """The link to ``ref``'s host when no wait is needed (see `Directory.ready_link`)."""
        return self._directory.ready_link(ref)

    async def _link_for(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, up (see `Directory.link_for`)."""
        return await self._directory.link_for(ref)

    def _known_link(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, without waiting (see `Directory.known_link`)."""
        return self._directory.known_link(ref)
