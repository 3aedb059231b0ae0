"""A standalone branch: ``async with Branch(...)`` runs its actor in a nursery of its own.

Outside a session nobody supervises the branch, so ``__aenter__`` opens a
`PrivateNursery` and starts the actor in it, and ``__aexit__`` stops it: the
turn running finishes, envelopes still queued are answered with
[`BranchClosed`][pride.BranchClosed], and what the actor raised comes back
as one exception. A session may adopt the running branch meanwhile
(``session.include``); then the actor is the session's, and leaving the
block leaves it running there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..actors.nursery import PrivateNursery
from ..actors.reply import Reply
from ..messages import Stop

if TYPE_CHECKING:
    from uuid import UUID

    from ..actors.actor import Actor

__all__ = ["Standalone", "start", "stop"]


class Standalone(Protocol):
    """What runs standalone (a `pride.Branch` is one): a named actor, served by ``serve``."""

    @property
    def id(self) -> UUID: ...

    @property
    def name(self) -> str: ...

    @property
    def running(self) -> bool: ...

    @property
    def actor(self) -> Actor: ...

    @property
    def serve(self) -> Callable[..., Awaitable[Any]]: ...


async def start(branch: Standalone) -> PrivateNursery:
    """Start ``branch``'s actor in a private nursery; returns it once the actor
    accepts commands (hand it to `stop`).

    Raises:
        RuntimeError: the branch is already running.
    """
    if branch.running:
        raise RuntimeError(f"branch {branch.name!r} is already running")
    private = PrivateNursery()
    await private.open(branch.serve)
    return private


async def stop(
    branch: Standalone, private: PrivateNursery | None, exc_info: tuple[Any, ...]
) -> bool:
    """Stop the actor `start` started in ``private`` (unless a session adopted it)
    and wait for it.

    Raises:
        Exception: what the actor raised, as one exception (never a group).
    """
    actor = branch.actor
    # A session took the actor over (include): the mailbox is no longer ours.
    nursery = private.nursery if private is not None else None
    adopted = actor.owner_id is not None and nursery is not None and not nursery.child_tasks
    if actor.running and not adopted:
        # Stop after the current turn; queued envelopes are answered BranchClosed.
        actor.require_mailbox(branch).put_priority(Reply(branch, Stop()))
    try:
        return await private.close(exc_info) if private is not None else False
    finally:
        exc_info = ()  # an error leaving holds this frame: no cycle through it
        if not adopted:
            actor.close(branch, "the branch's actor exited")
