"""Budgets at run time: usage accounts, and the meter every model and tool call passes.

Where a [`Budget`][pride.Budget] applies (the pinned contract, DESIGN.md):

* a **turn** gets a fresh allowance: its command's ``budget``, else its
  branch's (``Branch(budget=...)``);
* a **session**'s budget is one allowance for the session's whole life,
  shared by every member and every session below it.

Each is an `Account`: usage counted against an optional budget. Accounts
chain upwards (a turn's meter, its branch's account, the session's, the
parent session's), and every call is counted on the whole chain, which is
how ``branch.usage`` and ``session.usage`` stay current.

A third kind of allowance spans turns of *different* branches: a flow's
budget bounds every node of the graph, wherever it runs. Such an account is
not on any branch's chain, so it travels with the work instead
(`pride.budget.allowance`): the turn's meter adds it to its chain.

The problem with checking only between calls (pydantic-ai's ``UsageLimits``)
is that work in flight runs on past the limit. So a `Meter` does three
things for its turn: it refuses a call whose allowance is spent (checked
against the usage so far, before the call: ``max_model_calls=3`` lets
exactly three through); it notices the moment a token or cost limit is
passed (used > allowed: when a call reports its usage, or while a reply
streams in); and then it cancels the turn's cancel scope, whose deadline is
also the ``max_duration`` limit. The turn driver turns that cancellation
into one ``RunFailed`` and a [`BudgetExceeded`][pride.BudgetExceeded] for
the caller. A session's token or cost limit, once passed, stops every turn
drawing on it at once, not only the one whose call passed it.

A turn resumed from its journal (approved after it stopped, or restored
after a crash) answers the steps the journal holds without making them
again. Those calls were counted on the whole chain when they ran, so a
*replayed* call is counted only on the turn's own meters (the turn's, and a
nested command's): ``RunEnd.usage`` and the turn's budget see the whole
turn, while ``branch.usage``, ``session.usage``, a session's or a flow's
budget count each real call once. After a crash the calls made before it
were counted in the process that made them (usage is not stored), so this
process counts only what runs in it.

Nothing here costs anything measurable when no budget is set (an unbudgeted meter counts).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..context import count_tokens
from ..errors import BudgetExceeded
from ..messages import Budget, Usage

__all__ = ["Account", "Meter"]

log = logging.getLogger("pride.budget")


class Account:
    """Usage counted against one allowance (or none): a branch's or a session's.

    Args:
        budget: the limits, or None to only count.
        scope: who it belongs to, for errors (``"session team"``).
        parent: the account above (a branch's session, a session's parent).

    A limited account keeps its figures for its whole life: a session's
    budget is never refilled. Its ``max_duration`` counts from `begin`.
    """

    # Kept lean: an account (a turn's meter) is made for every turn, and what
    # only limits need lives in `_Limit`, made only for an account with a budget.
    __slots__ = (
        "budget",
        "cache_write_tokens",
        "cached_tokens",
        "cost_usd",
        "input_tokens",
        "limit",
        "model_calls",
        "output_tokens",
        "parent",
        "reasoning_tokens",
        "scope",
        "tool_calls",
        "turns_done",
        "turns_failed",
        "turns_suspended",
    )

    def __init__(self, budget: Budget | None, *, scope: str, parent: Account | None = None) -> None:
        self.parent = parent
        self.scope = scope
        self.input_tokens = self.output_tokens = self.cached_tokens = 0
        self.cache_write_tokens = self.reasoning_tokens = 0
        self.model_calls = self.tool_calls = 0
        self.turns_done = self.turns_failed = self.turns_suspended = 0
        self.cost_usd: float | None = None
        if budget is not None and budget.limited:
            self.budget: Budget | None = budget
            self.limit: _Limit | None = _Limit()
        else:
            self.budget = self.limit = None

    def __repr__(self) -> str:
        return f"<Account {self.scope} {self.usage()} {self.budget!r}>"

    def begin(self, now: float) -> None:
        """Start the ``max_duration`` clock (once: a restart does not reset it)."""
        limit = self.limit
        if limit is None or limit.started_at is not None:
            return
        limit.started_at = now
        assert self.budget is not None
        if self.budget.max_duration is not None:
            limit.deadline = now + self.budget.max_duration

    def usage(self) -> Usage:
        """What was counted here so far."""
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.cost_usd,
            self.model_calls,
            self.tool_calls,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    def count_turn(self, ended: str) -> None:
        """Count a finished turn here and on every account above: ``ended`` is
        ``"done"`` (``RunEnd``), ``"failed"`` or ``"suspended"``. This is how
        ``session.statistics()`` counts turns without watching for their signals."""
        account: Account | None = self
        while account is not None:
            if ended == "done":
                account.turns_done += 1
            elif ended == "failed":
                account.turns_failed += 1
            else:
                account.turns_suspended += 1
            account = account.parent

    @property
    def exceeded(self) -> BudgetExceeded | None:
        """Set once a token or cost limit was passed: every later check refuses."""
        return self.limit.exceeded if self.limit is not None else None

    # -------------------------------------------------------------- checks

    def refusal(self, kind: str, now: float) -> BudgetExceeded | None:
        """Why a ``kind`` (``"model"`` or ``"tool"``) call may not start now, or None."""
        limit, budget = self.limit, self.budget
        if limit is None or budget is None:
            return None
        if limit.exceeded is not None:
            return limit.exceeded
        if now >= limit.deadline:
            return self.late(now)
        if kind == "model":
            allowed, made, name = budget.max_model_calls, self.model_calls, "max_model_calls"
        else:
            allowed, made, name = budget.max_tool_calls, self.tool_calls, "max_tool_calls"
        if allowed is not None and made >= allowed:
            return BudgetExceeded(name, made + 1, allowed, scope=self.scope)
        return self.overrun()

    def overrun(self) -> BudgetExceeded | None:
        """The token or cost limit passed (used > allowed), if any."""
        budget = self.budget
        if budget is None:
            return None
        if budget.max_input_tokens is not None and self.input_tokens > budget.max_input_tokens:
            return BudgetExceeded(
                "max_input_tokens", self.input_tokens, budget.max_input_tokens, scope=self.scope
            )
        if budget.max_output_tokens is not None and self.output_tokens > budget.max_output_tokens:
            return BudgetExceeded(
                "max_output_tokens", self.output_tokens, budget.max_output_tokens, scope=self.scope
            )
        cost = self.cost_usd
        if budget.max_cost_usd is not None and cost is not None and cost > budget.max_cost_usd:
            return BudgetExceeded("max_cost_usd", cost, budget.max_cost_usd, scope=self.scope)
        return None

    def late(self, now: float) -> BudgetExceeded:
        """The error for running past this account's ``max_duration``."""
        assert self.limit is not None and self.budget is not None
        assert self.budget.max_duration is not None
        started = self.limit.started_at if self.limit.started_at is not None else now
        return BudgetExceeded(
            "max_duration", now - started, self.budget.max_duration, scope=self.scope
        )

    # ----------------------------------------------------- shared stopping

    def exceed(self, error: BudgetExceeded) -> None:
        """Mark the allowance spent and stop every live turn drawing on it."""
        limit = self.limit
        if limit is None:
            return
        if limit.exceeded is None:
            limit.exceeded = error
            # Every turn it stops tells its caller; this says it once for the whole account.
            log.info("%s; every turn drawing on it stops", error)
        for meter in list(limit.meters):
            meter.trip(error)


class _Limit:
    """The state of an account with a budget: its clock, whether it is spent,
    and the live turns drawing on it."""

    __slots__ = ("deadline", "exceeded", "meters", "started_at", "unpriced_noted")

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.deadline = math.inf
        self.exceeded: BudgetExceeded | None = None
        self.meters: set[Meter] = set()
        self.unpriced_noted = False


class Meter(Account):
    """One turn's allowance (or an ``Act``'s, or a nested command's), over the
    accounts above it.

    Its own figures are the turn's usage (``RunEnd`` reports them). Its
    ``limited`` accounts are itself (when it has a budget) and every account
    above with a budget; only those are checked.

    Args:
        budget: the turn's allowance (the command's, else the branch's).
        parent: the account above: the branch's, or the turn's meter for a
            nested command with a budget of its own.
        scope: who the allowance belongs to, for errors.
        carried: an allowance the work draws on besides its own chain (a
            flow's: see `drawing_on`), with the accounts above it.

    A call is counted on itself and on its ``above``: the accounts above it,
    then the carried ones (each account once). They are fixed when the meter
    is made: what a turn draws on does not change while it runs.
    """

    __slots__ = ("above", "cancel", "error", "limited", "on_trip", "stop_at", "watches_output")

    def __init__(
        self,
        budget: Budget | None,
        parent: Account | None,
        scope: str = "turn",
        carried: Account | None = None,
    ) -> None:
        super().__init__(budget, scope=scope, parent=parent)
        self.error: BudgetExceeded | None = None
        # One meter is made per turn: what it counts on is gathered in one pass,
        # noting on the way whether any of it has a budget (mostly none does).
        # The meter itself is not among them: a meter holding itself would be
        # a reference cycle, left to the garbage collector after every turn.
        above: list[Account] = []
        limited = self.budget is not None
        if isinstance(parent, Meter):  # a nested command's: the turn's and all above it
            above.append(parent)
            above.extend(parent.above)
            limited = limited or bool(parent.limited)
        else:
            account = parent
            while account is not None:
                above.append(account)
                if account.budget is not None:
                    limited = True
                account = account.parent
        while carried is not None:
            if carried not in above:
                above.append(carried)
                if carried.budget is not None:
                    limited = True
            carried = carried.parent
        self.above: tuple[Account, ...] = tuple(above)
        self.limited: tuple[Account, ...] = ()
        self.watches_output = False
        self.cancel: trio.CancelScope | None = None
        self.on_trip: Callable[[], None] | None = None
        # The scope's deadline: the earliest max_duration of the allowances it draws on.
        self.stop_at = math.inf
        if limited:
            chain = (self, *self.above)
            self._enforce(tuple(account for account in chain if account.budget is not None))

    def _enforce(self, limited: tuple[Account, ...]) -> None:
        self.limited = limited
        self.watches_output = any(
            account.budget is not None and account.budget.max_output_tokens is not None
            for account in limited
        )
        self.begin(trio.current_time())
        for account in limited:
            assert account.limit is not None
            self.stop_at = min(self.stop_at, account.limit.deadline)
            if account is not self:
                account.limit.meters.add(self)

    def close(self) -> None:
        """The work is over: stop watching the shared accounts."""
        for account in self.limited:
            if account is not self and account.limit is not None:
                account.limit.meters.discard(self)
        # A meter with a budget of its own is among its limited accounts: a
        # reference cycle, which would leave it to the garbage collector.
        self.limited = tuple(account for account in self.limited if account is not self)

    def exceed(self, error: BudgetExceeded) -> None:
        """Mark the allowance spent: this turn stops, and so does nested work on it."""
        super().exceed(error)
        self.trip(error)

    # ------------------------------------------------------------ trip

    def trip(self, error: BudgetExceeded) -> None:
        """Stop the work: remember why and cancel its scope (and nested work)."""
        if self.error is not None:
            return
        self.error = error
        if self.cancel is not None:
            self.cancel.cancel()
        if self.on_trip is not None:
            self.on_trip()

    def _refuse(self, error: BudgetExceeded) -> BudgetExceeded:
        self.trip(error)
        return self.error or error

    def _counted(self, replayed: bool) -> tuple[Account, ...]:
        """What a call is counted on: the whole chain, or for a call the journal
        answered (``replayed``), the turn's own meters only."""
        if not replayed:
            return (self, *self.above)
        return (self, *(account for account in self.above if isinstance(account, Meter)))

    def _check(self, kind: str, replayed: bool = False) -> None:
        if self.error is not None:
            raise self.error
        now = trio.current_time()
        for account in self.limited:
            if replayed and not isinstance(account, Meter):
                continue  # counted there when it ran
            refused = account.refusal(kind, now)
            if refused is not None:
                self.trip(refused)
                del refused  # the traceback holds this frame: keep no local to the error
                raise self.error  # type: ignore[misc]  # set by trip

    # -------------------------------------------------------- model calls

    def admit_model_call(self, *, replayed: bool = False) -> None:
        """Count a model call about to start, or refuse it; a ``replayed`` one (the
        journal answers it) only on the turn's own meters (see the module docstring).

        Raises:
            BudgetExceeded: an allowance is spent (the work is stopped too).
        """
        if self.limited:
            self._check("model", replayed)
        for account in self._counted(replayed):
            account.model_calls += 1

    def withdraw_model_call(self) -> None:
        """Take back a model call `admit_model_call` counted that never left: its
        request was never sent (refused for want of an API key, a connection
        refused, an error status, its turn cancelled while a hook ran before
        it), so it spent nothing and made no call; its tokens, none, say the
        same (what a call spent is counted once its request was sent:
        `pride.llm`'s ``Exchange``)."""
        for account in self._counted(False):
            account.model_calls -= 1

    def add_usage(self, usage: Usage, *, replayed: bool = False) -> None:
        """`add_tokens` with every kind of a model call's ``usage``.

        Raises:
            BudgetExceeded: a token or cost limit is now passed.
        """
        self.add_tokens(
            usage.input_tokens,
            usage.output_tokens,
            usage.cached_tokens,
            usage.cost_usd,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            replayed=replayed,
        )

    def add_tokens(
        self,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int,
        cost_usd: float | None,
        *,
        cache_write_tokens: int = 0,
        reasoning_tokens: int = 0,
        replayed: bool = False,
    ) -> None:
        """Count a finished model call's usage on the whole chain (a ``replayed``
        call's on the turn's own meters only).

        Raises:
            BudgetExceeded: a token or cost limit is now passed.
        """
        for account in self._counted(replayed):
            account.input_tokens += input_tokens
            account.output_tokens += output_tokens
            account.cached_tokens += cached_tokens
            account.cache_write_tokens += cache_write_tokens
            account.reasoning_tokens += reasoning_tokens
            if cost_usd is not None:
                account.cost_usd = (account.cost_usd or 0.0) + cost_usd
        if not self.limited:
            return
        if cost_usd is None and not replayed:
            self._note_unpriced()
        for limited in self.limited:
            if replayed and not isinstance(limited, Meter):
                continue
            passed = limited.overrun()
            if passed is not None:
                if limited is not self:
                    limited.exceed(passed)  # every turn on the shared allowance stops
                raise self._refuse(passed)

    def add_spent(self, usage: Usage) -> None:
        """Count what a call that did not finish spent (a stream left early or
        cut: [`ModelStream.usage`][pride.llm.ModelStream.usage]), without raising:
        the call's own exception is the one on its way out. A limit it passes is
        passed all the same: this turn's later calls are refused, and a shared
        allowance stops every turn drawing on it.
        """
        # Passing a limit trips the meter (`_refuse`), which stops the work once it is back.
        with contextlib.suppress(BudgetExceeded):
            self.add_usage(usage)

    def streamed(self, text: str, so_far: int) -> int:
        """Count a streamed delta's tokens (an estimate); ``so_far`` is this reply's count.

        Returns the new count.

        Raises:
            BudgetExceeded: the reply has run past a ``max_output_tokens``
                limit; the caller cuts the stream and counts what the stream
                spent (`add_spent`: the provider bills what it generated).
        """
        so_far += count_tokens(text)
        for account in self.limited:
            budget = account.budget
            assert budget is not None
            allowed = budget.max_output_tokens
            if allowed is not None and account.output_tokens + so_far > allowed:
                error = BudgetExceeded(
                    "max_output_tokens",
                    account.output_tokens + so_far,
                    allowed,
                    scope=account.scope,
                )
                if account is not self:
                    account.exceed(error)
                raise self._refuse(error)
        return so_far

    def _note_unpriced(self) -> None:
        for account in self.limited:
            budget, limit = account.budget, account.limit
            capped = budget is not None and budget.max_cost_usd is not None
            if capped and limit is not None and not limit.unpriced_noted:
                limit.unpriced_noted = True
                log.warning(
                    "%s budget: a model call reported no cost and is not priced; "
                    "max_cost_usd counts it as free",
                    account.scope,
                )

    # --------------------------------------------------------- tool calls

    def admit_tool_call(self, *, replayed: bool = False) -> None:
        """Count a tool call about to start, or refuse it; a ``replayed`` one (the
        journal answers it) only on the turn's own meters.

        Raises:
            BudgetExceeded: an allowance is spent (the work is stopped too).
        """
        if self.limited:
            self._check("tool", replayed)
        for account in self._counted(replayed):
            account.tool_calls += 1

    # ---------------------------------------------------------- the scope

    async def run(self, work: Callable[[], Awaitable[Any]]) -> Any:
        """Run ``work()`` in the allowance's cancel scope (its deadline is ``max_duration``).

        Only for a meter with limits to enforce (``limited``); an unlimited
        one's work is simply awaited by its caller (entering a cancel scope
        costs more than the rest of a short turn).

        Raises:
            BudgetExceeded: the allowance was exceeded (or ran out of time)
                while the work ran.
        """
        with trio.CancelScope(deadline=self.stop_at) as cancel:
            self.cancel = cancel
            if self.error is not None:
                cancel.cancel()
            try:
                result = await work()
            finally:
                self.cancel = None
            if self.error is not None:
                raise self.error
            return result
        raise self.stop_reason()

    def stop_reason(self) -> BudgetExceeded:
        """Why the allowance stopped its work: the tripped error, else its deadline."""
        if self.error is None:

            def deadline(account: Account) -> float:
                return account.limit.deadline if account.limit is not None else math.inf

            late = min(self.limited, key=deadline)
            self.error = late.late(trio.current_time())
        return self.error
