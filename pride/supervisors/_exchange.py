"""A session's exchange: work sent to its members, the target resolved in its tree.

``session.send``, ``session.ask`` and ``session.run_operation``, bound onto
[`Session`][pride.supervisors.session.Session] as its methods (each function
here takes the session first). A target is a Branch (or another
[`Target`][pride.Target]), a `BranchRef`, or a name or id, found nearest
first: this session's branches, its child sessions', then each parent's.
Everything after the resolution is the public send API's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..actors import Reply, Target, ask as ask_target, send as send_to
from ..errors import UnknownBranch
from ..messages import Call, Command

if TYPE_CHECKING:
    from ._membership import Membership

__all__ = ["ExchangeSession", "ask", "run_operation", "send"]


class ExchangeSession(Protocol):
    """What the exchange needs of a session (a [`Session`][pride.Session] is one)."""

    name: str

    @property
    def _members(self) -> Membership: ...


async def send(
    session: ExchangeSession, target: Any, command: Command, *, tag: str | int | None = None
) -> Reply:
    """[`pride.send`][pride.send] with ``target`` (a Branch, BranchRef, name or id) resolved
    here (``tag`` labels the envelope, see [`pride.send`][pride.send])."""
    return await send_to(session._members.target(target), command, tag=tag)


async def ask(
    session: ExchangeSession, target: Any, command: Command, timeout: float | None = None
) -> Any:
    """[`pride.ask`][pride.ask] with ``target`` resolved here (names and ids of this tree).

    Raises:
        UnknownBranch: no such branch; BranchClosed: it has stopped; and
            whatever [`pride.ask`][pride.ask] raises.
    """
    return await ask_target(session._members.target(target), command, timeout)


async def run_operation(
    session: ExchangeSession, name: str, *, branch: Any = None, **kwargs: Any
) -> Any:
    """Run the registered operation ``name`` as a turn of a member; return its result.

    Args:
        name: the operation (looked up attribute-first on the branch).
        branch: the member (Branch, name or id); default: the first spawned one.
        **kwargs: the operation's keyword arguments.

    Raises:
        UnknownBranch: no such member, or the session has no branches.
        UnknownOperation: nothing has that name.
    """
    if branch is None:
        first = session._members.supervisor.children.first_branch()
        if first is None:
            raise UnknownBranch("<first member>", f"session {session.name!r} (no branches)")
        target: Target = first
    else:
        target = session._members.target(branch)
    return await ask_target(target, Call(name, **kwargs))
