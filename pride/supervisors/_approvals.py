"""A session's waiting turns: those it resumes after a restart, and those
stopped for approval until somebody decides.

What [`Session`][pride.supervisors.session.Session]'s ``on_resume``,
``resolve`` and ``suspended_turns`` do (each function here takes the session
first; the methods document the contract).
A turn is found by its id in the turn journals of the tree's branches
(`pride.durable.journal`), so a turn restored from a store by another process
is found the same way; a turn of a passivated virtual branch is found in the
store's journal, and its branch activated. Continuing it is an ordinary
``Resume`` work command sent to its branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import attrs

from ..actors import Reply, ask
from ..branch import Branch
from ..durable import journal_of
from ..errors import UnknownTurn
from ..messages import Decision, PendingCall, Resume

if TYPE_CHECKING:
    from ._membership import Membership

__all__ = ["SuspendedTurn", "WaitingSession", "on_resume", "resolve", "suspended_turns"]


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


class WaitingSession(Protocol):
    """What the waiting-turn verbs need of a session (a [`Session`][pride.Session] is one)."""

    @property
    def _members(self) -> Membership: ...


def on_resume(session: WaitingSession, handler: Callable[[Reply], Any]) -> Callable[[Reply], Any]:
    """[`Session.on_resume`][pride.supervisors.session.Session.on_resume]."""
    if not callable(handler):
        raise TypeError(f"on_resume needs a callable, got {handler!r}")
    session._members.resume_handlers.append(handler)
    return handler


async def resolve(
    session: WaitingSession,
    turn_id: UUID | str,
    decisions: Mapping[str, Decision] | None = None,
) -> Any:
    """[`Session.resolve`][pride.supervisors.session.Session.resolve]."""
    identity = turn_id if isinstance(turn_id, UUID) else _turn_uuid(turn_id)
    members = session._members
    branch = _holder_of(members, identity) or await _activate_holder(members, identity)
    if branch is None:
        raise UnknownTurn(identity, f"session {members.name!r} or its tree")
    return await ask(branch, Resume(identity, dict(decisions or {})))


async def _activate_holder(members: Membership, turn_id: UUID) -> Branch | None:
    """The branch of ``turn_id`` when it is a passivated virtual branch of this
    session: the store's journal names it, and it is activated (its journal
    then holds the turn)."""
    virtuals, persistence = members.virtuals, members.persistence
    if virtuals is None or persistence is None:
        return None
    name = await persistence.store.turn_holder(str(turn_id))
    if name is None or not virtuals.claims(name):
        return None
    branch = await virtuals.activate(name)
    journal = journal_of(branch)
    return branch if journal is not None and turn_id in journal.waiting else None


def suspended_turns(session: WaitingSession) -> list[SuspendedTurn]:
    """[`Session.suspended_turns`][pride.supervisors.session.Session.suspended_turns]."""
    found = []
    for branch in session._members.tree_branches():
        journal = journal_of(branch)
        if journal is None:
            continue
        for waiting in journal.waiting.values():
            if waiting.status == "suspended":
                found.append(SuspendedTurn(branch.name, waiting.turn_id, waiting.pending()))
    return found


def _holder_of(members: Membership, turn_id: UUID) -> Branch | None:
    for branch in members.tree_branches():
        journal = journal_of(branch)
        if journal is not None and turn_id in journal.waiting:
            return branch
    return None


def _turn_uuid(turn_id: Any) -> UUID:
    try:
        return UUID(str(turn_id))
    except ValueError:
        raise UnknownTurn(turn_id, "(not a turn id)") from None
