"""Session: a supervisor of branches (and of child sessions).

```python
async with pride.Session(name="team") as session:
    planner = await session.spawn(Branch(name="planner", chat_model=...))
    await session.spawn(Branch(name="researcher", chat_model=...))
    answer = await session.ask("planner", Chat("plan a trip"))
```

A session owns its members' actor tasks (one nursery), wires its shared
references into them with priority-lane ``Attach`` messages (observer, hooks,
operation registry, memory default, a name directory), restarts crashed
actors by its strategy ([`pride.supervisors.strategy`][pride.supervisors.strategy]), and stops
everything in reverse start order on the way out. Membership is exclusive:
a branch belongs to at most one session at a time.

A session is composed of parts it holds, each given what it needs when the
session is made: its supervisor (`pride.supervisors._supervisor`: the
children's runs, restarts and ordered stops) and its membership
(`pride.supervisors._membership`: who belongs, their wiring, name
resolution); its statistics are read from them. This module is the public
surface; as Branch binds its verbs from modules of their own, the session
binds its exchange (`_exchange`), its waiting turns (`_approvals`), its
flows (`_flows`) and its MCP door (`_service`), each one idea.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar
from uuid import UUID

import trio

from ..actors import Branch
from ..actors.budget import Account
from ..actors.journal import Durability
from ..actors.nursery import PrivateNursery
from ..actors.turn import FINALIZE_GRACE
from ..memory import InMemoryStore, MemoryStore, is_memory_store
from ..messages import (
    Budget,
    Usage,
)
from ..operations.registry import OperationManager
from ..store import BranchStore
from . import _approvals as approvals, _exchange as exchange, _flows as flows, _service as serving
from ._approvals import SuspendedTurn
from ._child import Child
from ._membership import Membership
from ._persistence import Persistence
from ._service import Service
from ._statistics import SessionStatistics, statistics_of
from ._supervisor import Supervisor
from .hooks import HookBus
from .observer import Filter, Handler, Observer
from .strategy import (
    DEFAULT_MAX_RESTARTS,
    DEFAULT_PERIOD,
    RestartIntensity,
    RestartType,
    Strategy,
    check_restart_type,
    check_strategy,
)

__all__ = ["DEFAULT_GRACE", "Session", "SessionStatistics", "SuspendedTurn"]

log = logging.getLogger("pride.session")

# Values a session hands out, defined beside the parts that make them; their
# public home is this module.
SessionStatistics.__module__ = SuspendedTurn.__module__ = __name__

DEFAULT_GRACE = 5.0
"""Seconds running turns get to finish when a session stops (OTP's shutdown timeout)."""

_Member = TypeVar("_Member", Branch, "Session", Service)


class Session:
    """A supervisor: membership, restarts, ordered shutdown, observer, hooks, operations.

    Args:
        name: a human name (default ``session-<8 hex>``); child sessions are
            resolved and reported under it.
        strategy: ``"one_for_one"``, ``"one_for_all"`` or ``"rest_for_one"``.
        max_restarts: restart events allowed within ``period`` seconds; one
            more fails the session (0: the first crash does).
        period: the intensity window, in seconds.
        grace: seconds running turns get to finish when the session stops.
        memory: the default memory store offered to members (adopted only by
            branches without one); default: an ``InMemoryStore`` made on first use.
        store: a [`BranchStore`][pride.store.BranchStore] (or a path to open one at):
            members with a stable name are restored from it when spawned and
            every recorded message is persisted, one commit per turn; each
            turn's steps are journaled, and a turn a crash interrupted is
            resumed when its branch is spawned again (docs/durability.md).
        budget: a [`Budget`][pride.Budget] for the session's whole life,
            shared by all its members and every session below it (its
            ``max_duration`` counts from the session's start); each turn's own
            budget applies beside it.
        durability: the members' journal and restart policy (a
            [`Durability`][pride.Durability]; ``spawn`` may give one per branch).

    Raises:
        ValueError: a bad strategy, ``max_restarts``, ``period`` or ``grace``.
        TypeError: ``memory`` is not a MemoryStore, or ``budget`` not a Budget.

    Use it as ``async with Session(...) as session:``; leaving the block stops
    the members (gracefully; at once if the block raised) and raises
    [`SupervisorFailed`][pride.SupervisorFailed] if the session failed. A session runs
    once; a child session is started with ``parent.spawn(child)`` or
    ``parent.spawn_session(...)`` instead.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        strategy: Strategy = "one_for_one",
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        period: float = DEFAULT_PERIOD,
        grace: float = DEFAULT_GRACE,
        memory: MemoryStore | None = None,
        store: BranchStore | str | Path | None = None,
        budget: Budget | None = None,
        durability: Durability | None = None,
    ) -> None:
        intensity = RestartIntensity(max_restarts, period)
        strategy = check_strategy(strategy)
        if budget is not None and not isinstance(budget, Budget):
            raise TypeError(f"budget must be a pride.Budget or None, got {type(budget).__name__}")
        if durability is not None and not isinstance(durability, Durability):
            raise TypeError(
                f"durability must be a pride.Durability, got {type(durability).__name__}"
            )
        if memory is not None and not is_memory_store(memory):
            raise TypeError(
                f"memory must be a MemoryStore (store/retrieve/search), got {type(memory).__name__}"
            )
        self.grace = _check_grace(grace)
        self.id: UUID = uuid.uuid4()
        self.name: str = name if name is not None else f"session-{self.id.hex[:8]}"
        self.budget: Budget | None = budget
        """The session's budget (read-only in effect: its allowance is fixed at construction)."""
        self._account = Account(budget, scope=f"session {self.name}")
        self.hooks: HookBus = HookBus()
        """The session's hook bus, attached to every member (see
        [`pride.supervisors.hooks`][pride.supervisors.hooks])."""
        # Nothing of the session's own is subscribed: a turn nobody watches builds
        # no signal (members count their turns on the session's account instead).
        self._observer = Observer()
        self._operations = OperationManager()
        self._memory = memory
        self._durability = durability
        # The two parts of a session, each given what it needs.
        self._supervisor = Supervisor(
            self,
            name=self.name,
            id=self.id,
            strategy=strategy,
            intensity=intensity,
            observer=self._observer,
            hooks=self.hooks,
            release=self._release,
        )
        self._members = Membership(
            self,
            self._supervisor,
            observer=self._observer,
            hooks=self.hooks,
            operations=self._operations,
            memory=lambda: self.memory,
            grace=self.grace,
            account=self._account,
        )
        self._private: PrivateNursery | None = None  # the nursery of `async with`
        self._store_path: Path | None = None
        if isinstance(store, BranchStore):
            self._members.persistence = Persistence(store, durability)
        elif store is not None:
            self._store_path = Path(store)

    def __repr__(self) -> str:
        state = "running" if self.running else "closed" if self._members.closed else "idle"
        return f"<Session {self.name!r} {state}, {len(self._supervisor.children)} members>"

    def _release(self, child: Child) -> None:
        self._members.release(child)

    # ------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        """True while the session supervises (between start and the end of its stop)."""
        return self._supervisor.running

    @property
    def strategy(self) -> Strategy:
        """The restart strategy."""
        return self._supervisor.strategy

    @property
    def store(self) -> BranchStore | None:
        """The branch store members are persisted to, if any."""
        persistence = self._members.persistence
        return persistence.store if persistence is not None else None

    @property
    def usage(self) -> Usage:
        """What the members of this session (and of the sessions below it) have
        used while they belonged to it, counted as calls happen."""
        return self._account.usage()

    async def __aenter__(self) -> Self:
        self._members.check_startable()
        self._account.begin(trio.current_time())
        if self._store_path is not None:  # a path: the session opens and closes the store
            store = BranchStore(self._store_path)
            await store.open()
            self._members.persistence = Persistence(store, self._durability)
        private = PrivateNursery()
        await private.open(self._supervisor.serve)
        self._private = private
        return self

    async def __aexit__(self, *exc_info: Any) -> bool:
        private, self._private = self._private, None
        error = exc_info[1]
        try:
            if not self.running or isinstance(error, trio.Cancelled):
                pass  # cancelled from outside: the nursery's cancellation ends everything
            elif error is None:
                await self.stop()
            else:  # the block failed: stop at once, but completely (and boundedly)
                with trio.move_on_after(FINALIZE_GRACE) as bound:
                    bound.shield = True
                    await self.stop(grace=0)
                if bound.cancelled_caught:
                    log.error("session %r did not stop within %ss", self.name, FINALIZE_GRACE)
        except BaseException as late:  # cancelled during the grace period
            exc_info = (type(late), late, late.__traceback__)
        try:
            return await private.close(exc_info) if private is not None else False
        finally:
            exc_info, error = (), None  # an error leaving holds this frame: no cycle
            self._members.close_for_good()
            persistence = self._members.persistence
            if self._store_path is not None and persistence is not None:
                with trio.CancelScope(shield=True):
                    await persistence.store.aclose()

    async def stop(self, grace: float | None = None) -> None:
        """Stop every member, one after another in reverse start order.

        Running turns may finish within ``grace`` seconds (default: the
        session's ``grace``), one deadline shared by all members; turns still
        running then are cancelled (their terminal ``RunFailed`` is still
        sent and their callers get ``TurnCancelled(reason="shutdown")``).
        Queued envelopes are answered with [`BranchClosed`][pride.BranchClosed].
        Child sessions stop their own members the same way, children first.
        Returns once every member has stopped. Idempotent; a second call
        with a shorter grace brings the deadline forward (a second Ctrl-C).

        Raises:
            ValueError: ``grace`` is negative or not a number.

        Cancellation: the stop goes on in the session's own task; cancelling
        the caller only stops the waiting. Called from inside a member's turn,
        that turn is cancelled at the deadline like any other.
        """
        deadline = trio.current_time() + _check_grace(self.grace if grace is None else grace)
        if not self.running:
            await trio.lowlevel.checkpoint()
            return
        self._supervisor.request_stop(deadline)
        await self._supervisor.wait_finished()

    # ------------------------------------------------------------ membership

    async def spawn(
        self,
        member: _Member,
        *,
        restart: RestartType = "permanent",
        durability: Durability | None = None,
    ) -> _Member:
        """Start ``member`` under this session and return it.

        ``member`` is a [`Branch`][pride.Branch] (its actor starts, or a running
        standalone one is taken over between turns), a child ``Session``
        (a supervisor tree) or a service such as an MCP server (see
        `spawn_mcp`). Returns after a branch has applied its
        ``Attach``, or after a child session or service has started.
        Spawning a member again repairs its wiring, or starts it again if it
        had stopped.

        With a store, a branch with a stored conversation of its name is
        restored, and each of its turns a crash interrupted is sent to it as
        a [`Resume`][pride.Resume] before anything else can be (its envelope goes
        to the `on_resume` handlers).

        Args:
            member: the branch or session.
            restart: ``"permanent"``, ``"transient"`` or ``"temporary"``
                (never restarted after a crash).
            durability: this branch's journal and restart policy (default: the
                session's).

        Raises:
            MembershipError: it belongs to another session.
            ValueError: a bad ``restart``, or another member has its name.
            TypeError: ``member`` is not a Branch, a Session or a service.
            RuntimeError: this session is not running.
            Exception: a service that failed to start raises its error
                (it does not become a member).
        """
        kind = check_restart_type(restart)
        if isinstance(member, Session):
            await self._members.adopt_session(member, member._members, kind)
        elif isinstance(member, Branch):
            await self._members.adopt([member], kind, durability)
        elif isinstance(member, Service):
            await self._members.adopt_service(member, kind)
        else:
            raise TypeError(
                f"expected a Branch, a Session or a service, got {type(member).__name__}"
            )
        return member

    # A session's MCP servers (services): see _service.py.

    spawn_mcp = serving.spawn_mcp
    mcp = serving.mcp

    async def spawn_session(
        self, name: str | None = None, *, restart: RestartType = "permanent", **options: Any
    ) -> Session:
        """Create a child session, start it under this one, and return it.

        Args:
            name: the child's name.
            restart: the child's restart type in this session.
            **options: the other [`Session`][pride.Session] arguments (``strategy``,
                ``max_restarts``, ``period``, ``grace``, ``memory``).

        Raises:
            ValueError: a bad option, or another member has that name.
            RuntimeError: this session is not running.
        """
        child = Session(name, **options)
        await self.spawn(child, restart=restart)
        return child

    async def include(self, *branches: Branch) -> None:
        """Make ``branches`` members (restart type ``permanent``), like
        [`spawn`][pride.supervisors.session.Session.spawn].

        The whole batch is checked first: if any branch belongs to another
        session, [`MembershipError`][pride.MembershipError] is raised and nothing changes.
        Running standalone branches are adopted between turns.
        """
        await self._members.adopt(list(branches), "permanent")

    async def remove(self, member: Any) -> None:
        """Stop a member and take it out of the session, keeping its conversation.

        Sends ``Detach`` (owner, observer, hooks and directory cleared, a
        fresh operation registry; messages, models, tools, logs, providers,
        capabilities and adopted memory stay) and then ``Stop``. Returns after
        both were applied and the actor has stopped; its running turn
        finishes first, and queued envelopes get [`BranchClosed`][pride.BranchClosed].

        Raises:
            UnknownBranch: ``member`` (a branch, session, name or id) is not a member.
            ReentrancyError: called from the member's own turn (it would wait on itself).
        """
        await self._members.remove(member)

    # ------------------------------------------------------------ exchange

    # Work sent to members by Branch, name, id or ref, resolved in this tree: see _exchange.py.

    send = exchange.send
    ask = exchange.ask
    run_operation = exchange.run_operation

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` in the shared registry.

        Every member sees it (``Attach`` passes the registry), as
        ``pride.Call(name, ...)`` or ``branch.call(name, ...)``.

        Raises:
            ValueError: the name is taken (unless ``update``).
            TypeError: ``operation`` is not an async function.
        """
        self._operations.register(name, operation, update=update)

    @property
    def operations(self) -> OperationManager:
        """The shared operation registry."""
        return self._operations

    # ------------------------------------------------------------ durable turns

    # Turns resumed after a restart, and turns stopped for approval: see _approvals.py.

    on_resume = approvals.on_resume
    resolve = approvals.resolve
    suspended_turns = approvals.suspended_turns

    # ------------------------------------------------------------ flows

    # Running a plan of work across the members, and continuing one: see _flows.py.

    flow = flows.flow
    flow_stream = flows.flow_stream
    resume_flow = flows.resume_flow
    unfinished_flows = flows.unfinished_flows
    abandon_flow = flows.abandon_flow

    @property
    def memory(self) -> MemoryStore:
        """The default memory store offered to members (created on first use; no setter)."""
        if self._memory is None:
            self._memory = InMemoryStore()
        return self._memory

    # ------------------------------------------------------------ observation

    def observe(self, *filters: Filter, handler: Handler | None = None) -> Any:
        """Subscribe to members' signals; see
        [`Observer.observe`][pride.supervisors.observer.Observer.observe] (decorator too).

        Signal classes given together are alternatives (any of them matches);
        predicates all have to hold: ``observe(RunStart, RunEnd, handler=h)``
        sees both.
        Child sessions' signals arrive here too, after their own subscribers.
        """
        return self._observer.observe(*filters, handler=handler)

    def unobserve(self, handler: Handler) -> int:
        """Remove ``handler``'s subscriptions; return how many there were."""
        return self._observer.unobserve(handler)

    @property
    def observer(self) -> Observer:
        """The observer attached to every member."""
        return self._observer

    # ------------------------------------------------------------ members

    @property
    def branches(self) -> tuple[Branch, ...]:
        """Member branches, in start order."""
        return self._members.branches

    @property
    def sessions(self) -> tuple[Session, ...]:
        """Child sessions, in start order."""
        return self._members.sessions

    @property
    def services(self) -> tuple[Service, ...]:
        """Member services (MCP servers), in start order."""
        return self._members.services

    def get_branch(self, name_or_id: str | UUID) -> Branch:
        """The member branch with this id (first) or name.

        Raises:
            UnknownBranch: no member branch has it (a ``LookupError``).
        """
        return self._members.get_branch(name_or_id)

    def resolve_name(self, name_or_id: str | UUID) -> Branch:
        """Find a branch by name or id, nearest first: this session's branches,
        then its child sessions' (depth first), then each parent's upwards.

        Raises:
            UnknownBranch: no branch of the tree has that name or id.
        """
        return self._members.resolve_name(name_or_id)

    def statistics(self) -> SessionStatistics:
        """Members, queued work, turns and restarts of this session and those below it."""
        return statistics_of(self._members, self._account)


def _check_grace(grace: Any) -> float:
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace >= 0:
        raise ValueError(f"grace must be a non-negative number of seconds, got {grace!r}")
    return float(grace)
