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
session is made: its supervisor (the children's runs, restarts and ordered
stops) and its membership (who belongs, their wiring, name resolution); its
statistics are read from them. This module is the public surface, every
method written in the class with its contract, delegating inward to the
helpers of its waiting turns, its flows and its MCP door.

This module is long and one idea: the Session class, written in one place
as the public surface its users read.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar
from uuid import UUID

import trio

from ..actors import (
    BranchRef,
    Reply,
    StreamItems,
    Target,
    ask as ask_target,
    send as send_to,
    stream as stream_to,
)
from ..actors.nursery import PrivateNursery
from ..actors.turn import FINALIZE_GRACE
from ..branch import Branch
from ..budget.accounts import Account
from ..durable import Durability, Persistence, approvals
from ..durable.approvals import SuspendedTurn
from ..errors import UnknownBranch, VirtualKindError
from ..flows import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_SPAWN, Flow, FlowEvents, FlowResult
from ..flows.journal import UnfinishedFlow
from ..memory import InMemoryStore, MemoryStore, is_memory_store
from ..messages import Budget, Call, Command, Decision, Usage, WorkCommand
from ..operations.registry import OperationManager
from ..store import BranchStore
from . import _flows as flows, _service as serving
from ._child import Child
from ._membership import Membership
from ._service import Service
from ._statistics import SessionStatistics, statistics_of
from ._supervisor import Supervisor, delivering_owner
from ._virtual import DEFAULT_PASSIVATE_AFTER, VirtualRef, Virtuals
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

__all__ = ["DEFAULT_GRACE", "Session", "SessionStatistics", "SuspendedTurn", "VirtualRef"]

log = logging.getLogger("pride.session")

# Values a session hands out, defined beside the parts that make them; their
# public home is this module.
SessionStatistics.__module__ = SuspendedTurn.__module__ = VirtualRef.__module__ = __name__

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
            stopped=self._stopped,
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
            self._persist_to(store)
        elif store is not None:
            self._store_path = Path(store)

    def __repr__(self) -> str:
        state = "running" if self.running else "closed" if self._members.closed else "idle"
        return f"<Session {self.name!r} {state}, {len(self._supervisor.children)} members>"

    def _persist_to(self, store: BranchStore) -> None:
        """Persist the members through ``store`` (named as this session to another
        session of the store that wants one of its names)."""
        self._members.persistence = Persistence(
            store, self._durability, label=f"session {self.name!r}"
        )

    def _release(self, child: Child) -> None:
        self._members.release(child)

    async def _stopped(self, child: Child, reason: str) -> None:
        virtuals = self._members.virtuals
        if virtuals is not None:
            await virtuals.stopped(child, reason)

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
            self._persist_to(store)
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

        Args:
            grace: seconds the running turns may take to finish (None: the
                session's ``grace``).

        Raises:
            ValueError: ``grace`` is negative or not a number.

        Cancellation: the stop goes on in the session's own task; cancelling
        the caller only stops the waiting. Called from inside a member's turn,
        that turn is cancelled at the deadline like any other. Called from a
        lifecycle hook or subscriber (``BranchStarted``, ``branch_stop``...) of
        this session or of one below it, it asks for the stop and returns at
        once: the stop cannot begin before that handler has returned.
        """
        deadline = trio.current_time() + _check_grace(self.grace if grace is None else grace)
        if self._members.virtuals is not None:
            self._members.virtuals.closing = True  # nothing activates from now on
        if not self.running:
            await trio.lowlevel.checkpoint()
            return
        self._supervisor.request_stop(deadline)
        if self._delivering_below():
            # The supervisor delivering this lifecycle event holds its lock until the
            # handler returns, and the stop needs it: waiting here would wait on itself.
            await trio.lowlevel.checkpoint()
            return
        await self._supervisor.wait_finished()

    def _delivering_below(self) -> bool:
        """Whether this runs in a lifecycle handler of this session or one below it."""
        owner = delivering_owner()
        members = owner._members if isinstance(owner, Session) else None
        while members is not None:
            if members is self._members:
                return True
            members = members.parent
        return False

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

    async def spawn_mcp(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        headers: Mapping[str, str] | None = None,
        restart: RestartType = "permanent",
        **options: Any,
    ) -> Any:
        """Start an MCP server as a supervised child of this session and return its handle.

        Returns once the server has initialised and listed its tools; register
        them on a branch with
        [`register_mcp`][pride.branch.branch.Branch.register_mcp]. The server
        restarts by ``restart`` and the session's strategy and intensity,
        like a branch, and stops with the session. Needs the ``mcp`` extra
        (``pip install 'pride[mcp]'``); see docs/mcp.md.

        Args:
            name: the server's name in this session (`mcp` finds it by it).
            command: a stdio server's argv, run as a subprocess.
            url: a streamable-HTTP server's address (instead of ``command``).
            env: variables added to the subprocess's minimal inherited environment.
            cwd: the subprocess's working directory.
            headers: sent with every request to a ``url`` server.
            restart: ``"permanent"``, ``"transient"`` or ``"temporary"``.
            **options: further options of [`pride.mcp.spawn_mcp`][pride.mcp.spawn_mcp]
                (timeouts, limits).

        Returns:
            The server's handle ([`McpServer`][pride.mcp.McpServer]).

        Raises:
            ImportError: the ``mcp`` extra is not installed.
            pride.mcp.McpServerError: the server could not be started or initialised.
            ValueError: neither or both of ``command`` and ``url``, a bad
                option, or another member has the name.
            RuntimeError: this session is not running.
        """
        return await serving.spawn_mcp(
            self,
            name,
            command=command,
            url=url,
            env=env,
            cwd=cwd,
            headers=headers,
            restart=restart,
            **options,
        )

    def mcp(self, name: str) -> Any:
        """The handle of this session's MCP server called ``name``.

        Args:
            name: the name given to `spawn_mcp`.

        Raises:
            UnknownBranch: no MCP server of this session has that name (a ``LookupError``).
        """
        return serving.mcp(self, name)

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

        Args:
            member: the member branch or child session, or its name or id.

        Raises:
            UnknownBranch: ``member`` (a branch, session, name or id) is not a member.
            ReentrancyError: called from the member's own turn (it would wait on itself).
        """
        await self._members.remove(member)

    # ------------------------------------------------------------ exchange

    async def send(self, target: Any, command: Command, *, tag: str | int | None = None) -> Reply:
        """[`pride.send`][pride.send], with ``target`` found in this session's tree.

        A target is a Branch (or another [`Target`][pride.Target]), a
        `BranchRef`, or a name or id, found nearest first: this session's
        branches, its child sessions', then each parent's.

        Args:
            target: a Branch, BranchRef, name or id.
            command: the command to queue.
            tag: a label for the envelope (``reply.tag``), journaled with the
                turn and given back if it is resumed after a restart.

        Returns:
            The command's [`Reply`][pride.Reply], at once.

        Raises:
            UnknownBranch: no such branch in this tree.
            BranchClosed: the branch has stopped.
            TypeError: ``command`` is not a pride command.

        Cancellation: if it raises ``Cancelled``, nothing was queued.
        """
        return await send_to(self._members.target(target), command, tag=tag)

    async def ask(self, target: Any, command: Command, timeout: float | None = None) -> Any:
        """[`pride.ask`][pride.ask], with ``target`` found in this session's tree.

        Args:
            target: a Branch, BranchRef, name or id (found as for `send`).
            command: the command to run.
            timeout: seconds to wait in all (None: no limit).

        Returns:
            The command's result.

        Raises:
            UnknownBranch: no such branch in this tree.
            BranchClosed: the branch has stopped.
            trio.TooSlowError: ``timeout`` expired.
            Exception: whatever the command raised (as for [`pride.ask`][pride.ask]).

        Cancellation: a queued command is dropped; a running turn is cancelled
        and ends with ``RunFailed``.
        """
        return await ask_target(self._members.target(target), command, timeout)

    def stream(
        self, target: Any, command: WorkCommand, *, tag: str | int | None = None
    ) -> contextlib.AbstractAsyncContextManager[StreamItems]:
        """[`pride.stream`][pride.stream], with ``target`` found in this session's tree.

        ``async with session.stream("user/ada", ReActStream("q")) as items:``
        (a virtual branch is activated on entering).

        Args:
            target: a Branch, BranchRef, name or id (found as for `send`).
            command: the work command to stream.
            tag: a label for the envelope, as for `send`.

        Returns:
            An async context manager yielding the command's items.

        Raises:
            UnknownBranch: no such branch in this tree.
            TypeError: ``command`` is not a work command.
            Exception: the turn's error, from the ``async for`` after the last item.
        """
        return stream_to(self._members.target(target), command, tag=tag)

    def ref(self, name: str | UUID) -> BranchRef | VirtualRef:
        """An address of the branch ``name`` that ``pride.ask/send/stream`` take.

        For a virtual branch's name (``kind/key``) it is its
        [`VirtualRef`][pride.supervisors.session.VirtualRef], live or not: a
        send through it activates the branch. For any other branch of the
        tree, its [`BranchRef`][pride.BranchRef].

        Args:
            name: a branch name or id.

        Raises:
            UnknownBranch: no branch of the tree has it (nor a virtual kind).
        """
        virtuals = self._members.virtuals
        if virtuals is not None and isinstance(name, str):
            ref = virtuals.ref(name)
            if ref is not None:
                return ref
        # address=True: a kind registered elsewhere in the tree (a child session's,
        # a parent's) gives its VirtualRef even while the branch is live; a
        # BranchRef to the live branch would name nothing once it is passivated.
        found = self._members.resolve_name(name, address=True)
        if isinstance(found, VirtualRef):
            return found
        return BranchRef(found.id, found.name)

    # ------------------------------------------------------------ virtual branches

    async def virtual(
        self,
        kind: str,
        factory: Callable[[str], Any],
        *,
        passivate_after: float = DEFAULT_PASSIVATE_AFTER,
        max_active: int | None = None,
    ) -> None:
        """Register ``kind``: every name ``f"{kind}/{key}"`` is a branch from now on.

        Sent to by name (`ask`, `send`, `stream`, `ref`, a request line, a
        ``pride.ask`` from a member's tool) and not live, the branch is
        activated: ``factory(key)`` (sync or async) builds an unstarted
        Branch, which gets the name, the store's state for it (its id and
        conversation, its unfinished turns), and runs under this session
        (`get_branch` finds it while it is live). Concurrent first messages
        make one activation and are served in arrival order. Idle (no turn,
        empty mailbox, no open stream) for ``passivate_after`` seconds, it is
        passivated: stopped, committed, gone from memory; its conversation
        stays in the store. See docs/virtual.md.

        Args:
            kind: the name's prefix (printable, no ``/``).
            factory: ``factory(key) -> Branch`` (or an async function); what
                it raises fails the waiting callers with
                [`ActivationFailed`][pride.ActivationFailed].
            passivate_after: idle seconds before passivation (``math.inf``: never).
            max_active: at most this many of the kind live at once: an
                activation first passivates the least recently used idle ones.

        Raises:
            VirtualKindError: the session has no store, the kind is taken or
                malformed, or an option is out of range.
            RuntimeError: the session is not running.
        """
        self._members.require_running()
        virtuals = self._members.virtuals
        if virtuals is None:
            virtuals = Virtuals(self._members)
        virtuals.register(kind, factory, passivate_after=passivate_after, max_active=max_active)
        self._members.virtuals = virtuals
        await trio.lowlevel.checkpoint()

    async def activate(self, name: str) -> Branch:
        """The live virtual branch ``name``, activated first if it is not live.

        Most code never needs this (a send by name activates); it is for
        reading the branch itself (its ``budget``, its ``messages``). It may
        be passivated again later: keep the name, not the object.

        Args:
            name: a ``kind/key`` name.

        Returns:
            The live branch.

        Raises:
            UnknownBranch: ``name`` is not of a virtual kind of this session.
            ActivationFailed: the activation failed (``__cause__`` says why).
            BranchClosed: the session is stopping.
        """
        virtuals = self._members.virtuals
        if virtuals is None:
            raise UnknownBranch(name, f"session {self.name!r} (it has no virtual kinds)")
        return await virtuals.activate(name)

    async def passivate(self, name: str) -> bool:
        """Passivate the virtual branch ``name`` now, if it is live.

        Its queued work is served first (a running turn or stream is never
        interrupted); then it stops through the ordinary path (its signals,
        its rows committed) and leaves memory (``BranchPassivated(reason=
        "manual")``). A message sent meanwhile waits, and activates it again.

        Args:
            name: a ``kind/key`` name.

        Returns:
            True if it was live (False: nothing to do).

        Raises:
            UnknownBranch: ``name`` is not of a virtual kind of this session.
        """
        virtuals = self._members.virtuals
        if virtuals is None:
            raise UnknownBranch(name, f"session {self.name!r} (it has no virtual kinds)")
        return await virtuals.passivate(name, "manual")

    async def stored(self, kind: str, *, after: str | None = None, limit: int = 100) -> list[str]:
        """A page of the names of ``kind`` the store holds (``kind/key``), in name order.

        One indexed range query, however many the store holds; nothing is
        activated. Page on with the last name of a page:
        ``await session.stored("user", after=page[-1])``.

        Args:
            kind: the kind (registered or not).
            after: a name; the page starts after it (None: at the first name).
            limit: at most this many names.

        Returns:
            The names, possibly fewer than ``limit`` (none: the end).

        Raises:
            VirtualKindError: the session has no store.
            ValueError: ``limit`` is not a positive int.
            StoreError: the store cannot be read.
        """
        store = self.store
        if store is None:
            raise VirtualKindError(
                f"session {self.name!r} has no store to list: Session(store='conversations.db')"
            )
        return await store.names(f"{kind}/", after=after, limit=limit)

    async def run_operation(self, name: str, *, branch: Any = None, **kwargs: Any) -> Any:
        """Run the registered operation ``name`` as a turn of a member; return its result.

        Args:
            name: the operation (looked up attribute-first on the branch, then
                in its registry, then in this session's).
            branch: the member (a Branch, name or id); None: the first spawned one.
            **kwargs: the operation's keyword arguments.

        Returns:
            What the operation returned.

        Raises:
            UnknownBranch: no such member, or the session has no branches.
            UnknownOperation: nothing has that name.
            Exception: whatever the operation raised.
        """
        if branch is None:
            first = self._members.supervisor.children.first_branch()
            if first is None:
                raise UnknownBranch("<first member>", f"session {self.name!r} (no branches)")
            target: Target = first
        else:
            target = self._members.target(branch)
        return await ask_target(target, Call(name, **kwargs))

    def register_operation(
        self, name: str, operation: Callable[..., Any], *, update: bool = False
    ) -> None:
        """Register ``async def operation(branch, **kwargs)`` in the shared registry.

        Every member sees it (``Attach`` passes the registry), as
        ``pride.Call(name, ...)`` or ``branch.call(name, ...)``.

        Args:
            name: what ``Call`` names it by.
            operation: the async function.
            update: replace an operation of the same name instead of failing.

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

    def on_resume(self, handler: Callable[[Reply], Any]) -> Callable[[Reply], Any]:
        """Call ``handler(reply)`` for each turn this session resumes (or abandons)
        after a restart; usable as a decorator.

        The first caller of such a turn is gone: ``reply`` is the envelope of
        its [`Resume`][pride.Resume], queued before any other work of the
        branch; ``reply.tag`` is the tag its first sender gave it (``pride
        run``'s request id) and ``await reply.result()`` its result. Register
        before spawning the branches. A failing handler is logged. (A turn of
        a flow node is not handed over: `resume_flow` waits for it.)

        Args:
            handler: called with the resumed turn's envelope.

        Returns:
            ``handler``.

        Raises:
            TypeError: ``handler`` is not callable.
        """
        return approvals.on_resume(self._members, handler)

    async def resolve(
        self, turn_id: UUID | str, decisions: Mapping[str, Decision] | None = None
    ) -> Any:
        """Continue a turn that stopped for approval, and return its result.

        Approved calls run, denied ones become error results the model sees,
        and the turn goes on (keeping its turn id) to its end. Calls left
        undecided keep waiting: the turn stops again once it reaches them.
        Works on turns restored from a store by another process too: the
        turn's branch is the member of this tree whose turn journal holds it,
        and it is sent a [`Resume`][pride.Resume].

        Args:
            turn_id: the stopped turn (``ApprovalRequired.turn_id``, or
                `suspended_turns`).
            decisions: [`Approve()`][pride.Approve] or
                [`Deny(reason)`][pride.Deny] by pending call id.

        Returns:
            The turn's result.

        Raises:
            UnknownTurn: no member of this tree has a suspended turn with that
                id (or it is not a turn id at all).
            UnknownPendingCall: a decision names a call the turn does not wait on.
            ApprovalRequired: calls still wait (some were left undecided, or the
                model asked for another call that needs approval).
            Exception: whatever the continued turn raised.

        Cancellation: as for `ask`: the continued turn is cancelled and ends
        with ``RunFailed``.
        """
        return await approvals.resolve(self._members, turn_id, decisions)

    def suspended_turns(self) -> list[SuspendedTurn]:
        """The turns of this tree's members waiting for approval, in member order.

        After a restart too: a store's suspended turns are restored with their
        branches.
        """
        return approvals.suspended_turns(self._members)

    # ------------------------------------------------------------ flows

    async def flow(
        self,
        flow: Flow,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        budget: Budget | None = None,
        fail_fast: bool = False,
        *,
        max_spawn: int = DEFAULT_MAX_SPAWN,
    ) -> FlowResult:
        """Run ``flow``'s nodes as turns of this session's branches.

        A node starts when its dependencies have completed, at most
        ``max_concurrent`` at once; a node whose dependency did not complete
        is skipped, independent ones go on. Node signals
        ([`NodeStarted`][pride.NodeStarted], ...) go to the observer. With a
        store the run is journaled, so `resume_flow` can continue it after a
        crash. See docs/flows.md.

        Args:
            flow: the plan.
            max_concurrent: nodes running at once (at least 1).
            budget: one allowance for every node's turn (and the work those
                turns ask of other branches); the session's budget applies too.
            fail_fast: at the first failed node, cancel the running nodes and
                skip the rest.
            max_spawn: how many nodes the running flow may grow by
                ([`current_flow`][pride.current_flow]``().add(...)``).

        Returns:
            The [`FlowResult`][pride.FlowResult]: ``result[name]`` is a
            node's result, ``result.outcomes[name]`` how it ended.

        Raises:
            InvalidFlow: the flow cannot start (a cycle, a dependency on a
                missing node, a target this session cannot resolve); nothing ran.
            ValueError: a bad option.
            TypeError: a bad option.
            RuntimeError: the session is not running.

        Cancellation: every running node's turn is cancelled and finalised
        (its terminal signal, then ``NodeCancelled``), the other nodes are
        skipped, and no node starts afterwards.
        """
        return await flows.flow(
            self,
            flow,
            max_concurrent,
            budget,
            fail_fast,
            max_spawn=max_spawn,
        )

    def flow_stream(
        self,
        flow: Flow,
        max_concurrent: int = DEFAULT_MAX_CONCURRENT,
        budget: Budget | None = None,
        fail_fast: bool = False,
        *,
        max_spawn: int = DEFAULT_MAX_SPAWN,
        items: bool = False,
    ) -> contextlib.AbstractAsyncContextManager[FlowEvents]:
        """Run ``flow`` while the block iterates its events, as they happen.

        ``async with session.flow_stream(flow) as events: async for event in
        events: ...``; afterwards ``events.result`` is the
        [`FlowResult`][pride.FlowResult]. Leaving the block early cancels the
        flow, as cancelling `flow` would.

        Args:
            flow: the plan.
            max_concurrent: nodes running at once (at least 1).
            budget: one allowance for every node's turn, as for `flow`.
            fail_fast: stop the flow at its first failed node.
            max_spawn: how many nodes the running flow may grow by.
            items: also hand over each streaming node's items (nodes running
                ``Run`` or ``ReActStream``) as [`NodeItem`][pride.flows.NodeItem]s;
                their result is still what ``ask`` would return.

        Returns:
            An async context manager yielding the events: the node signals
            (also sent to the observer), and the items when asked for.

        Raises:
            InvalidFlow: on entering, before anything runs (as for `flow`).
            ValueError: a bad option.
            TypeError: a bad option.
            RuntimeError: the session is not running.
        """
        return flows.flow_stream(
            self,
            flow,
            max_concurrent,
            budget,
            fail_fast,
            max_spawn=max_spawn,
            items=items,
        )

    async def resume_flow(
        self,
        flow_id: UUID | str,
        flow: Flow | None = None,
        *,
        max_concurrent: int | None = None,
    ) -> FlowResult:
        """Continue a flow run that a crash (or a cancellation) cut short.

        The run is the journaled one (same id, options, nodes): nodes that
        finished keep their outcome and result and are not run again; a node
        whose turn was interrupted waits for that turn, which its branch
        resumed from the turn journal when it was spawned; the rest run as in
        any flow. Spawn the flow's branches first. See docs/flows.md,
        "Resuming a flow".

        Args:
            flow_id: the run's id (`unfinished_flows` lists them; every node
                signal carries it).
            flow: the same Flow, rebuilt by the same code, when a node's
                command is a function or it has a ``when`` (code the journal
                cannot hold); it is checked against the journal. None: the
                journal's own commands.
            max_concurrent: nodes running at once (default: as journaled).

        Returns:
            The run's [`FlowResult`][pride.FlowResult].

        Raises:
            UnknownFlow: the store holds no unfinished flow with that id.
            InvalidFlow: ``flow`` differs from the journaled plan, or a node
                still to run needs a function and ``flow`` was not given.
            StoreError: the journal does not read back.
            RuntimeError: the session has no store, or is not running, or the
                run is running in this session still (it was not cut short:
                resumed beside itself, its nodes would run twice).

        Cancellation: as for `flow`; the run stays journaled, to be resumed again.
        """
        return await flows.resume_flow(self, flow_id, flow, max_concurrent=max_concurrent)

    async def unfinished_flows(self) -> list[UnfinishedFlow]:
        """The flow runs the store's journal holds, oldest first.

        Each was cut short by a crash or a cancellation, to be continued with
        `resume_flow` or forgotten with `abandon_flow`. Empty without a store;
        a run that does not read back is logged and left out, and so is a run
        of this session still running (journaled, but not cut short).
        """
        return await flows.unfinished_flows(self)

    async def abandon_flow(self, flow_id: UUID | str) -> None:
        """Forget a flow run the store's journal holds, without running it.

        It is no longer listed and cannot be resumed. (Turns of its nodes that
        a crash interrupted were resumed with their branches; they are not
        stopped.)

        Args:
            flow_id: the run's id (`unfinished_flows` lists them).

        Raises:
            UnknownFlow: the store holds no unfinished flow with that id.
            RuntimeError: the session has no store, or the run is running in
                this session still.
        """
        await flows.abandon_flow(self, flow_id)

    @property
    def memory(self) -> MemoryStore:
        """The default memory store offered to members (created on first use; no setter)."""
        if self._memory is None:
            self._memory = InMemoryStore()
        return self._memory

    # ------------------------------------------------------------ observation

    def observe(self, *filters: Filter, handler: Handler | None = None) -> Any:
        """Subscribe to members' signals (usable as a decorator).

        Signal classes given together are alternatives (any of them matches);
        predicates all have to hold: ``observe(RunStart, RunEnd, handler=h)``
        sees both. Child sessions' signals arrive here too, after their own
        subscribers. A handler that raises is logged, and the others still
        run. See [`Observer.observe`][pride.supervisors.observer.Observer.observe].

        Args:
            *filters: signal classes, tuples of them, or predicates on a signal.
            handler: called with each matching signal (sync, or async: then
                awaited before the turn's terminal signal); None returns a
                decorator.

        Returns:
            ``handler``, or the decorator that subscribes one.
        """
        return self._observer.observe(*filters, handler=handler)

    def unobserve(self, handler: Handler) -> int:
        """Remove ``handler``'s subscriptions.

        Args:
            handler: a handler given to `observe`.

        Returns:
            How many subscriptions were removed.
        """
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

        Args:
            name_or_id: the branch's id (a UUID or its text) or name.

        Raises:
            UnknownBranch: no member branch has it (a ``LookupError``).
        """
        return self._members.get_branch(name_or_id)

    def resolve_name(self, name_or_id: str | UUID) -> Branch | VirtualRef:
        """Find a branch by name or id, nearest first: this session's branches,
        then its child sessions' (depth first), then each parent's upwards.

        The name of a virtual branch (``kind/key``) gives its live branch, or,
        when it is not live, its
        [`VirtualRef`][pride.supervisors.session.VirtualRef] (a send through
        it activates the branch).

        Args:
            name_or_id: the branch's id (a UUID or its text) or name.

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
