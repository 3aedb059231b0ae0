"""A supervisor's records of its children: who each is, and each run of it.

A child is started many times over its life (restarts); each start is a
`Run`, ended exactly once, and the child record points at the
current one. Reports about an older run are stale and ignored.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol
from uuid import UUID

import attrs
import trio

from ..branch import Branch
from ._service import Service
from .strategy import RestartType

__all__ = ["Child", "ChildState", "Member", "Run", "Status", "close"]

ChildState = Literal["running", "stopping", "leaving", "stopped"]


class Member(Protocol):
    """What every member is, to its supervisor: something with a name and an id."""

    @property
    def name(self) -> str: ...

    @property
    def id(self) -> UUID: ...


@attrs.define(eq=False)
class Run:
    """One incarnation of a child: started, then ended exactly once."""

    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    started: bool = False
    # The supervisor is ending this run itself and handles the end where it asked.
    expected: bool = False
    reason: str | None = None  # what serve returned; None if it crashed or was cancelled
    crash: Exception | None = None
    _ended: trio.Event | None = attrs.field(default=None, init=False)

    @property
    def ended(self) -> trio.Event:
        """Set once the run is over; made on first use (a running member's run
        that nobody waits on holds none: a session may have many)."""
        if self._ended is None:
            self._ended = trio.Event()
        return self._ended


@attrs.define(eq=False)
class Child:
    """A member of a session: a branch, a child session or a service, with its restart type.

    ``actor`` is the member itself (a Branch, a Session, a service). A member
    that is not a branch runs through its ``runner``: the service itself, or
    a child session's supervisor (both have ``serve`` and ``request_stop``);
    a branch's actor serves it, so its runner is None.

    ``state`` is ``running`` (a run is live), ``stopping`` (the supervisor
    is ending the run), ``leaving`` (``remove`` asked it to stop) or
    ``stopped``. Children keep their start order in the session's roster
    (`pride.supervisors._roster`), which numbers them (``place``) and indexes
    them under a name (``indexed_as``).
    """

    actor: Branch | Member
    restart: RestartType
    runner: Service | None = None
    state: ChildState = "stopped"
    run: Run | None = None
    gone: trio.Event | None = None  # set once a remove has finished
    place: int = 0  # its start order in the roster
    indexed_as: str = ""  # the name the roster indexes it under

    @property
    def name(self) -> str:
        return self.actor.name


@attrs.define
class Status:
    """Wraps a TaskStatus to note that the run started (a crash before it is a start failure)."""

    inner: Any
    run: Run | None

    def started(self, value: Any = None) -> None:
        # The child's frames keep this wrapper alive, and a crash's traceback keeps
        # them: holding the run (which holds the crash) would close a cycle.
        run, self.run = self.run, None
        inner, self.inner = self.inner, None
        assert run is not None, "started twice"
        run.started = True
        inner.started(value)


def close(child: Child, detail: str) -> int:
    """Close a stopped branch child's mailbox (queued envelopes get BranchClosed)."""
    actor = child.actor
    if isinstance(actor, Branch) and actor.running:
        actor.actor.close(actor, detail)
        return 1
    return 0
