"""One stored ask crosses pride's modules a bounded number of times (issue 32).

`benchmarks.crossings` traces one ``ask(branch, ChatAndRecord(...))`` in a
Session with a store and an observer and counts the pride modules it visits
and its returns to a module it had left. The counts do not depend on the
machine's speed, so they are held here as a ratchet: a change that makes a
module hand the turn back and forth more fails this test, and one that lowers
them lowers the bounds (docs/architecture.md walks the ask). They do depend a
little on when the store's commit thread finishes against the turn's other
work (trio also varies the order of tasks woken together): the returns of 23
runs spread over 102-110, so the bound sits a margin above the worst seen.
"""

from __future__ import annotations

from benchmarks.crossings import Walk, traced_ask

MODULES = 49
"""The most pride modules one stored ask may visit (the store's one row bound,
``pride.store._bounds``, measures each message written, as it measures every other row:
a module of its own for one idea, where sqlite.py had its own copy; one Usage, issue 32
item 4, adds ``pride.messages.budget``: a model call's usage is the same class as a
turn's; the actor's state and the loop serving its mailbox are two modules since the
actors package has no import cycle; the carried allowance is read without entering
``pride.budget.allowance``; the hook bus says whether it is active as data, so a turn
with no handler never enters ``pride.supervisors.hooks``)."""

RETURNS = 82
"""The most returns one stored ask may make to a module it had left (102-110 seen,
109-114 once the usage record is one class, 104-110 once the runtime reads the
branch's actor, history, tools and call log as plain attributes, 93-98 once the
session awaits the actor's loop directly, the turn driver makes the turn's records
together, and the turn view reads the branch's id and user once; 92-97 in 12 runs
once an envelope reads its allowance and rider with their context variables' get; 80-85 in
15 runs once the branch asks its observer what it wants through a bound method of the
actor's, the hook bus publishes ``active`` as data, and a terminal reads the turn's usage
off its meter; 77-82 once a request is built with the view's blocks read before the
history's system text and a model call's options made before its ledger; 73-78 in 8 runs once
a store writes a turn's rows through the codec without a method of its own per row, and a
terminal is built before the turn is counted; 71-76 once a model call's journal questions
come together before its budget's and the driver makes a new turn's id before opening its
journal run; the bound keeps a margin over the worst seen: the spread is the store thread's
timing)."""


async def test_one_stored_ask_stays_within_its_crossings() -> None:
    walk = await traced_ask()
    assert walk.modules <= MODULES, walk.visits
    assert walk.returns <= RETURNS, walk.visits


def test_the_walk_counts_returns_to_modules_left_before() -> None:
    walk = Walk(("pride.a", "pride.b", "pride.a", "pride.c", "pride.b", "pride.a"))
    assert (walk.modules, walk.returns) == (3, 3)
