"""Remote children: a branch on a host, supervised by a Session of this process.

A local [`Session`][pride.Session] supervises a remote branch through a
`RemoteChild`, one of its services (`pride.supervisors._service`): each run
of the child places the branch on its host (or finds it there, restored from
the host's store after a restart) and then watches it, so the session's own
machinery applies unchanged: its strategy (``one_for_one``, ``one_for_all``,
``rest_for_one``), the child's restart type, the restart intensity, the
ordered stops and the lifecycle signals (``BranchStarted``, ``BranchStopped``,
``BranchRestarted``) in its observer.

What counts as a crash of a remote child:

* **its host was lost** (the process died, or cannot be reached): the run
  ends with [`HostLost`][pride.HostLost]. Restarting the child waits for Ray
  to restart the host (up to the cluster's ``reconnect_timeout``), which
  reloads its branches from its store, so the conversation comes back as it
  was committed; a host gone for good fails every start, and the intensity
  then fails the session;
* **the branch crashed on its host** (``Escalate``, an internal error): the
  host reports it to the supervising link and the run ends with the same
  error (``Escalate(reason)``, or a [`RemoteError`][pride.RemoteError]
  naming the type). The host's own session has already restarted the branch
  in place, keeping its mailbox, as a local restart does; the local session
  counts the crash and applies its strategy to the other children.

A deliberate stop (``session.remove(child)``, the session's shutdown, a
sibling's restart) ends the *supervision*, not the branch: the branch is its
host's, and keeps serving there (until the Cluster stops the hosts it
created). A turn running on the host is therefore not cancelled by a
sibling's restart, unlike a local branch's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import trio

from ...actors import Reply
from ...errors import Escalate, HostLost, RemoteError
from .ref import RemoteBranchRef

if TYPE_CHECKING:
    from ...supervisors import Session

__all__ = ["RemoteChild", "SupervisingCluster", "crash_error", "report_crash"]

log = logging.getLogger("pride.cluster")


class SupervisingCluster(Protocol):
    """What a remote child needs of its cluster (a [`Cluster`][pride.cluster.Cluster]):
    refs, placing the child's branch for each of its runs, and its hosts' losses."""

    closing: bool

    def ref(self, name: str, host: str | None = None) -> RemoteBranchRef:
        """The ref of the branch named ``name``."""
        ...

    async def _place_supervised(
        self, child: RemoteChild, spec: dict[str, Any], resources: dict[str, float] | None
    ) -> tuple[RemoteBranchRef, trio.Event]:
        """A run of ``child`` begins: place its branch; its ref and its link's loss event."""
        ...

    def _unsupervise(self, child: RemoteChild) -> None:
        """``child`` is no longer supervised."""
        ...

    def _loss_of(self, host: str) -> str:
        """Why ``host`` was lost."""
        ...


class RemoteChild:
    """A branch on a host, held by a local Session as a child (see the module docstring).

    Made by [`Cluster.supervise`][pride.cluster.Cluster.supervise]. It is a
    target: ``pride.send/ask/stream/send_nowait`` (and ``session.ask``) reach
    the remote branch through it, as through its `ref`.

    Attributes:
        host: the host serving the branch.
        ref: the branch's [`RemoteBranchRef`][pride.cluster.RemoteBranchRef].
        session: the supervising session.
    """

    __slots__ = (
        "__weakref__",  # a session keeps its members in a weak mapping
        "_cluster",
        "_crash",
        "_crashed",
        "_resources",
        "_spec",
        "_stop",
        "host",
        "ref",
        "session",
    )

    def __init__(
        self,
        cluster: SupervisingCluster,
        spec: dict[str, Any],
        host: str,
        resources: dict[str, float] | None,
        session: Session,
    ) -> None:
        self._cluster = cluster
        self.session = session
        self._spec = spec
        self._resources = resources
        self.host = host
        self.ref: RemoteBranchRef = cluster.ref(spec["name"], host)
        self._stop: trio.Event | None = None
        self._crashed = trio.Event()
        self._crash: Exception | None = None

    def __repr__(self) -> str:
        return f"<RemoteChild {self.name!r} on {self.host}>"

    @property
    def name(self) -> str:
        """The branch's name (a member name in the session)."""
        name: str = self._spec["name"]
        return name

    @property
    def id(self) -> UUID:
        """The branch's id (known once placed; stable across host restarts)."""
        return self.ref.id

    # ------------------------------------------------------------ the target protocol

    async def deliver(self, envelope: Reply) -> None:
        """Carry ``envelope`` to the remote branch (see `RemoteBranchRef.deliver`)."""
        await self.ref.deliver(envelope)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Carry ``envelope`` now, or raise (see `RemoteBranchRef.deliver_nowait`)."""
        self.ref.deliver_nowait(envelope)

    # ------------------------------------------------------------ the service protocol

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> str:
        """One run: place (or find) the branch, report started, watch it until stopped.

        Returns ``"normal"`` when asked to stop (or when the cluster closed under it).

        Raises:
            HostLost: before ``started``, the host could not be reached (a
                failed start); after it, the host was lost (a crash).
            Escalate, RemoteError: the branch crashed on its host.
            TypeError, ValueError, ImportError: the host cannot build the
                branch (a failed start; see `Cluster.spawn`).
        """
        stop = self._stop = trio.Event()
        self._crashed = crashed = trio.Event()
        self._crash = None
        try:
            placed = await self._cluster._place_supervised(self, self._spec, self._resources)
            self.ref, lost = placed
            task_status.started()
            async with trio.open_nursery() as nursery:
                for event in (stop, lost, crashed):
                    nursery.start_soon(_cancel_when, event, nursery.cancel_scope)
        finally:
            self._stop = None
        if stop.is_set():
            self._cluster._unsupervise(self)
            return "normal"
        if self._crash is not None:
            raise self._crash
        if self._cluster.closing:
            log.warning("remote child %r: its cluster closed while supervised", self.name)
            self._cluster._unsupervise(self)
            return "normal"
        raise HostLost(self.name, self.host, self._cluster._loss_of(self.host))

    def request_stop(self, deadline: float) -> None:
        """End the supervision of this run (at once: the branch itself serves on)."""
        if self._stop is not None:
            self._stop.set()

    def crashed(self, error: Exception) -> None:
        """The host reported a crash of the branch (called by the cluster)."""
        if self._stop is not None and not self._crashed.is_set():
            self._crash = error
            self._crashed.set()


def report_crash(child: RemoteChild | None, host: str, error: str) -> None:
    """``host`` reported a crash of ``child``'s branch (``error``: ``"Type: message"``).

    Only the child's own host is believed: a host cannot crash a branch that
    another host serves (a lying or confused host is logged and ignored).
    """
    if child is None:
        return
    if child.host != host:
        log.warning(
            "host %r reported a crash of %r, which is supervised on host %r; ignored",
            host,
            child.name,
            child.host,
        )
        return
    child.crashed(crash_error(error))


def crash_error(text: str) -> Exception:
    """The exception of a host's ``BranchStopped.error`` text (``"Type: message"``)."""
    kind, sep, message = text.partition(": ")
    if not sep:
        kind, message = "crash", text
    if kind == "Escalate":
        return Escalate(message)
    return RemoteError(kind, message)


async def _cancel_when(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
