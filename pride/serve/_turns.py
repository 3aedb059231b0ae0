"""Turns sent without waiting (``POST .../send``), followed to their outcome.

A send is answered 202 once its turn has started, with the turn's id
(pride gives a turn its id when it starts, not when it is queued); from then
on ``GET /v1/turns/{turn_id}`` says where it is: ``running``, ``done`` (with
its result), ``failed`` (with its error) or ``suspended`` (waiting for
approval, with the pending calls; ``POST /v1/turns/{turn_id}/resolve``
continues it). The turn goes on whatever its sender does: a send's outcome
is awaited by a task of the server, not of the request.

A suspended turn may be continued by someone other than this server's
resolve (the application's own ``session.resolve``, from its code or a
tool of another branch): the record follows it by its signals from then
on (`TrackedTurns.watch`): ``running`` once it runs again, ``done`` or
``failed`` when it ends. Its result went to whoever resolved it, so a turn
done so says that instead of a result.

Outcomes are kept for the last `KEPT` finished turns (a bounded record, the
oldest forgotten first); turns still running are always kept (their number
is bounded by the mailboxes).
"""

from __future__ import annotations

import collections
import logging
from typing import Any
from uuid import UUID

import trio

from ..actors import Reply, Target
from ..errors import ApprovalRequired
from ..messages import Command, RunFailed, RunStart, RunSuspended, Signal, TurnEnded
from ..messages.requests import describe_error, plain_result

__all__ = ["ELSEWHERE", "KEPT", "Followed", "StartedReply", "TrackedTurns", "waiting"]

log = logging.getLogger("pride.serve")

KEPT = 10_000
"""Finished turns whose outcome ``GET /v1/turns/{turn_id}`` can still report."""

ELSEWHERE = (
    "resolved outside this server (by the application's session.resolve): its result went "
    "to whoever resolved it"
)
"""What ``GET /v1/turns/{turn_id}`` says in place of the result of a turn resolved so."""


class StartedReply(Reply):
    """A `Reply` that says when its command starts (or ends without starting).

    The serving side calls ``start`` when it takes the envelope; a send is
    answered at that moment, when the turn id exists.
    """

    __slots__ = ("started",)

    def __init__(self, target: Target, command: Command) -> None:
        super().__init__(target, command)
        self.started = trio.Event()

    def start(self, turn_id: UUID | None, cancel_scope: Any) -> None:
        super().start(turn_id, cancel_scope)
        self.started.set()

    def succeed(self, result: Any) -> None:
        super().succeed(result)
        self.started.set()

    def fail(self, error: BaseException) -> None:
        super().fail(error)
        self.started.set()


class Followed:
    """What is known of one followed turn."""

    __slots__ = ("branch", "elsewhere", "error", "result", "state", "turn_id")

    def __init__(self, turn_id: UUID, branch: str) -> None:
        self.turn_id = turn_id
        self.branch = branch
        self.state = "running"
        self.result: Any = None
        self.error: dict[str, Any] | None = None
        self.elsewhere = False  # resolved outside this server: its result is not known here

    def settle(self, outcome: Any, error: BaseException | None) -> None:
        """Record the turn's outcome: its result, or its error."""
        self.elsewhere = False
        if error is None:
            self.state, self.result, self.error = "done", plain_result(outcome), None
        else:
            suspended = isinstance(error, ApprovalRequired)
            self.state = "suspended" if suspended else "failed"
            self.result, self.error = None, describe_error(error)

    def describe(self) -> dict[str, Any]:
        """The answer of ``GET /v1/turns/{turn_id}``."""
        answer: dict[str, Any] = {
            "turn_id": str(self.turn_id),
            "branch": self.branch,
            "state": self.state,
        }
        if self.state == "done":
            answer["result"] = self.result
            if self.elsewhere:
                answer["note"] = ELSEWHERE
        elif self.error is not None:
            answer["error"] = self.error
        return answer


class TrackedTurns:
    """The followed turns of one server, by turn id."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._turns: dict[UUID, Followed] = {}
        self._finished: collections.OrderedDict[UUID, None] = collections.OrderedDict()
        # Suspended turns no resolve of this server is continuing: their signals say
        # what becomes of them.
        self._suspended: dict[UUID, Followed] = {}
        self._session: Any = None

    def __len__(self) -> int:
        return len(self._turns)

    def watch(self, session: Any) -> None:
        """Follow the suspended turns of ``session``'s tree by their signals from now on."""
        self._session = session
        session.observe(RunStart, TurnEnded, handler=self._on_signal)

    def close(self) -> None:
        """Stop following signals (idempotent)."""
        if self._session is not None:
            self._session.unobserve(self._on_signal)
            self._session = None

    def resolving(self, followed: Followed) -> None:
        """This server's resolve continues ``followed``: its answer, not the turn's
        signals, says how the turn ends (it has the result)."""
        self._suspended.pop(followed.turn_id, None)
        followed.state, followed.error = "running", None

    def _on_signal(self, signal: Signal) -> None:
        followed = self._suspended.get(getattr(signal, "turn_id", None))  # type: ignore[arg-type]
        if followed is None:
            return
        if isinstance(signal, RunStart):
            followed.state, followed.error = "running", None
            return
        assert isinstance(signal, TurnEnded)
        if isinstance(signal, RunSuspended):  # it reached another call to approve
            waits = waiting(self._session, followed.turn_id)
            if waits is None:  # resolved again already: its own signals follow
                waits = ApprovalRequired(followed.turn_id, (), followed.branch)
            self.settled(followed, None, waits)
            return
        del self._suspended[followed.turn_id]
        if isinstance(signal, RunFailed):
            followed.state, followed.result = "failed", None
            followed.error = {"type": signal.error_type, "message": signal.error_message}
        else:
            followed.state, followed.result, followed.error = "done", None, None
            followed.elsewhere = True
        self._finish(followed)

    def get(self, turn_id: UUID) -> Followed | None:
        """The followed turn with this id, if any."""
        return self._turns.get(turn_id)

    def follow(self, nursery: trio.Nursery, turn_id: UUID, branch: str, reply: Reply) -> Followed:
        """Follow ``reply`` (its turn ``turn_id`` has started) to its outcome, in ``nursery``."""
        followed = self._turns.get(turn_id) or Followed(turn_id, branch)
        self._turns[turn_id] = followed
        nursery.start_soon(self._await, followed, reply)
        return followed

    async def _await(self, followed: Followed, reply: Reply) -> None:
        try:
            result = await reply.result()
        except Exception as exc:  # a failed turn is an outcome
            self.settled(followed, None, exc)
            return
        except BaseException:
            # The server is stopping: the turn goes on until the session stops it.
            raise
        self.settled(followed, result, None)

    def settled(self, followed: Followed, outcome: Any, error: BaseException | None) -> None:
        """Record ``followed``'s outcome (also after a resolve continued it)."""
        followed.settle(outcome, error)
        if followed.state == "suspended":
            self._suspended[followed.turn_id] = followed
        else:
            self._suspended.pop(followed.turn_id, None)
        self._finish(followed)

    def _finish(self, followed: Followed) -> None:
        if followed.turn_id not in self._turns:
            self._turns[followed.turn_id] = followed
        self._finished[followed.turn_id] = None
        self._finished.move_to_end(followed.turn_id)
        while len(self._finished) > self._kept:
            old, _ = self._finished.popitem(last=False)
            kept = self._turns.get(old)
            if kept is not None and kept.state != "running":
                del self._turns[old]
                self._suspended.pop(old, None)


def waiting(session: Any, turn_id: UUID) -> ApprovalRequired | None:
    """What the turn ``turn_id`` of ``session``'s tree waits for, as its caller was
    told, while it waits for a decision; None once it does not (or without a session)."""
    if session is None:
        return None
    turn = next((t for t in session.suspended_turns() if t.turn_id == turn_id), None)
    if turn is None:
        return None
    return ApprovalRequired(turn_id, turn.pending, turn.branch_name)
