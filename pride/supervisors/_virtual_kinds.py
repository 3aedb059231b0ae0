"""The records of virtual branches: a kind and its checks, a live branch, an
activation under way, and the address of a virtual branch (`VirtualRef`).

What `pride.supervisors._virtual` keeps: see there for the model.
"""

from __future__ import annotations

import collections
import inspect
import math
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import attrs
import trio

from ..actors.reply import Reply
from ..branch import Branch
from ..errors import VirtualKindError

if TYPE_CHECKING:
    from ..durable import Persistence
    from ._child import Child
    from ._supervisor import Supervisor
    from .observer import Observer

__all__ = [
    "DEFAULT_PASSIVATE_AFTER",
    "MAX_KEY_LENGTH",
    "PENDING_LIMIT",
    "Activation",
    "Kind",
    "Live",
    "Members",
    "PassivationReason",
    "Router",
    "VirtualRef",
    "make_kind",
]

DEFAULT_PASSIVATE_AFTER = 300.0
"""Seconds a virtual branch may stay idle before it is passivated (Dapr's
actor idle timeout is 60 minutes, Akka's sharding passivation 2 minutes; a
conversation comes back within minutes or days, so 5 minutes)."""

MAX_KEY_LENGTH = 1024
"""The longest key a name may carry (keys come from request lines: hostile)."""

PENDING_LIMIT = 1024
"""Envelopes ``send_nowait`` may queue for one activation before ``MailboxFull``."""

# The namespace of a virtual name's address id (a VirtualRef's id before its
# branch is live): the same name gives the same id in every process.
VIRTUAL_NAMESPACE = uuid.UUID("6f1a3c52-27d1-4a5e-9a0e-5c1f0d9b7e31")

PassivationReason = Literal["idle", "max_active", "manual", "shutdown", "crash"]


@attrs.define(eq=False)
class Kind:
    """A registered kind: its factory, its options, and its live branches in LRU order."""

    name: str
    factory: Callable[[str], Any]
    passivate_after: float
    max_active: int | None
    # name -> record, least recently used first (moved to the end on every use).
    live: collections.OrderedDict[str, Live] = attrs.field(factory=collections.OrderedDict)
    # With max_active: one slot per live branch (or activation past its start);
    # activations short of one wait for it in arrival order.
    slots: trio.Semaphore | None = None

    def __attrs_post_init__(self) -> None:
        if self.max_active is not None:
            self.slots = trio.Semaphore(self.max_active)

    def release(self) -> None:
        """A live branch (or an activation) of this kind is gone: its slot is free."""
        if self.slots is not None:
            self.slots.release()

    async def build(self, key: str) -> Branch:
        """``factory(key)``, awaited if it is async, checked to be an unstarted Branch.

        Raises:
            TypeError: it returned something else, or a running branch.
            Exception: whatever the factory raised.
        """
        built = self.factory(key)
        if inspect.isawaitable(built):
            built = await built
        if not isinstance(built, Branch):
            raise TypeError(
                f"the factory of kind {self.name!r} returned {type(built).__name__}, not a Branch"
            )
        if built.running or built.actor.serving:
            raise TypeError(
                f"the factory of kind {self.name!r} returned a running branch "
                f"({built.name!r}); return a new, unstarted Branch"
            )
        return built

    def deadline(self) -> float:
        """When its least recently used live branch reaches the idle limit (inf: none)."""
        for live in self.live.values():  # the first is the least recently used
            return live.last_active + self.passivate_after
        return math.inf

    def next_expired(self, now: float, busy: Callable[[str, Live], bool]) -> str | None:
        """The least recently used live branch idle for ``passivate_after`` by ``now``,
        or None; those before it that ``busy`` says are busy get a fresh deadline
        instead (their work's end moves it again).

        Asked anew before each passivation, never listed ahead: a passivation
        waits for a commit, and a branch used meanwhile is no longer idle.
        """
        # Each live branch is looked at once at most: a busy one goes to the end with
        # a fresh deadline, and would be at the front again once all were moved, if
        # ``now + passivate_after`` rounds to ``now`` (a tiny passivate_after late in
        # a long run): bounded, the scan ends however the sums round.
        for _ in range(len(self.live)):
            name, live = next(iter(self.live.items()))
            if live.last_active + self.passivate_after > now:
                return None  # LRU order: the rest are younger
            if not busy(name, live):
                return name
            live.last_active = now
            self.live.move_to_end(name)
        return None

    def starved(self) -> bool:
        """True while activations wait for a slot."""
        return self.slots is not None and self.slots.statistics().tasks_waiting > 0


@attrs.define(eq=False)
class Live:
    """A live virtual branch: the branch and the time of its last activity."""

    branch: Branch
    last_active: float

    def busy(self) -> bool:
        """True while the branch has a turn running (a stream open) or work queued."""
        actor = self.branch.actor
        if actor.envelope is not None or actor.turn is not None:
            return True
        mailbox = actor.statistics()
        return mailbox is not None and (mailbox.queued > 0 or mailbox.priority_queued > 0)


@attrs.define(eq=False)
class Activation:
    """A name being activated: the envelopes waiting for it, in arrival order
    (accepted as a mailbox accepts them: a caller dropping one before it is
    handed over leaves it here, dropped, and it is skipped)."""

    pending: collections.deque[Reply] = attrs.field(factory=collections.deque)
    done: trio.Event = attrs.field(factory=trio.Event)  # set once it succeeded or failed
    branch: Branch | None = None
    error: Exception | None = None


def make_kind(kind: Any, factory: Any, passivate_after: Any, max_active: Any) -> Kind:
    """A kind of that name, factory and options (see ``Session.virtual``).

    Raises:
        VirtualKindError: a bad name or option.
    """
    if not isinstance(kind, str) or not kind or "/" in kind or not kind.isprintable():
        raise VirtualKindError(f"a kind is a non-empty printable name without '/', got {kind!r}")
    if not callable(factory):
        raise VirtualKindError(f"the factory of kind {kind!r} must be callable, got {factory!r}")
    if (
        isinstance(passivate_after, bool)
        or not isinstance(passivate_after, int | float)
        or not passivate_after > 0
    ):
        raise VirtualKindError(
            f"passivate_after must be a positive number of seconds (math.inf: never), "
            f"got {passivate_after!r}"
        )
    if max_active is not None and (
        isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1
    ):
        raise VirtualKindError(f"max_active must be None or at least 1, got {max_active!r}")
    return Kind(kind, factory, float(passivate_after), max_active)


class Members(Protocol):
    """What virtual branches need of a session's membership (the membership
    holds them, so they know it by this protocol, not by its class)."""

    @property
    def name(self) -> str: ...
    @property
    def supervisor(self) -> Supervisor: ...
    @property
    def observer(self) -> Observer: ...
    @property
    def persistence(self) -> Persistence | None: ...
    async def adopt(
        self, branches: list[Any], restart: Any, durability: Any = None, *, activity: Any
    ) -> bool: ...
    async def remove(self, member: Any) -> None: ...
    def release(self, child: Child) -> None: ...


class Router(Protocol):
    """What a `VirtualRef` asks of its session's virtual branches."""

    def live_branch(self, name: str) -> Branch | None: ...
    async def deliver(self, name: str, envelope: Reply) -> None: ...
    def deliver_nowait(self, name: str, envelope: Reply) -> None: ...


class VirtualRef:
    """The address of a virtual branch (``session.ref("user/ada")``): a
    [`Target`][pride.Target] that activates the branch when an envelope
    arrives for it and it is not live.

    ``pride.ask/send/stream`` and the session's verbs accept it; it holds no
    branch, so it may be kept for as long as the session runs.
    """

    __slots__ = ("_virtuals", "name")

    def __init__(self, virtuals: Router, name: str) -> None:
        self._virtuals = virtuals
        self.name = name

    def __repr__(self) -> str:
        return f"<VirtualRef {self.name!r}>"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, VirtualRef)
            and other._virtuals is self._virtuals
            and other.name == self.name
        )

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def id(self) -> UUID:
        """The live branch's id; before activation, an id derived from the name."""
        live = self._virtuals.live_branch(self.name)
        return live.id if live is not None else uuid.uuid5(VIRTUAL_NAMESPACE, self.name)

    @property
    def capacity(self) -> int:
        """Envelopes this address takes before ``send`` waits (and ``send_nowait``
        raises ``MailboxFull``): the live branch's ``mailbox_size``, or before its
        activation `PENDING_LIMIT`, the activation's queue."""
        live = self._virtuals.live_branch(self.name)
        return live.mailbox_size if live is not None else PENDING_LIMIT

    async def deliver(self, envelope: Reply) -> None:
        """Hand ``envelope`` to the live branch, or queue it for its activation
        (started by the first envelope), as a mailbox would.

        Waits while the activation's queue holds `PENDING_LIMIT` envelopes.

        Raises:
            BranchClosed: the session is stopping.

        Cancellation: a delivery cancelled while waiting for room accepted nothing.
        """
        await self._virtuals.deliver(self.name, envelope)

    def deliver_nowait(self, envelope: Reply) -> None:
        """Hand ``envelope`` over now, or queue it for the activation it starts.

        Raises:
            MailboxFull: the live branch's mailbox (or the activation's queue) is full.
            BranchClosed: the session is stopping.
        """
        self._virtuals.deliver_nowait(self.name, envelope)
