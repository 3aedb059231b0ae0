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

from typing import TYPE_CHECKING, Any

from ..messages import Stop
from .mailbox import Reply
from .nursery import PrivateNursery

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["start", "stop"]


async def start(branch: Branch) -> None:
    """Start ``branch``'s actor in a private nursery; returns once it accepts commands.

    Raises:
        RuntimeError: the branch is already running.
    """
    if branch.running:
        raise RuntimeError(f"branch {branch.name!r} is already running")
    private = PrivateNursery()
    await private.open(branch.serve)
    branch._private = private


async def stop(branch: Branch, exc_info: tuple[Any, ...]) -> bool:
    """Stop the actor `start` started (unless a session adopted it) and wait for it.

    Raises:
        Exception: what the actor raised, as one exception (never a group).
    """
    private, branch._private = branch._private, None
    actor = branch.actor
    # A session took the actor over (include): the mailbox is no longer ours.
    nursery = private.nursery if private is not None else None
    adopted = actor.owner_id is not None and nursery is not None and not nursery.child_tasks
    if actor.running and not adopted:
        # Stop after the current turn; queued envelopes are answered BranchClosed.
        actor.require_mailbox().put_priority(Reply(branch, Stop()))
    try:
        return await private.close(exc_info) if private is not None else False
    finally:
        exc_info = ()  # an error leaving holds this frame: no cycle through it
        if not adopted:
            actor.close("the branch's actor exited")
