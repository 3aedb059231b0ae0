"""Out-of-band loop control (ADR-0018 D3): ``Branch.control`` and ``Branch.poll_control``.

A controller (an observer callback, a UI, another task) writes a
[`LoopDirective`][pride.LoopDirective] into the one active turn of a branch;
the turn's loops read it at their next check (`TurnScope.check_control`).
Nothing is ever queued: outside an active turn (none running, or it is
finalising) a directive is refused, and the last write before a check wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from .turn import LoopControl, LoopDirective, TurnExecutionContext

if TYPE_CHECKING:
    from .branch import Branch

__all__ = ["control", "poll_control"]


def control(
    branch: Branch, directive: Any, *, reason: str | None = None, turn_id: UUID | None = None
) -> bool:
    """Write a loop directive into the active turn (ADR-0018 D3); never queues.

    Returns False, storing nothing, when no turn is active (or it is
    finalising) or ``turn_id`` names another turn. Last write wins.

    Raises:
        TypeError: ``directive`` is not a LoopDirective, or ``turn_id`` not a UUID.
    """
    if not isinstance(directive, LoopDirective):
        raise TypeError(f"directive must be a LoopDirective, got {type(directive).__name__}")
    context = _addressed_turn(branch, turn_id)
    if context is None:
        return False
    context.control = LoopControl(directive, reason)
    return True


def poll_control(branch: Branch, *, turn_id: UUID | None = None) -> LoopControl | None:
    """Take the active turn's pending directive (clearing it), if any."""
    context = _addressed_turn(branch, turn_id)
    if context is None:
        return None
    pending, context.control = context.control, None
    return pending


def _addressed_turn(branch: Branch, turn_id: UUID | None) -> TurnExecutionContext | None:
    if turn_id is not None and not isinstance(turn_id, UUID):
        raise TypeError(f"turn_id must be a UUID, got {type(turn_id).__name__}")
    state = branch.actor.turn
    context = state.context if state is not None else None
    if context is None or context.phase != "active":
        return None
    if turn_id is not None and turn_id != context.turn_id:
        return None
    return context
