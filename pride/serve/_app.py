"""What every handler of the front door shares: the session, the bounds, name resolution.

A `Front` is one server's state: the session whose tree is served, its
options and tokens, the places of ``--max-concurrent`` (turns) and of ``--max-watchers`` (event
streams), the turns followed
for ``GET /v1/turns/{turn_id}``, the metrics. The ASGI application around it
(the gates every request passes, then the route) is `pride.serve._asgi`.

Branch names are resolved by `Front.lookup`, the one place a name from a
request becomes a branch: its token's scope is applied there (a branch out
of scope is a 404 exactly like a name that does not exist), and so will be
the activation of virtual branches.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import trio

from .._places import Places
from ..actors import BranchRef, Reply, Target, instrument, send
from ..branch import Branch
from ..errors import MailboxFull, UnknownBranch
from ..messages import WorkCommand
from ..messages.origins import Guard
from ..messages.requests import for_branch, for_remote
from ._activity import Activity
from ._auth import Grant, Tokens
from ._console import Logins
from ._flows import FlowRuns
from ._http import HttpError
from ._metrics import Metrics
from ._options import ServeOptions
from ._status import RETRY_AFTER
from ._traces import Recorder
from ._turns import TrackedTurns

__all__ = ["Front", "Handler", "mailbox_full"]

log = logging.getLogger("pride.serve")

Handler = Callable[..., Awaitable[None]]


def mailbox_full(target: Target) -> MailboxFull:
    """The refusal of a send to ``target`` that found no room, naming its capacity.

    A Branch knows its ``mailbox_size``; the addresses a request may hold instead,
    a virtual branch's ``VirtualRef`` and a cluster's ``RemoteBranchRef``, know
    theirs as ``capacity`` (a refusal said 0 for a VirtualRef, which has no
    ``mailbox_size``).
    """
    capacity = getattr(target, "mailbox_size", None)
    if capacity is None:
        capacity = getattr(target, "capacity", None)
    return MailboxFull(target.name, capacity if isinstance(capacity, int) else 0)


class Front:
    """One server's shared state (see the module docstring).

    Args:
        session: the root session whose tree is served.
        options: the server's settings.
        tokens: who may call it.
        cluster: a `pride.cluster.Cluster` whose placed branches are reachable
            by name too (``pride serve --cluster``), or None.
    """

    def __init__(
        self, session: Any, options: ServeOptions, tokens: Tokens, *, cluster: Any = None
    ) -> None:
        self.session = session
        self.options = options
        self.tokens = tokens
        self.cluster = cluster
        self.guard = Guard(options.host, options.port, options.allow_hosts, options.allow_origins)
        self.draining = False
        self.drained = trio.Event()  # set when draining begins: event streams end
        self.nursery: trio.Nursery | None = None
        self.turns = TrackedTurns()
        self.metrics = Metrics()
        self.clones: set[UUID] = set()  # transient branches of the OpenAI endpoint
        self._adopted: list[Reply] = []  # resumed before serving began
        self._slots = Places(options.max_concurrent, options.queue_wait)
        # Watchers (event streams) have places of their own: one open for as long as its
        # client likes must never hold a turn's, nor turns keep every watcher out.
        self._watchers = Places(options.max_watchers, options.queue_wait)
        self.activity = Activity(ignored=self.clones)
        self.logins: Logins | None = None  # browser sign-ins, with --console once bound
        self.traces: Recorder | None = None  # recent turns, with --console while serving
        self.flows: FlowRuns | None = None  # recent flow runs, with --console while serving

    def bound(self, port: int) -> None:
        """The server listens on ``port`` (the one port 0 was given): its own Host names."""
        options = self.options
        self.guard = Guard(options.host, port, options.allow_hosts, options.allow_origins)
        if options.console:
            self.logins = Logins(port)

    def adopt(self, reply: Reply) -> None:
        """Follow a turn the store's journal held and the session resumed (a
        ``session.on_resume`` handler): ``GET /v1/turns/{turn_id}`` reports it."""
        if self.nursery is None:
            self._adopted.append(reply)
            return
        turn_id = getattr(reply.command, "turn_id", None)
        if isinstance(turn_id, UUID):
            self.turns.follow(self.nursery, turn_id, reply.branch.name, reply)

    def serving(self, nursery: trio.Nursery) -> None:
        """Requests are served now; ``nursery`` holds the server's own tasks."""
        self.nursery = nursery
        self.activity.watch(self.session)
        self.turns.watch(self.session)
        if self.options.console:
            self.traces = Recorder(instrument.TRACER)
            self.traces.install()
            self.flows = FlowRuns()
            self.flows.watch(self.session)
        adopted, self._adopted = self._adopted, []
        for reply in adopted:
            self.adopt(reply)

    def closed(self) -> None:
        """Serving is over: let go of the signals and the tracer slot."""
        self.nursery = None
        self.activity.close()
        self.turns.close()
        if self.traces is not None:
            self.traces.uninstall()
        if self.flows is not None:
            self.flows.close()

    def drain(self) -> None:
        """Stop taking work: readyz turns false, event streams end."""
        self.draining = True
        self.drained.set()

    # ------------------------------------------------------------ shared by handlers

    async def lookup(self, name: str, grant: Grant) -> Branch:
        """The branch of the tree a request names, within its token's scope; a
        virtual branch's name (``kind/key``) is activated once the token reaches it.

        Raises:
            UnknownBranch: no such branch, or one the token does not reach
                (the same error: a token learns nothing of what it cannot reach).
            ActivationFailed: the virtual branch could not be activated.
        """
        try:
            found = self.session.resolve_name(name)
        except UnknownBranch:
            raise UnknownBranch(name, "this server") from None
        if found.id in self.clones or not grant.reaches(found.name):
            raise UnknownBranch(name, "this server")
        if isinstance(found, Branch):
            await trio.lowlevel.checkpoint()
            return found
        branch: Branch = await self.session.activate(found.name)
        return branch

    async def target(
        self, name: str, grant: Grant, command: WorkCommand
    ) -> tuple[Target, WorkCommand]:
        """Where ``command`` goes for a request naming ``name``, and the command as it
        may go there (the trust rules of `pride.messages.requests`).

        A branch of the tree first; with ``--cluster``, a branch placed on a host.

        Raises:
            UnknownBranch: as `lookup`.
            InvalidMessage: a command to a placed branch carries a budget.
        """
        try:
            branch = await self.lookup(name, grant)
        except UnknownBranch:
            if self.cluster is None or not grant.reaches(name):
                raise
            return self.cluster.ref(name), for_remote(command)
        return self._address(branch), for_branch(command, branch.budget)

    def _address(self, branch: Branch) -> Target:
        """Where a send to ``branch`` goes: a virtual branch's address (its
        ``VirtualRef``), else the branch itself.

        A request waits between its lookup and its send (for a place of
        ``--max-concurrent``, for room in the mailbox), and a virtual branch may
        be passivated meanwhile (idle, for ``max_active``, by hand): sent to the
        branch object, the request was answered ``BranchClosed``; sent to its
        address, it activates the branch again.
        """
        address = self.session.ref(branch.name)
        return branch if isinstance(address, BranchRef) else address

    async def deliver(self, target: Target, command: WorkCommand) -> Reply:
        """Send ``command``, waiting at most ``queue_wait`` for room in the mailbox.

        Raises:
            MailboxFull: still no room after ``queue_wait`` (nothing was queued).
        """
        with trio.move_on_after(self.options.queue_wait):
            return await send(target, command)
        raise mailbox_full(target)

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one of the ``max_concurrent`` places of turns for the block.

        Raises:
            HttpError: 503 when no place came free within ``queue_wait``.
        """
        return self._slots.held(
            functools.partial(
                _overloaded,
                f"{self.options.max_concurrent} requests are being served (--max-concurrent)",
            )
        )

    def watcher(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one of the ``max_watchers`` places of long-lived watchers (an event
        stream) for the block: places of their own, never those of turns.

        Raises:
            HttpError: 503 when no place came free within ``queue_wait``.
        """
        return self._watchers.held(
            functools.partial(
                _overloaded, f"{self.options.max_watchers} event streams are open (--max-watchers)"
            )
        )

    @property
    def in_flight(self) -> int:
        """Requests holding a place of ``max_concurrent`` now."""
        return self._slots.taken

    @property
    def watching(self) -> int:
        """Event streams holding a place of ``max_watchers`` now."""
        return self._watchers.taken


def _overloaded(taken: str) -> HttpError:
    """The 503 of a request that found no place, ``taken`` saying which bound was reached."""
    return HttpError(
        503,
        "Overloaded",
        f"{taken}; try again shortly",
        headers=[(b"retry-after", str(RETRY_AFTER).encode())],
    )
