"""The store and durable turns: locking, approvals, suspended and resumed turns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from ..messages import PendingCall, PrideError

__all__ = [
    "ApprovalPending",
    "ApprovalRequired",
    "Defer",
    "JournalMismatch",
    "StoreError",
    "StoreLocked",
    "TurnAbandoned",
    "UnknownPendingCall",
    "UnknownTurn",
]


class StoreError(PrideError):
    """The branch store cannot be opened, read or written."""


class StoreLocked(StoreError):
    """Another process (or another open [`BranchStore`][pride.store.BranchStore]) is writing
    the store: one writer at a time, so that no committed turn is overwritten.

    ``path`` is the store; ``holder`` what the holder recorded about itself
    (``"pid 4242 on host since ..."``), or None if it could not be read.
    """

    def __init__(self, path: object, holder: str | None) -> None:
        self.path = path
        self.holder = holder
        who = f"another process ({holder})" if holder else "another process"
        super().__init__(
            f"{path} is in use by {who}: one process writes a store at a time; stop it "
            "or give this one another store (`pride inspect` reads a store in use)"
        )


def _listed(pending: Sequence[PendingCall]) -> str:
    return ", ".join(f"{call.function} ({call.call_id})" for call in pending) or "nothing"


class ApprovalRequired(PrideError):
    """The turn stopped before tool calls that need a person's approval.

    Nothing of the turn is lost: its completed steps are in the turn journal
    and the conversation is as it was before the turn. Continue it with
    ``await session.resolve(turn_id, {call_id: pride.Approve() |
    pride.Deny(reason)})`` (the [`Resume`][pride.Resume] command), from this
    process or, with a store, from another one after a restart.

    Attributes:
        turn_id: the suspended turn.
        pending: the calls it waits on ([`PendingCall`][pride.messages.PendingCall]:
            ``call_id``, ``function``, ``arguments``).
        branch_name: the branch the turn belongs to.
    """

    def __init__(
        self, turn_id: UUID, pending: Sequence[PendingCall], branch_name: str = ""
    ) -> None:
        self.turn_id = turn_id
        self.pending = tuple(pending)
        self.branch_name = branch_name
        where = f" of branch {branch_name!r}" if branch_name else ""
        super().__init__(
            f"turn {turn_id}{where} waits for approval of {_listed(self.pending)}: resolve it "
            "with session.resolve(turn_id, {call_id: Approve() | Deny(reason)})"
        )

    def details(self) -> dict[str, Any]:
        """The turn id, branch and pending calls as plain data (for answer lines)."""
        return {
            "turn_id": str(self.turn_id),
            "branch": self.branch_name,
            "pending": [
                {"call_id": c.call_id, "function": c.function, "arguments": dict(c.arguments)}
                for c in self.pending
            ],
        }


class ApprovalPending(PrideError):
    """Work was refused because a turn of the branch waits for approval.

    A suspended turn's tool calls are unanswered, and a conversation with an
    unanswered tool call cannot go on (providers refuse it), so the branch
    takes no other work until the turn is resolved (approved, denied, or
    abandoned with ``Resume(turn_id, abandon=reason)``). The command was not
    started. The attributes name the waiting turn, as on
    [`ApprovalRequired`][pride.ApprovalRequired].
    """

    def __init__(
        self, turn_id: UUID, pending: Sequence[PendingCall], branch_name: str = ""
    ) -> None:
        self.turn_id = turn_id
        self.pending = tuple(pending)
        self.branch_name = branch_name
        super().__init__(
            f"branch {branch_name!r} takes no other work while turn {turn_id} waits for "
            f"approval of {_listed(self.pending)}: resolve that turn first "
            "(session.resolve(turn_id, {call_id: Approve() | Deny(reason)}))"
        )

    details = ApprovalRequired.details


class Defer(PrideError):
    """Raised (or returned) by a ``before_tool_call`` hook: this call needs a
    person's approval. The call does not run; the turn suspends with
    [`ApprovalRequired`][pride.ApprovalRequired] as for a tool declared
    ``requires_approval=True``. Once approved, the call runs without asking
    the hook to defer it again."""

    def __init__(self, reason: str = "a hook asked for approval") -> None:
        self.reason = reason
        super().__init__(reason)


class UnknownTurn(PrideError, LookupError):
    """No unfinished (suspended or interrupted) turn has that id where it was looked up."""

    def __init__(self, turn_id: UUID | str, where: str = "") -> None:
        self.turn_id = turn_id
        super().__init__(
            f"no unfinished turn {turn_id}"
            + (f" in {where}" if where else "")
            + " (it may have ended already, or belong to another branch or store)"
        )


class UnknownPendingCall(PrideError, LookupError):
    """A decision names a call the turn does not wait on."""

    def __init__(self, turn_id: UUID, call_ids: Sequence[str], pending: Sequence[str]) -> None:
        self.turn_id = turn_id
        self.call_ids = tuple(call_ids)
        waiting = ", ".join(pending) or "none"
        super().__init__(
            f"turn {turn_id} does not wait on call(s) {', '.join(map(repr, self.call_ids))} "
            f"(pending: {waiting}); nothing was changed"
        )


class TurnAbandoned(PrideError):
    """An unfinished turn was given up instead of continued: by its branch's restart
    policy (``resume="abandon"``) after a crash, or by ``Resume(turn_id, abandon=...)``.
    The conversation is as it was before the turn."""

    def __init__(self, turn_id: UUID, reason: str) -> None:
        self.turn_id = turn_id
        self.reason = reason
        super().__init__(f"turn {turn_id} abandoned: {reason}")


class JournalMismatch(PrideError):
    """A resumed turn asked for a different step than its journal holds (its
    operation, its tools or its command changed since the turn began). The turn
    fails rather than run anything twice."""
