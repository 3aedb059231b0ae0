"""Out-of-band loop control: which turn a directive reaches.

A controller (an observer callback, a UI, another task) writes a
[`LoopDirective`][pride.LoopDirective] into the one active turn of a branch
([`Branch.control`][pride.branch.branch.Branch.control]); the turn's loops
read it at their next check (`TurnScope.check_control`). Nothing is ever
queued: outside an active turn (none running, or it is finalising) a
directive is refused, and the last write before a check wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol
from uuid import UUID

if TYPE_CHECKING:
    from ..actors.turn import TurnExecutionContext, TurnState

__all__ = ["addressed_turn"]


class _Running(Protocol):
    """What this module reads of an actor: its running turn, if any."""

    @property
    def turn(self) -> TurnState | None: ...


def addressed_turn(actor: _Running, turn_id: UUID | None) -> TurnExecutionContext | None:
    """The context of the actor's active turn, if ``turn_id`` is None or names it.

    None when no turn runs, when it is finalising (its phase is no longer
    ``"active"``), or when ``turn_id`` names another turn.

    Raises:
        TypeError: ``turn_id`` is not None or a UUID.
    """
    if turn_id is not None and not isinstance(turn_id, UUID):
        raise TypeError(f"turn_id must be a UUID, got {type(turn_id).__name__}")
    state = actor.turn
    context = state.context if state is not None else None
    if context is None or context.phase != "active":
        return None
    if turn_id is not None and turn_id != context.turn_id:
        return None
    return context
