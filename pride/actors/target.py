"""The target protocol: what [`send`][pride.send], ``send_nowait``, ``ask`` and ``stream`` accept.

A **target** is anything that takes an envelope (a [`Reply`][pride.Reply]:
the command plus the handle its caller holds) and serves it. The send API
knows nothing else about it: a local [`Branch`][pride.Branch] implements
`Target` by putting the envelope in its mailbox, and a branch on
another process (the cluster's ``RemoteBranchRef``) implements it by
carrying the envelope there. Identity (``id``, ``name``) is what errors,
deadlock reports and sessions use to name it.

What an implementation does with the envelope it was given:

* **refuse it at once** by raising, with nothing queued:
  [`BranchClosed`][pride.BranchClosed] (it has stopped, or its host is gone),
  [`BranchNotRunning`][pride.BranchNotRunning] (it never started),
  [`MailboxFull`][pride.MailboxFull] (``deliver_nowait`` only: no room);
* or **accept it**, and then answer it exactly once: ``reply.hold(holder)``
  while it keeps it queued, if it must hear of a caller dropping it
  (``holder.forget_dropped()``: a remote target tells its host);
  ``reply.start(turn_id, canceller)`` when it starts serving it
  (``canceller.cancel()`` is how a caller's `cancel` reaches the running command),
  ``reply.turn_id`` set as soon as the turn id is known, items of a
  streaming command sent to ``reply.stream`` (closed when the turn ends),
  and finally ``reply.succeed(result)`` or ``reply.fail(error)``.
  An accepted envelope is never dropped silently: if the target stops
  first it answers ``reply.fail(BranchClosed(...))``.

`BranchRef` is the serialisable address of a branch of this process
(its id and name): the send API resolves it to that live branch.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import attrs

if TYPE_CHECKING:
    from .reply import Reply

__all__ = ["BranchRef", "Target", "is_target", "live_target"]


class Target(Protocol):
    """Anything the send API can deliver a command to (see the module docstring).

    Implemented by [`Branch`][pride.Branch] and `BranchRef` here, and by
    the cluster's ``RemoteBranchRef``.
    """

    @property
    def id(self) -> UUID:
        """The branch's id (stable across restarts and processes)."""
        ...

    @property
    def name(self) -> str:
        """The branch's name, for humans and for resolution by name."""
        ...

    async def deliver(self, envelope: Reply) -> None:
        """Accept ``envelope``, waiting while there is no room (backpressure).

        Priority commands never wait. May return without a checkpoint when
        it found room (the send API checkpoints around it).

        Raises:
            BranchClosed: the target has stopped (nothing was accepted).
            BranchNotRunning: the target was never started.

        Cancellation: a delivery cancelled while waiting accepted nothing.
        """
        ...

    def deliver_nowait(self, envelope: Reply) -> None:
        """Accept ``envelope`` now, or raise.

        Raises:
            MailboxFull: no room for work right now.
            BranchClosed, BranchNotRunning: as for `deliver`.
        """
        ...


def is_target(value: object) -> bool:
    """True when ``value`` implements `Target` (it has both delivery methods)."""
    kind = type(value)
    if kind in _target_types:  # the common case, on every send: no attribute lookups
        return True
    found = callable(getattr(kind, "deliver", None)) and callable(
        getattr(kind, "deliver_nowait", None)
    )
    if found:
        _target_types.add(kind)
    return found


# Classes already seen to implement Target (a handful: Branch, the cluster's ref).
_target_types: set[type] = set()


# Branches whose actor runs in this process, by id: what a BranchRef resolves to.
_live: weakref.WeakValueDictionary[UUID, Any] = weakref.WeakValueDictionary()


def live_target(branch_id: UUID) -> Any:
    """The branch with this id whose actor is running in this process, or None."""
    return _live.get(branch_id)


def announce_live(branch: Any) -> None:
    """Record that ``branch``'s actor serves in this process (BranchRef resolves it)."""
    _live[branch.id] = branch


def withdraw_live(branch: Any) -> None:
    """Undo `announce_live` (the branch stopped)."""
    key: UUID = branch.id
    if _live.get(key) is branch:
        del _live[key]


@attrs.frozen
class BranchRef:
    """A serialisable address of a branch in this process: its id, and its name for humans.

    The send API resolves it to the live branch with that id (raising
    [`UnknownBranch`][pride.UnknownBranch] when none runs here), so a call from that
    branch's own turn runs nested, as with the branch itself. A branch on
    another process is reached through a target of its own (the cluster's
    ``RemoteBranchRef``), not through this address.
    """

    id: UUID
    name: str | None = None
