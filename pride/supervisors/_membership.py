"""Membership: who belongs to a session, how it is wired in, and how names resolve.

Membership is exclusive across the process: a branch (or child session, or
service) belongs to at most one session, claimed before any await so two
concurrent includes cannot both win, and checked for a whole batch before
anything changes (the reference system's #1695). Wiring travels as
priority-lane ``Attach``/``Detach`` messages, applied by the branch between
turns; when no actor is serving (a stopped member) it is applied directly,
which is between turns too.

A session holds one [`Membership`][pride.supervisors._membership.Membership]
beside its supervisor; a child session's membership is linked to its
parent's, so names resolve through the whole tree.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

import trio

from ..actors import BranchRef, send, send_nowait
from ..actors.target import Target, is_target
from ..actors.waits import serving_branch
from ..actors.wiring import detach
from ..branch import Branch, live_branch
from ..budget.accounts import Account
from ..durable import Durability
from ..errors import MembershipError, ReentrancyError, UnknownBranch
from ..messages import Attach, Detach, Stop
from ._child import Child, Member
from ._resumes import hand_over
from ._roster import Roster
from ._service import Service
from ._supervisor import Supervisor
from .strategy import RestartType

if TYPE_CHECKING:
    from ..durable import Persistence
    from ..memory import MemoryStore
    from ..operations.registry import OperationManager
    from ._virtual import VirtualRef, Virtuals
    from .hooks import HookBus
    from .observer import Observer

__all__ = ["Membership"]

log = logging.getLogger("pride.session")

# Which session's membership owns each branch, child session or service.
_owners: weakref.WeakKeyDictionary[Any, Membership] = weakref.WeakKeyDictionary()


class Membership:
    """Who belongs to one session, and the wiring that makes them members.

    Args:
        owner: the session (its id and name go into ``Attach``).
        supervisor: the session's supervisor, which runs the members.
        observer: the observer attached to every member.
        hooks: the hook bus attached to every member.
        operations: the operation registry shared with every member.
        memory: returns the memory default offered to members.
        grace: the session's shutdown grace (a parent stopping it uses it).
        account: the session's usage, against its budget (members' usage counts here).
    """

    def __init__(
        self,
        owner: Any,
        supervisor: Supervisor,
        *,
        observer: Observer,
        hooks: HookBus,
        operations: OperationManager,
        memory: Callable[[], MemoryStore],
        grace: float,
        account: Account,
    ) -> None:
        self.owner = owner
        self.supervisor = supervisor
        self.observer = observer
        self.hooks = hooks
        self.operations = operations
        self.memory = memory
        self.grace = grace
        self.account = account
        self.parent: Membership | None = None
        self.persistence: Persistence | None = None  # the branch store wiring, if any
        self.virtuals: Virtuals | None = None  # kinds of virtual branches, once registered
        self.closed = False  # finished for good: members released
        self.restarts_below = 0  # restart events of child sessions already released
        self.resume_handlers: list[Callable[[Any], Any]] = []  # see Session.on_resume
        # Resumed turns of flow nodes, by envelope tag, until resume_flow takes them.
        self.flow_turns: dict[str, Any] = {}
        self.flow_runs: set[UUID] = set()  # ids of its flow runs in progress (FlowHost.running)
        self._joining: set[Branch] = set()  # branches an include is adding right now
        self._subtrees: dict[Any, Membership] = {}  # child session -> its membership

    @property
    def name(self) -> str:
        """The session's name."""
        return self.supervisor.name

    @property
    def _children(self) -> Roster:
        return self.supervisor.children

    # ------------------------------------------------------------ who belongs

    @property
    def branches(self) -> tuple[Branch, ...]:
        """Member branches, in start order."""
        return tuple(c.actor for c in self._children if isinstance(c.actor, Branch))

    @property
    def sessions(self) -> tuple[Any, ...]:
        """Child sessions, in start order."""
        return tuple(c.actor for c in self._children if c.actor in self._subtrees)

    @property
    def services(self) -> tuple[Service, ...]:
        """Member services (MCP servers), in start order."""
        return tuple(
            c.runner
            for c in self._children
            if c.runner is not None and c.actor not in self._subtrees
        )

    def tree_branches(self) -> list[Branch]:
        """The member branches of this session and of every session below it."""
        found = list(self.branches)
        for session in self._children.in_start_order(self._subtrees):
            found.extend(self._subtrees[session].tree_branches())
        return found

    def subtree(self, session: Any) -> Membership | None:
        """The membership of ``session``, if it is a child session of this one."""
        return self._subtrees.get(session)

    def restarts(self) -> int:
        """Restart events of this session and every session below it."""
        below = sum(sub.restarts() for sub in self._subtrees.values())
        return self.supervisor.intensity.total + self.restarts_below + below

    def get_branch(self, name_or_id: str | UUID) -> Branch:
        """The member branch with this id (first) or name.

        Raises:
            UnknownBranch: no member branch has it (a ``LookupError``).
        """
        found = self._children.branch(name_or_id)
        if found is None:
            raise UnknownBranch(name_or_id, f"session {self.name!r}")
        return found

    def resolve_name(self, name_or_id: str | UUID, *, address: bool = False) -> Branch | VirtualRef:
        """Find a branch for a send from a member's turn: nearest first.

        This session's branches, then those of its child sessions (depth
        first, in start order), then the same from each parent upwards.
        Stopped members resolve too (sending to them raises BranchClosed).
        A ``kind/key`` name of a virtual kind registered on the way resolves
        to its live branch, else to its `VirtualRef` (a target that activates
        it on delivery); with ``address``, to its `VirtualRef` even when it is
        live: for a send that may come long after (a flow's node), when
        passivation may have stopped the live branch.

        Raises:
            UnknownBranch: no branch of the tree has that name or id.
        """
        members: Membership | None = self
        skip: Membership | None = None
        while members is not None:
            found = members._find_in_tree(name_or_id, skip, address)
            if found is not None:
                return found
            skip, members = members, members.parent
        raise UnknownBranch(name_or_id, f"session {self.name!r} or its tree")

    def target(self, target: Any, *, address: bool = False) -> Target:
        """What ``target`` (a Branch or other Target, a BranchRef, a name or id) designates here
        (``address``: a virtual branch, by its name or by its Branch object, gives its
        `VirtualRef`, as `resolve_name`).

        Raises:
            UnknownBranch: no such branch in this tree (or, for a BranchRef, the process).
            TypeError: ``target`` is none of those.
        """
        if isinstance(target, Branch):
            return self._address_of(target) if address else target
        if isinstance(target, BranchRef):
            found = self._find_in_tree(target.id, None) or live_branch(target.id)
            if found is None:
                raise UnknownBranch(target.name or target.id, f"session {self.name!r}")
            return found
        if isinstance(target, str | UUID):
            return self.resolve_name(target, address=address)
        if is_target(target):  # a target of its own (a branch on another process)
            return target  # type: ignore[no-any-return]
        raise TypeError(
            "target must be a Branch (or another pride.Target), a BranchRef, a name or an id, "
            f"got {type(target).__name__}"
        )

    def _address_of(self, branch: Branch) -> Target:
        """``branch``'s `VirtualRef` when it is (or was) the live branch of a virtual
        name of this tree, else ``branch``: one flow's nodes given the object and the
        name then hold one address (one send order), and a send after passivation
        activates the branch instead of meeting the stopped object."""
        name = branch.name
        if name is None or "/" not in name:  # a virtual branch's name is "kind/key"
            return branch
        try:
            found = self.resolve_name(name, address=True)
        except UnknownBranch:
            return branch
        if found is not branch and not isinstance(found, Branch) and found.id == branch.id:
            return found
        return branch

    def rename(self, branch: Branch, name: str) -> None:
        """Re-index member ``branch``, about to be called ``name`` (``Branch.name`` asks).

        Raises:
            ValueError: another member has that name, or the branch is stored
                under its name (`Persistence.check_rename`).
        """
        if self.persistence is not None:
            self.persistence.check_rename(branch, name)
        holder = self._children.named(name)
        if holder is not None and holder.actor is not branch:
            raise ValueError(f"session {self.name!r} already has a member named {name!r}")
        self._children.rename(branch, name)

    # ------------------------------------------------------------ lifecycle

    def check_startable(self) -> None:
        """Refuse to start a session twice, or one that has finished.

        Raises:
            RuntimeError: it has finished, or it is running (here or under a parent).
        """
        if self.closed:
            raise RuntimeError(f"session {self.name!r} has finished; a session runs once")
        if self.supervisor.nursery is not None or self.parent is not None:
            raise RuntimeError(f"session {self.name!r} is already running")

    def require_running(self) -> None:
        """Refuse work while the session is not running.

        Raises:
            RuntimeError: the session is not running.
        """
        if not self.supervisor.running or self.supervisor.nursery is None:
            raise RuntimeError(
                f"session {self.name!r} is not running: use `async with Session(...) as session:`"
            )

    def close_for_good(self) -> None:
        """The session is over: release every member (recursively)."""
        if self.closed:
            return
        self.closed = True
        for child in self._children:
            if child.state != "stopped":
                log.error("session %r closed with %r still %s", self.name, child.name, child.state)
            self.release(child)

    # ------------------------------------------------------------ joining

    async def adopt(
        self,
        branches: list[Any],
        restart: RestartType,
        durability: Any = None,
        *,
        activity: Callable[[], None] | None = None,
    ) -> bool:
        """Make ``branches`` members: all are checked first, then each is started
        (or taken over) and attached. With ``activity``, the one branch is a
        virtual branch being activated (`pride.supervisors._virtual`): its
        commit barrier calls ``activity`` at the end of each turn.

        Returns whether the store held the conversation of the last one.

        Raises:
            TypeError: one is not a Branch, or ``durability`` is not a Durability.
            MembershipError: one belongs to another session.
            ValueError: a name is taken (by a member, or by a virtual kind).
            RuntimeError: the session is not running, or one is being added already.
        """
        if durability is not None and not isinstance(durability, Durability):
            raise TypeError(
                f"durability must be a pride.Durability, got {type(durability).__name__}"
            )
        self.require_running()
        for branch in branches:
            if not isinstance(branch, Branch):
                raise TypeError(f"expected a Branch, got {type(branch).__name__}")
            self._check_claim(branch)
            if branch in self._joining:
                raise RuntimeError(f"branch {branch.name!r} is already being added")
        # The name index, not a set rebuilt per spawn: N spawns cost O(N) (see _roster.py).
        taken = {joining.name for joining in self._joining}
        virtuals = self.virtuals if activity is None else None
        for branch in branches:
            holder = self._children.named(branch.name)
            if branch.name in taken or (holder is not None and holder.actor not in branches):
                raise ValueError(
                    f"session {self.name!r} already has a member named {branch.name!r}"
                )
            if virtuals is not None and virtuals.claims(branch.name):
                raise ValueError(f"{branch.name!r} is a virtual branch's name: its factory's")
            taken.add(branch.name)
        for branch in branches:  # claimed before any await: concurrent includes cannot both win
            _owners[branch] = self
        self._joining.update(branches)
        stored = False
        try:
            for index, branch in enumerate(branches):
                try:
                    stored = await self._admit(branch, restart, durability, activity)
                except BaseException:
                    for left in branches[index:]:
                        if self._children.of(left) is None:
                            _owners.pop(left, None)
                    raise
        finally:
            self._joining.difference_update(branches)
        return stored

    async def _admit(
        self,
        branch: Branch,
        restart: RestartType,
        durability: Any = None,
        activity: Callable[[], None] | None = None,
    ) -> bool:
        child = self._children.of(branch)
        supervisor = self.supervisor
        wired = stored = taken_over = False
        if child is None or child.state == "stopped":
            if branch.actor.serving:
                # Refused before the takeover, a standalone branch keeps serving where it is.
                supervisor.check_accepting(branch.name)
                # Serving elsewhere (standalone): take the actor over between turns.
                await branch.actor.suspend(branch, None).result()
                taken_over = True
            async with supervisor.lock:
                if child is None:
                    if self.persistence is not None:
                        stored = await self.persistence.restore_or_register(
                            branch, durability, activity=activity
                        )
                        wired = True
                    child = Child(branch, restart)
                    self._children.append(child)
                child.restart = restart
                try:
                    await supervisor.start(child, restart=False)
                except RuntimeError:
                    if taken_over and child.state == "stopped":
                        # The session began stopping during the takeover: nobody serves the
                        # branch now; close its mailbox, or its senders would wait for good.
                        log.warning("branch %r was taken over by a stopping session", branch.name)
                        branch.actor.close(branch, f"session {self.name!r} stopped taking it in")
                    raise
        elif child.state != "running":
            raise RuntimeError(f"branch {branch.name!r} is being stopped by session {self.name!r}")
        attach = Attach(
            owner_id=supervisor.id,
            owner_name=self.name,
            observer=self.observer,
            hooks=self.hooks,
            operations=self.operations,
            memory=self.memory(),  # a default: the branch keeps a store it claimed
            directory=self,
            account=self.account,
        )
        reply = await send(branch, attach)
        await reply.result()
        if wired and self.persistence is not None:
            # Interrupted turns first: before spawn returns, nothing else can be queued.
            for resumed in self.persistence.recover(branch):
                hand_over(resumed, self.resume_handlers, self.flow_turns)
        return stored

    async def adopt_session(
        self, session: Member, members: Membership, restart: RestartType
    ) -> None:
        """Start ``session`` (whose membership is ``members``) as a child session.

        Raises:
            ValueError: it is this session, or its name is taken.
            MembershipError: it belongs to another session.
            RuntimeError: this session is not running, or the child cannot start.
        """
        self.require_running()
        if members is self:
            raise ValueError("a session cannot supervise itself")
        existing = self._children.of(session)
        if existing is None:
            self._check_claim(session)
            members.check_startable()
            if self._children.named(session.name) is not None:
                raise ValueError(
                    f"session {self.name!r} already has a member named {session.name!r}"
                )
        elif existing.state != "stopped":
            return
        _owners[session] = self
        members.parent = self
        members.account.parent = self.account  # its usage counts here too
        members.account.begin(trio.current_time())
        members.observer._forward = self.observer  # its signals go up the tree
        self._subtrees[session] = members
        async with self.supervisor.lock:
            if existing is None:
                existing = Child(session, restart, runner=members.supervisor)
                self._children.append(existing)
            existing.restart = restart
            await self.supervisor.start(existing, restart=False)

    async def adopt_service(self, service: Service, restart: RestartType) -> None:
        """Start ``service`` (an MCP server, say) as a supervised child.

        Raises:
            ValueError: its name is taken.
            MembershipError: it belongs to another session.
            RuntimeError: this session is not running.
            Exception: it failed to start (it does not become a member).
        """
        self.require_running()
        existing = self._children.of(service)
        if existing is None:
            self._check_claim(service)
            if self._children.named(service.name) is not None:
                raise ValueError(
                    f"session {self.name!r} already has a member named {service.name!r}"
                )
        elif existing.state != "stopped":
            return
        _owners[service] = self
        async with self.supervisor.lock:
            if existing is None:
                existing = Child(service, restart, runner=service)
                self._children.append(existing)
            existing.restart = restart
            try:
                await self.supervisor.start(existing, restart=False)
            except BaseException:
                # A service that never started is not a member (nothing to restart or stop).
                if existing.run is not None and not existing.run.started:
                    self._children.remove(existing)
                    _owners.pop(service, None)
                raise

    # ------------------------------------------------------------ leaving

    async def remove(self, member: Any) -> None:
        """Stop ``member`` (detached first, if a branch) and take it out; returns when done.

        Raises:
            UnknownBranch: it is not a member.
            ReentrancyError: called from the member's own turn.
        """
        child = self._child(member)
        if serving_branch() is child.actor:  # from its own turn: it would wait on itself
            raise ReentrancyError([child.name, child.name])
        async with self.supervisor.lock:
            if child.state == "stopped":
                self.release(child)
                if child in self._children:
                    self._children.remove(child)
                return
            if child.state == "running":
                child.state = "leaving"
                child.gone = trio.Event()
                actor = child.actor
                sub = self._subtrees.get(actor)
                if isinstance(actor, Branch):
                    send_nowait(actor, Detach())
                    send_nowait(actor, Stop())
                elif sub is not None:
                    sub.supervisor.request_stop(trio.current_time() + sub.grace)
                else:
                    assert child.runner is not None
                    child.runner.request_stop(trio.current_time() + self.grace)
        if child.gone is not None:
            await child.gone.wait()

    def release(self, child: Child) -> None:
        """Undo the membership of a stopped child (it is not running)."""
        actor = child.actor
        if _owners.get(actor) is self:
            del _owners[actor]
        if isinstance(actor, Branch):
            detach(actor)  # no actor is serving: applying it directly is between turns
            if self.persistence is not None:
                self.persistence.unwire(actor)
            return
        sub = self._subtrees.pop(actor, None)
        if sub is not None:
            sub.parent = None
            sub.account.parent = None
            sub.observer._forward = None
            sub.close_for_good()
            if not self.closed:  # it leaves the list: keep its restarts in the count
                self.restarts_below += sub.restarts()

    # ------------------------------------------------------------ lookups

    def _check_claim(self, member: Any) -> None:
        owner = _owners.get(member)
        if owner is not None and owner is not self:
            raise MembershipError(
                f"{member.name!r} belongs to session {owner.name!r}; remove it there first"
            )

    def _child(self, member: Any) -> Child:
        found = self._children.find(member)
        if found is None:
            raise UnknownBranch(getattr(member, "name", member), f"session {self.name!r}")
        return found

    def _find_in_tree(
        self, ref: Any, skip: Membership | None, address: bool = False
    ) -> Branch | VirtualRef | None:
        virtuals = self.virtuals  # a name of a kind here: its live branch, or its address
        if virtuals is not None and isinstance(ref, str):
            routed = virtuals.ref(ref) if address else virtuals.route(ref)
            if routed is not None:
                return routed
        found: Branch | VirtualRef | None = self._children.branch(ref)
        if found is None:  # then the child sessions', depth first, in start order
            for session in self._children.in_start_order(self._subtrees):
                sub = self._subtrees[session]
                found = None if sub is skip else sub._find_in_tree(ref, None, address)
                if found is not None:
                    break
        return found
