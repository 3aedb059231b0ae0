"""What the actor runtime needs of a turn journal: the protocols `pride.durable` implements.

The actor knows no journal class. A branch's journal (`BranchRecord`; the
one pride has is `pride.durable.journal.BranchJournal`) sits on its actor
(``actor.journal``): a session with a store gives each member one when it
restores it. Every model turn asks `open_run` for the turn's run
(`TurnRecord`): the turn view consults it for every model call and every
batch of tool calls, and the driver ends it before the turn's barriers.

A branch without a store keeps a journal only when a turn of it could stop
for approval (a tool that ``requires_approval``, or a session hook on
``before_tool_call``): then `open_run` makes one in memory with the factory
`pride.durable` installs in `JOURNALS` when it is imported (``import pride``
does). Other branches keep none and pay one attribute test per turn.

Where no turn can wait for a person (an ``Act`` served on its own), tool calls
pass `refuse_approvals` instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from ..errors import Defer, UnknownTurn
from ..messages import ActionCall, Resume

if TYPE_CHECKING:
    from ..llm import ModelResponse
    from ..messages import Command, PendingCall, Signal, WorkCommand
    from ..messages.history import History
    from ..tools import ActionManager, ActionOutcome

__all__ = [
    "JOURNALS",
    "BranchRecord",
    "Envelope",
    "JournalFactory",
    "ToolStepView",
    "TurnRecord",
    "install_journals",
    "open_run",
    "refuse_approvals",
]

log = logging.getLogger("pride.journal")


class Envelope(Protocol):
    """What a journal needs of the envelope a turn starts with (a `pride.Reply` is one)."""

    @property
    def command(self) -> Command: ...

    @property
    def tag(self) -> Any: ...


class ToolStepView(Protocol):
    """What a turn's run needs of the turn view to answer a batch of tool calls
    (`pride.actors.view.BranchTurn` is one)."""

    @property
    def acts(self) -> ActionManager: ...

    async def before_tool_call(self, call: ActionCall) -> None: ...

    async def after_tool_call(self, outcome: ActionOutcome) -> None: ...

    def replayed_tool_call(self) -> None: ...

    def signal(self, signal: Signal) -> None: ...


class TurnRecord(Protocol):
    """One run of one turn through its journal (`pride.durable.journal.JournalRun`).

    Kept on the turn's state (``TurnState.journal``).

    Attributes:
        turn_id: the turn's id (a resumed turn keeps its first run's).
        command: the command that started the turn (a ``Resume`` runs it again);
            None when it could not be journaled.
        resumed: the run continues a turn that stopped (or a crash interrupted).
        abandon: why the turn is to be abandoned instead of run, if it is.
        pending: the calls the turn waits on for approval, once it stops.
    """

    turn_id: UUID
    command: WorkCommand | None
    resumed: bool
    abandon: str | None
    pending: list[PendingCall]

    @property
    def uncommitted(self) -> bool:
        """Steps are recorded that the store does not hold yet."""
        ...

    def abandoned(self) -> BaseException:
        """The error an abandoned run ends with."""
        ...

    def take_model_step(self) -> tuple[int, ModelResponse | None]:
        """Number the next model call; its journaled reply, if the journal holds one.

        Raises:
            ApprovalRequired: calls of this turn wait for approval.
            JournalMismatch: the journal holds another step here.
        """
        ...

    def model_replied(self, index: int, response: ModelResponse) -> None:
        """Record a live model call's reply."""
        ...

    async def commit(self) -> None:
        """Make every step recorded so far durable.

        Raises:
            StoreError: the store could not commit.
        """
        ...

    async def tool_steps(
        self,
        view: ToolStepView,
        calls: Sequence[ActionCall],
        execute: Callable[..., Awaitable[list[ActionOutcome]]],
        call_ids: Sequence[str] | None,
    ) -> list[ActionOutcome]:
        """Answer a batch of tool calls: from the journal, by running them through
        ``execute``, or by waiting for approval.

        Raises:
            ApprovalRequired: a call needs approval (after the others ran).
            JournalMismatch: the journal holds other steps here.
            StoreError: a commit failed (no tool ran after it).
        """
        ...

    def end(self, failure: BaseException | None, *, can_suspend: bool = True) -> bool:
        """The turn's run is over; True when it suspended (calls wait for approval)."""
        ...


class BranchRecord(Protocol):
    """A branch's journal as its actor keeps it (`pride.durable.journal.BranchJournal`)."""

    @property
    def active(self) -> bool:
        """Every turn needs a run: the journal is stored, or a turn waits in it."""
        ...

    def run(self, reply: Envelope, history: History, turn_id: UUID) -> TurnRecord:
        """The run of the turn ``reply`` starts (or continues: a ``Resume``) over
        ``history``, the conversation as it is before the turn; a new turn's id is
        ``turn_id`` (a continued one keeps its own).

        Raises:
            UnknownTurn, UnknownPendingCall: a bad ``Resume``.
            ApprovalPending: a turn waits for approval, and this is other work.
        """
        ...

    def check_free(self) -> None:
        """Refuse other work while a turn waits for approval.

        Raises:
            ApprovalPending: naming the waiting turn.
        """
        ...


JournalFactory = Callable[[str], BranchRecord]
"""``factory(branch_name)``: a journal kept in memory, for a branch without a store."""

JOURNALS: JournalFactory | None = None
"""The in-memory journal factory, installed by `pride.durable` (see the module docstring)."""


def install_journals(factory: JournalFactory) -> None:
    """Make ``factory`` the maker of in-memory journals (`pride.durable` calls it)."""
    global JOURNALS
    JOURNALS = factory


class _Branch(Protocol):
    """What `open_run` needs of a branch (a `pride.Branch` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def messages(self) -> History: ...

    @property
    def acts(self) -> ActionManager: ...

    @property
    def actor(self) -> _Holder: ...


class _Holder(Protocol):
    """What `open_run` needs of a branch's actor (an `pride.actors.actor.Actor` is one)."""

    journal: BranchRecord | None
    hooks: Any


def open_run(branch: _Branch, reply: Envelope, turn_id: UUID) -> TurnRecord | None:
    """The journal run of the turn ``reply`` of ``branch`` starts, or None when the
    branch keeps no journal (called by the turn driver before ``RunStart``); a new
    turn's id is ``turn_id``.

    Raises:
        UnknownTurn, UnknownPendingCall: a bad ``Resume``.
        ApprovalPending: the branch has a turn waiting for approval, and this
            is other work.
    """
    actor = branch.actor
    journal = actor.journal
    if journal is not None and journal.active:  # every turn of a stored branch
        return journal.run(reply, branch.messages, turn_id)
    # Nothing to journal durably and nothing waiting: a run only if a call may
    # stop for approval (kept in memory).
    if isinstance(reply.command, Resume):
        raise UnknownTurn(reply.command.turn_id, f"branch {branch.name!r}")
    if not (branch.acts.needs_approval or getattr(actor.hooks, "intercepts_tools", False)):
        return None
    if journal is None:
        if JOURNALS is None:  # never: `import pride` installs it
            raise RuntimeError("no journal factory installed (import pride.durable)")
        journal = actor.journal = JOURNALS(branch.name)
    return journal.run(reply, branch.messages, turn_id)


def refuse_approvals(
    acts: ActionManager, before: Callable[[ActionCall], Awaitable[None]] | None
) -> Callable[[ActionCall], Awaitable[None]]:
    """A ``before_call`` for tool calls served where nothing can wait for a person
    (an ``Act`` outside a turn: it has no turn to suspend): a call of a tool that
    ``requires_approval`` is denied (its outcome says why; it never runs); the
    others pass on to ``before`` (the session's hook). An Act from a request
    line can thus never bypass a person's approval."""

    async def check(call: ActionCall) -> None:
        tool = acts.get(call.function)
        if tool is not None and tool.requires_approval:
            reason = (
                f"{call.function} requires approval, and an Act served outside a turn cannot "
                "wait for a person: ask for it in a turn (the model's call of it suspends the "
                "turn until session.resolve decides)"
            )
            log.warning("refused a direct call of %s: it requires approval", call.function)
            raise Defer(reason)
        if before is not None:
            await before(call)

    return check
