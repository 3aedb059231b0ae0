"""A session's waiting turns: those it resumes after a restart, and those
stopped for approval until somebody decides.

What [`Session`][pride.supervisors.session.Session]'s ``on_resume``,
``resolve`` and ``suspended_turns`` do (each function here takes the session's
tree of members first, as the small protocol `WaitingTree` says; the methods
document the contract).
A turn is found by its id in the turn journals of the tree's branches
(`pride.durable.journal`), so a turn restored from a store by another process
is found the same way; a turn of a passivated virtual branch is found in the
store's journal, and its branch activated. Continuing it is an ordinary
``Resume`` work command sent to its branch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

import attrs

from ..actors import Reply, ask
from ..branch import Branch
from ..errors import UnknownTurn
from ..messages import Decision, PendingCall, Resume
from .persistence import Persistence, journal_of

__all__ = [
    "SuspendedTurn",
    "VirtualKinds",
    "WaitingTree",
    "on_resume",
    "resolve",
    "suspended_turns",
]


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


class VirtualKinds(Protocol):
    """A session's virtual kinds, as far as a waiting turn needs them."""

    def claims(self, name: str) -> bool:
        """Whether ``name`` is of a kind registered here."""
        ...

    async def activate(self, name: str) -> Branch:
        """The live branch of ``name``, activated if it is passive."""
        ...


class WaitingTree(Protocol):
    """What the waiting-turn verbs need of a session's tree of members (the
    session's membership is one)."""

    resume_handlers: list[Callable[[Any], Any]]

    @property
    def name(self) -> str: ...

    @property
    def persistence(self) -> Persistence | None: ...

    @property
    def virtuals(self) -> VirtualKinds | None: ...

    def tree_branches(self) -> list[Branch]: ...


def on_resume(members: WaitingTree, handler: Callable[[Reply], Any]) -> Callable[[Reply], Any]:
    """[`Session.on_resume`][pride.supervisors.session.Session.on_resume]."""
    if not callable(handler):
        raise TypeError(f"on_resume needs a callable, got {handler!r}")
    members.resume_handlers.append(handler)
    return handler


async def resolve(
    members: WaitingTree,
    turn_id: UUID | str,
    decisions: Mapping[str, Decision] | None = None,
) -> Any:
    """[`Session.resolve`][pride.supervisors.session.Session.resolve]."""
    identity = turn_id if isinstance(turn_id, UUID) else _turn_uuid(turn_id)
    branch = _holder_of(members, identity) or await _activate_holder(members, identity)
    if branch is None:
        raise UnknownTurn(identity, f"session {members.name!r} or its tree")
    return await ask(branch, Resume(identity, dict(decisions or {})))


async def _activate_holder(members: WaitingTree, turn_id: UUID) -> Branch | None:
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


def suspended_turns(members: WaitingTree) -> list[SuspendedTurn]:
    """[`Session.suspended_turns`][pride.supervisors.session.Session.suspended_turns]."""
    found = []
    for branch in members.tree_branches():
        journal = journal_of(branch)
        if journal is None:
            continue
        for waiting in journal.waiting.values():
            if waiting.status == "suspended":
                found.append(SuspendedTurn(branch.name, waiting.turn_id, waiting.pending()))
    return found


def _holder_of(members: WaitingTree, turn_id: UUID) -> Branch | None:
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
