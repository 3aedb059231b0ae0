"""RemoteBranchRef: the address of a branch on a host, a target for the send API.

It implements pride's target protocol (``deliver``, ``deliver_nowait``) on top
of its cluster's connection to the branch's host (`pride.cluster.caller.link`), so
``pride.send``, ``send_nowait``, ``ask`` and ``stream`` work with it as with a
local branch.
"""

from __future__ import annotations

import uuid
from typing import Protocol
from uuid import UUID

from ...actors import Reply
from .envelope import Envelope, check_work
from .link import Link

__all__ = ["RefCluster", "RemoteBranchRef"]


class RefCluster(Protocol):
    """What a ref needs of its cluster (a [`Cluster`][pride.cluster.Cluster]): its
    namespace, its stream window, and the link to a ref's host."""

    namespace: str
    stream_window: int

    def _ready_link(self, ref: RemoteBranchRef) -> Link | None:
        """The link to ``ref``'s host when no wait is needed."""
        ...

    async def _link_for(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, up."""
        ...

    def _known_link(self, ref: RemoteBranchRef) -> Link:
        """The link to ``ref``'s host, without waiting."""
        ...


class RemoteBranchRef:
    """The address of a branch on a host: a target for ``pride.send/ask/stream``.

    It implements pride's [`Target`][pride.Target] protocol, so
    ``await pride.ask(ref, Chat(...))``, ``pride.send``, ``pride.send_nowait``
    and ``pride.stream`` work with it as with a local branch.

    Attributes:
        name: the branch's name.
        host: the host serving it (None until resolved, for a ref made by
            ``cluster.ref(name)`` in a process that did not place it).
        capacity: its mailbox's capacity, once known.
    """

    __slots__ = ("_cluster", "_id", "capacity", "host", "name")

    def __init__(
        self,
        cluster: RefCluster,
        name: str,
        host: str | None = None,
        id: UUID | None = None,
        capacity: int | None = None,
    ) -> None:
        self._cluster = cluster
        self.name = name
        self.host = host
        self._id = id
        self.capacity = capacity

    @property
    def id(self) -> UUID:
        """The branch's id; until resolved, a stable stand-in derived from its name."""
        if self._id is not None:
            return self._id
        return uuid.uuid5(
            uuid.NAMESPACE_URL, f"pride-cluster:{self._cluster.namespace}:{self.name}"
        )

    def __repr__(self) -> str:
        return f"<RemoteBranchRef {self.name!r} on {self.host or '?'}>"

    def __eq__(self, other: object) -> bool:
        # The same name on two hosts is two branches; a ref not resolved yet (host
        # None) is the ref of whichever branch of that name it will resolve to.
        if not isinstance(other, RemoteBranchRef):
            return NotImplemented
        return (
            self._cluster is other._cluster
            and self.name == other.name
            and (self.host is None or other.host is None or self.host == other.host)
        )

    def __hash__(self) -> int:
        return hash((id(self._cluster), self.name))

    async def deliver(self, envelope: Reply) -> None:
        """Carry ``envelope`` to the branch's host (the [`Target`][pride.Target] protocol).

        Returns at once while this caller believes the remote mailbox has
        room (the host's last answers said so); otherwise waits until the host
        has queued it (backpressure). Refusals that arrive later (the branch
        stopped meanwhile) fail the envelope's reply instead. A streamed
        command always waits for its host to start streaming.

        Raises:
            TypeError: not a work command (a remote branch is supervised by its host).
            UnknownBranch: no host serves a branch of this name.
            BranchClosed: the branch has stopped.
            HostLost: its host is down (and not back within ``reconnect_timeout``).

        Cancellation: cancelled while waiting, the envelope is withdrawn.
        """
        check_work(envelope.command)
        cluster = self._cluster
        link = cluster._ready_link(self) or await cluster._link_for(self)
        streamed = envelope.stream is not None
        remote = Envelope(link, envelope, self.name, window=self._cluster.stream_window)
        wait = streamed or not link.has_room(self.name)
        link.submit(remote, "stream" if streamed else "wait", ack=wait)
        envelope.hold(remote)
        if not wait:
            return
        try:
            await remote.wait_acked()
        except BaseException:
            remote.forget_dropped()
            raise
        if remote.refusal is not None:
            raise remote.refusal

    def deliver_nowait(self, envelope: Reply) -> None:
        """Carry ``envelope`` to the host now, or raise (the [`Target`][pride.Target] protocol).

        Raises [`MailboxFull`][pride.MailboxFull] at once when this caller
        knows the remote mailbox is full (its last answer from the host said
        so, counting what it sent since); a mailbox that fills while the
        envelope travels fails the reply with MailboxFull instead.

        Raises:
            UnknownBranch: the ref's host is not known yet (send to it once, or
                ``await cluster.lookup(name)``, first).
            HostLost: its host is down.
        """
        check_work(envelope.command)
        if envelope.stream is not None:
            raise TypeError("a stream is delivered with `deliver`, not `deliver_nowait`")
        link = self._cluster._known_link(self)
        link.check_up(self.name)
        link.check_room(self.name, self.capacity)
        remote = Envelope(link, envelope, self.name)
        link.submit(remote, "nowait", ack=False)
        envelope.hold(remote)
