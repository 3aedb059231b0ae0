"""Membership: who belongs to a session, how it is wired in, and how names resolve.

Membership is exclusive across the process: a branch (or child session)
belongs to at most one session, claimed before any await so two concurrent
includes cannot both win, and checked for a whole batch before anything
changes (the reference system's #1695). Wiring travels as priority-lane
``Attach``/``Detach`` messages, applied by the branch between turns; when
no actor is serving (a stopped member) it is applied directly, which is
between turns too.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any
from uuid import UUID

import trio

from ..actors import Branch, BranchRef, send, send_nowait
from ..actors.branch import live_branch
from ..actors.budget import Account
from ..actors.target import Target, is_target
from ..actors.waits import serving_branch
from ..actors.wiring import detach
from ..errors import MembershipError, ReentrancyError, UnknownBranch
from ..messages import Attach, Detach, Stop
from ._child import Child
from ._service import Service
from ._supervisor import Supervisor
from .strategy import RestartType

if TYPE_CHECKING:
    from ..operations.registry import OperationManager
    from ._persistence import Persistence
    from .session import Session, SessionStatistics

log = logging.getLogger("pride.session")

# Which session owns each branch or child session.
_owners: weakref.WeakKeyDictionary[Any, Membership] = weakref.WeakKeyDictionary()


class Membership(Supervisor):
    """The membership half of a Session (see the module docstring)."""

    grace: float
    _operations: OperationManager
    _parent: Membership | None
    _closed: bool
    _restarts_below: int
    _joining: set[Branch]  # branches an include is adding right now
    _persistence: Persistence | None  # the branch store wiring, when the session has a store
    _account: Account  # the session's usage, against its budget
    _resume_handlers: list[Any]  # called with the envelope of each turn resumed on restore

    if TYPE_CHECKING:

        @property
        def memory(self) -> Any: ...

        def statistics(self) -> SessionStatistics: ...

    @property
    def branches(self) -> tuple[Branch, ...]:
        """Member branches, in start order."""
        return tuple(c.actor for c in self._children if isinstance(c.actor, Branch))

    @property
    def sessions(self) -> tuple[Session, ...]:
        """Child sessions, in start order."""
        return tuple(c.actor for c in self._children if isinstance(c.actor, Membership))

    @property
    def services(self) -> tuple[Service, ...]:
        """Member services (MCP servers), in start order."""
        return tuple(
            c.actor for c in self._children if not isinstance(c.actor, Branch | Membership)
        )

    def get_branch(self, name_or_id: str | UUID) -> Branch:
        """The member branch with this id (first) or name.

        Raises:
            UnknownBranch: no member branch has it (a ``LookupError``).
        """
        found = self._find(name_or_id)
        if found is None:
            raise UnknownBranch(name_or_id, f"session {self.name!r}")
        return found

    def resolve_name(self, name_or_id: str | UUID) -> Branch:
        """Find a branch for a send from a member's turn: nearest first.

        This session's branches, then those of its child sessions (depth
        first, in start order), then the same from each parent upwards.
        Stopped members resolve too (sending to them raises BranchClosed).

        Raises:
            UnknownBranch: no branch of the tree has that name or id.
        """
        session: Membership | None = self
        skip: Membership | None = None
        while session is not None:
            found = session._find_in_tree(name_or_id, skip)
            if found is not None:
                return found
            skip, session = session, session._parent
        raise UnknownBranch(name_or_id, f"session {self.name!r} or its tree")

    def _check_startable(self) -> None:
        if self._closed:
            raise RuntimeError(f"session {self.name!r} has finished; a session runs once")
        if self._nursery is not None or self._parent is not None:
            raise RuntimeError(f"session {self.name!r} is already running")

    def _require_running(self) -> trio.Nursery:
        if not self.running or self._nursery is None:
            raise RuntimeError(
                f"session {self.name!r} is not running: use `async with Session(...) as session:`"
            )
        return self._nursery

    async def _remove(self, member: Any) -> None:
        child = self._child(member)
        if _in_turn_of(child.actor):
            raise ReentrancyError([child.name, child.name])
        async with self._lock:
            if child.state == "stopped":
                self._release(child)
                if child in self._children:
                    self._children.remove(child)
                return
            if child.state == "running":
                child.state = "leaving"
                child.gone = trio.Event()
                actor = child.actor
                if isinstance(actor, Branch):
                    send_nowait(actor, Detach())
                    send_nowait(actor, Stop())
                elif isinstance(actor, Membership):
                    actor._request_stop(trio.current_time() + actor.grace)
                else:
                    actor.request_stop(trio.current_time() + self.grace)
        if child.gone is not None:
            await child.gone.wait()

    async def _adopt(
        self, branches: list[Any], restart: RestartType, durability: Any = None
    ) -> None:
        self._require_running()
        for branch in branches:
            if not isinstance(branch, Branch):
                raise TypeError(f"expected a Branch, got {type(branch).__name__}")
            self._check_claim(branch)
            if branch in self._joining:
                raise RuntimeError(f"branch {branch.name!r} is already being added")
        taken = {c.name for c in self._children if c.actor not in branches}
        taken.update(joining.name for joining in self._joining)
        for branch in branches:
            if branch.name in taken:
                raise ValueError(
                    f"session {self.name!r} already has a member named {branch.name!r}"
                )
            taken.add(branch.name)
        for branch in branches:  # claimed before any await: concurrent includes cannot both win
            _owners[branch] = self
        self._joining.update(branches)
        try:
            for index, branch in enumerate(branches):
                try:
                    await self._admit(branch, restart, durability)
                except BaseException:
                    for left in branches[index:]:
                        if self._member_of(left) is None:
                            _owners.pop(left, None)
                    raise
        finally:
            self._joining.difference_update(branches)

    async def _admit(self, branch: Branch, restart: RestartType, durability: Any = None) -> None:
        child = self._member_of(branch)
        restored = False
        if child is None or child.state == "stopped":
            if branch.actor.serving:
                # Serving elsewhere (standalone): take the actor over between turns.
                await branch.actor.suspend(None).result()
            async with self._lock:
                if child is None:
                    if self._persistence is not None:
                        await self._persistence.restore_or_register(branch, durability)
                        restored = True
                    child = Child(branch, restart)
                    self._children.append(child)
                child.restart = restart
                await self._start(child, restart=False)
        elif child.state != "running":
            raise RuntimeError(f"branch {branch.name!r} is being stopped by session {self.name!r}")
        attach = Attach(
            owner_id=self.id,
            owner_name=self.name,
            observer=self._observer,
            hooks=self.hooks,
            operations=self._operations,
            memory=self.memory,  # a default: the branch keeps a store it claimed
            directory=self,
            account=self._account,
        )
        reply = await send(branch, attach)
        await reply.result()
        if restored and self._persistence is not None:
            # Interrupted turns first: before spawn returns, nothing else can be queued.
            for resumed in self._persistence.recover(branch):
                self._resumed(resumed)

    def _resumed(self, reply: Any) -> None:
        """Hand the envelope of a resumed turn to the ``on_resume`` handlers."""
        if not self._resume_handlers:
            log.info(
                "branch %r: turn resumed with no on_resume handler; its result goes to "
                "observers only",
                reply.branch.name,
            )
        for handler in list(self._resume_handlers):
            try:
                handler(reply)
            except Exception:
                log.exception("on_resume handler %r failed", handler)

    async def _adopt_session(self, child_session: Session, restart: RestartType) -> None:
        self._require_running()
        if child_session is self:
            raise ValueError("a session cannot supervise itself")
        existing = self._member_of(child_session)
        if existing is None:
            self._check_claim(child_session)
            child_session._check_startable()
            if any(c.name == child_session.name for c in self._children):
                raise ValueError(
                    f"session {self.name!r} already has a member named {child_session.name!r}"
                )
        elif existing.state != "stopped":
            return
        _owners[child_session] = self
        child_session._parent = self
        child_session._account.parent = self._account  # its usage counts here too
        child_session._account.begin(trio.current_time())
        child_session._observer._forward = self._observer
        async with self._lock:
            if existing is None:
                existing = Child(child_session, restart)
                self._children.append(existing)
            existing.restart = restart
            await self._start(existing, restart=False)

    async def _adopt_service(self, service: Service, restart: RestartType) -> None:
        self._require_running()
        existing = self._member_of(service)
        if existing is None:
            self._check_claim(service)
            if any(c.name == service.name for c in self._children):
                raise ValueError(
                    f"session {self.name!r} already has a member named {service.name!r}"
                )
        elif existing.state != "stopped":
            return
        _owners[service] = self
        async with self._lock:
            if existing is None:
                existing = Child(service, restart)
                self._children.append(existing)
            existing.restart = restart
            try:
                await self._start(existing, restart=False)
            except BaseException:
                # A service that never started is not a member (nothing to restart or stop).
                if existing.run is not None and not existing.run.started:
                    self._children.remove(existing)
                    _owners.pop(service, None)
                raise

    def _check_claim(self, member: Any) -> None:
        owner = _owners.get(member)
        if owner is not None and owner is not self:
            raise MembershipError(
                f"{member.name!r} belongs to session {owner.name!r}; remove it there first"
            )

    def _member_of(self, actor: Any) -> Child | None:
        for child in self._children:
            if child.actor is actor:
                return child
        return None

    def _child(self, member: Any) -> Child:
        if isinstance(member, Branch | Membership | Service):
            found = self._member_of(member)
        else:
            found = next((c for c in self._children if _matches(c.actor, member)), None)
        if found is None:
            raise UnknownBranch(getattr(member, "name", member), f"session {self.name!r}")
        return found

    def _find(self, ref: Any) -> Branch | None:
        if isinstance(ref, str):
            try:
                as_id: UUID | None = UUID(ref)
            except ValueError:
                as_id = None
        else:
            as_id = ref if isinstance(ref, UUID) else None
        branches = self.branches
        if as_id is not None:
            for branch in branches:
                if branch.id == as_id:
                    return branch
        return next((b for b in branches if b.name == ref), None)

    def _find_in_tree(self, ref: Any, skip: Membership | None) -> Branch | None:
        found = self._find(ref)
        for session in self.sessions:
            if found is not None:
                break
            if session is not skip:
                found = session._find_in_tree(ref, None)
        return found

    def _target(self, target: Any) -> Target:
        if isinstance(target, Branch):
            return target
        if isinstance(target, BranchRef):
            found = self._find_in_tree(target.id, None) or live_branch(target.id)
            if found is None:
                raise UnknownBranch(target.name or target.id, f"session {self.name!r}")
            return found
        if isinstance(target, str | UUID):
            return self.resolve_name(target)
        if is_target(target):  # a target of its own (a branch on another process)
            return target  # type: ignore[no-any-return]
        raise TypeError(
            "target must be a Branch (or another pride.Target), a BranchRef, a name or an id, "
            f"got {type(target).__name__}"
        )

    def _release(self, child: Child) -> None:
        """Undo the membership of a stopped child (it is not running)."""
        actor = child.actor
        if _owners.get(actor) is self:
            del _owners[actor]
        if isinstance(actor, Branch):
            detach(actor.actor)  # no actor is serving: applying it directly is between turns
            if self._persistence is not None:
                self._persistence.unwire(actor)
        elif isinstance(actor, Membership):
            actor._parent = None
            actor._account.parent = None
            actor._observer._forward = None
            actor._close_for_good()
            if not self._closed:  # it leaves the list: keep its restarts in the count
                self._restarts_below += actor.statistics().restarts

    def _close_for_good(self) -> None:
        """The session is over: release every member (recursively)."""
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            if child.state != "stopped":
                log.error("session %r closed with %r still %s", self.name, child.name, child.state)
            self._release(child)


def _matches(actor: Any, ref: Any) -> bool:
    if isinstance(ref, UUID):
        return bool(actor.id == ref)
    return bool(actor.name == ref or str(actor.id) == ref)


def _in_turn_of(actor: Any) -> bool:
    """True when the calling task is part of a live turn (or Act step) of ``actor``."""
    return serving_branch() is actor
