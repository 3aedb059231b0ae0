"""Commit riders: a sender's record of an outcome, committed with the turn that produced it.

A sender that keeps its own durable record of what a command returned (a
flow journals each node's outcome) would otherwise write it in a commit of
its own, after it is answered. A crash between the turn's commit and that
one leaves the turn's work durable and the sender's record missing, so a
restarted sender would run the command again (a repeated paid call, a
repeated side effect).

Inside a `riding` block, every envelope made (``send``, ``send_nowait``,
``stream``) carries the rider. The actor serving the envelope calls
``rider(turn_id, result, failure)`` once, synchronously in its own task, as
soon as the command's outcome is known and right before the barriers that
commit it (a store's commit of the turn's messages and journal entry), with
no checkpoint in between: what the rider queues in the store goes into the
same transaction as the turn's own rows, before the caller is answered.

* A turn calls it whatever its outcome (a failed turn commits too); an
  ``Act`` only when it succeeded (a failed ``Act`` commits nothing).
* A command that never starts (dropped by its caller, refused) is not
  served, and its rider is not called.
* A barrier failing after the rider ran makes the caller's outcome a
  ``StoreError`` the rider did not see; what it queued stays queued with the
  turn's rows, which the next commit retries.
* A rider that raises is logged; the turn's outcome stands.
* A target in another process does not call it: the sender keeps its own
  commit (and its window).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator
from typing import Any, Protocol
from uuid import UUID

__all__ = ["CommitRider", "Ridden", "carried_rider", "ride", "riding"]

log = logging.getLogger("pride.actor")

CommitRider = Callable[[UUID | None, Any, BaseException | None], None]
"""``rider(turn_id, result, failure)``: ``failure`` is what the caller would
get (None on success, then ``result`` is the command's result)."""

_rider: contextvars.ContextVar[CommitRider | None] = contextvars.ContextVar(
    "pride_commit_rider", default=None
)


@contextlib.contextmanager
def riding(rider: CommitRider | None) -> Iterator[None]:
    """Envelopes made inside the block carry ``rider`` (None: none)."""
    token = _rider.set(rider)
    try:
        yield
    finally:
        _rider.reset(token)


carried_rider: Callable[[], CommitRider | None] = _rider.get
"""The rider a `riding` block set for the calling task, if any (the context
variable's own ``get``: asked for every envelope made, so no Python call around it)."""


class Ridden(Protocol):
    """An envelope as `ride` sees it (a [`Reply`][pride.Reply] is one)."""

    rider: CommitRider | None
    turn_id: UUID | None


def ride(reply: Ridden, result: Any, failure: BaseException | None) -> None:
    """For the actor: call ``reply``'s rider, if it has one, once (see the module docstring)."""
    rider = reply.rider
    if rider is None:
        return
    reply.rider = None
    try:
        rider(reply.turn_id, result, failure)
    except Exception:
        log.exception("the commit rider of %r failed; the outcome stands", reply)
