"""Turns answered by their commit: the actor hands a finished turn to the store's
commit and serves its next item meanwhile.

A branch with a store ends every turn (and every ``Act``) with a commit of
what it recorded: its caller is answered ok only once that commit succeeded
(DESIGN.md, "What pride trusts"). Waiting for it in the actor's own task
costs a wake-up of every actor for every commit, and lines the waiting
actors up behind the commit's lock. Instead, a turn with nothing left to end
under a shield (no nested tasks, no signal deliveries, not a stream) hands
its end to the commit: the `CommitBarrier` queues the turn's rows at once
and asks the store to call back once they are durable
(`BranchStore.after_commit`). When the commit ends, every turn of its
batch is ended in one pass, in queue order, in the event loop's thread, by
the turn's `TurnEnd` (`pride.actors.ending`), the same end every turn takes:
the turn is counted on the session's accounts, its terminal signal is
dispatched (if a subscriber may want it), its trace is ended and its caller
is answered, with ``StoreError`` if the commit failed. Nothing of the order
a caller sees changes: still committed before answered, still the terminal
before the answer.

Meanwhile the actor serves its next item. A later turn of the branch built
on an earlier one still in flight queues its rows behind the earlier ones;
a commit of the branch's rows that fails fails the turns whose rows it held
and every turn that was waiting behind it (as ``flush`` does), and serving
goes on. When a subscriber may see the turn's terminal, the actor waits for
it before it takes the next item, so each branch's signals keep their order
(a turn's terminal before the next turn's ``RunStart``); nobody watching,
nothing waits.

A turn that recorded nothing (and whose branch has nothing in flight) has
nothing to wait for: it ends at once, in the actor's task, with no cancel
scope and no task switch (an ``Act`` with no tool call, a ``Chat``).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..actors import Reply
    from ..actors.actor import HandedTurn, ServedBranch
    from ..actors.turn import TurnState

__all__ = ["CommitBarrier"]

log = logging.getLogger("pride.actor")


class CommitBarrier:
    """A turn barrier that commits what the turn recorded (a store's), in two halves
    so that the actor need not wait for it.

    Awaited (``await barrier(state)``) it is an ordinary barrier: `stage`, then
    wait for the commit. The actor uses the halves instead when it can:
    `stage` (synchronous) queues what the turn left, then `after_commit`
    arranges a callback for when it is durable.

    Args:
        stage: ``stage(state)`` queues what the turn (``state``; None after an
            ``Act``) left to commit.
        after_commit: ``after_commit(done)`` calls ``done(failure)`` later, once
            what was staged is durable (``failure`` None) or its commit failed;
            returns False (calling nothing) if nothing waits for a commit.
        flush: waits until what was staged is durable (raises ``StoreError``
            if its commit failed).

    The halves are the callables themselves, called with no layer between
    (every turn of a stored branch calls both). As an actor's only barrier it
    is the actor's `CommitHandover` (`pride.actors.actor`): the actor hands it
    each turn (`hand_over_turn`) and each ``Act`` (`hand_over_step`) to end.
    """

    __slots__ = ("after_commit", "flush", "stage")

    def __init__(
        self,
        stage: Callable[[TurnState | None], None],
        after_commit: Callable[[Callable[[Exception | None], None]], bool],
        flush: Callable[[], Awaitable[None]],
    ) -> None:
        self.stage = stage
        self.after_commit = after_commit
        self.flush = flush

    async def __call__(self, state: TurnState | None) -> None:
        """Stage, and wait for the commit.

        Raises:
            StoreError: the commit failed.
        """
        self.stage(state)
        await self.flush()

    def hand_over_turn(self, branch: ServedBranch, state: TurnState, end: HandedTurn) -> bool:
        """Stage the turn's commit and hand its end to it: True if handed over (the
        commit calls ``end``), False if the driver ends it now (nothing waits for a
        commit, or staging failed: ``end`` then fails the turn with the error)."""
        try:
            self.stage(state)
        except Exception as exc:
            end.uncommitted(exc)
            return False
        if not self.after_commit(end):
            return False
        reply = end.reply
        reply.start(reply.turn_id, None)  # a caller giving up now cancels nothing of the actor's
        if end.watched:
            end.context = contextvars.copy_context()  # what its subscribers see (the turn's)
            branch.actor.answering = end  # its terminal goes before the branch's next signal
        if state.trace is not None:  # the span ends later, its context is restored here, now
            state.trace.leave()
        return True

    def hand_over_step(self, branch: ServedBranch, reply: Reply, result: Any) -> None:
        """Stage an ``Act``'s commit and answer it once that is durable (at once if
        nothing waits for a commit)."""
        try:
            self.stage(None)
        except Exception as exc:
            log.error("an Act of branch %r: %s", branch.name, exc, exc_info=exc)
            reply.fail(exc)
            return
        name = branch.name

        def done(failure: Exception | None) -> None:
            if failure is None:
                reply.succeed(result)
                return
            log.error("an Act of branch %r: %s", name, failure)
            reply.fail(failure)

        if self.after_commit(done):
            reply.start(None, None)
        else:
            reply.succeed(result)
