"""A session's waiting turns: those it resumes after a restart, and those
stopped for approval until somebody decides.

The component behind [`Session.on_resume`][pride.supervisors.session.Session.on_resume],
[`Session.resolve`][pride.supervisors.session.Session.resolve] and
[`Session.suspended_turns`][pride.supervisors.session.Session.suspended_turns].
A turn is found by its id in the turn journals of the tree's branches
(`pride.actors.journal`), so a turn restored from a store by another process
is found the same way; continuing it is an ordinary ``Resume`` work command
sent to its branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

import attrs

from ..actors import Branch, Reply, ask
from ..errors import UnknownTurn
from ..messages import Decision, PendingCall, Resume

if TYPE_CHECKING:
    from ._membership import Membership

__all__ = ["Approvals", "SuspendedTurn"]


@attrs.frozen
class SuspendedTurn:
    """A turn waiting for approval (see
    [`Session.suspended_turns`][pride.supervisors.session.Session.suspended_turns]).

    Attributes:
        branch_name: the member it belongs to.
        turn_id: the turn (what ``resolve`` takes).
        pending: the calls it waits on (``call_id``, ``function``, ``arguments``).
    """

    branch_name: str
    turn_id: UUID
    pending: tuple[PendingCall, ...]


class Approvals:
    """The waiting turns of one session's tree (see the module docstring).

    Args:
        members: the session's membership (its tree's branches, and where
            resume handlers are called).
    """

    __slots__ = ("_members",)

    def __init__(self, members: Membership) -> None:
        self._members = members

    def on_resume(self, handler: Callable[[Reply], Any]) -> Callable[[Reply], Any]:
        """Call ``handler(reply)`` for each turn resumed (or abandoned) after a restart.

        Raises:
            TypeError: ``handler`` is not callable.
        """
        if not callable(handler):
            raise TypeError(f"on_resume needs a callable, got {handler!r}")
        self._members.resume_handlers.append(handler)
        return handler

    async def resolve(self, turn_id: UUID | str, decisions: Mapping[str, Decision]) -> Any:
        """Send the turn's branch a ``Resume`` with ``decisions``; return the turn's result.

        Raises:
            UnknownTurn: no branch of the tree holds a waiting turn with that id
                (or it is not a turn id at all); and whatever the turn raises.
        """
        identity = turn_id if isinstance(turn_id, UUID) else _turn_uuid(turn_id)
        branch = self._holder_of(identity)
        if branch is None:
            raise UnknownTurn(identity, f"session {self._members.name!r} or its tree")
        return await ask(branch, Resume(identity, dict(decisions)))

    def suspended(self) -> list[SuspendedTurn]:
        """The turns of the tree's branches waiting for approval, in member order."""
        found = []
        for branch in self._members.tree_branches():
            journal = branch.actor.journal
            if journal is None:
                continue
            for waiting in journal.waiting.values():
                if waiting.status == "suspended":
                    found.append(SuspendedTurn(branch.name, waiting.turn_id, waiting.pending()))
        return found

    def _holder_of(self, turn_id: UUID) -> Branch | None:
        for branch in self._members.tree_branches():
            journal = branch.actor.journal
            if journal is not None and turn_id in journal.waiting:
                return branch
        return None


def _turn_uuid(turn_id: Any) -> UUID:
    try:
        return UUID(str(turn_id))
    except ValueError:
        raise UnknownTurn(turn_id, "(not a turn id)") from None
