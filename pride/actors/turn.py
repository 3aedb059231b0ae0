"""Turn-scoped execution state: what one turn owns, on trio.

A **turn** is the execution of one model-invoking command, from ``RunStart``
to its single terminal signal. What a turn owns lives in its
`TurnExecutionContext`: the model snapshot, provider blocks and
report, the pending loop control. What the runtime keeps beside it (the
command, usage so far, the turn's task groups) is the `TurnState`,
never handed to user code. The branch's actor holds only a pointer to the
one active turn, so out-of-band callers (observers, controllers) can address
it with `Branch.control`.

Work running inside a turn sees it through a `contextvars.ContextVar`
binding; trio copies the context into tasks started from the turn, so a
nested verb call from the operation, a tool or a task spawned with
`TurnScope.start_soon` joins the turn instead of queueing behind it.
A binding is live only while the branch's pointer still refers to its
context and the phase is ``"active"``; a stale binding (closed, or another
turn's) makes the caller a new top-level contender.
"""

from __future__ import annotations

import contextvars
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import attrs
import trio

from ..budget.accounts import Meter
from ..errors import Escalate, LoopBreak, StopStream
from ..messages import WorkCommand

if TYPE_CHECKING:
    from .journaling import TurnRecord

__all__ = [
    "FINALIZE_GRACE",
    "LoopControl",
    "LoopDirective",
    "TurnExecutionContext",
    "TurnPhase",
    "TurnScope",
    "TurnState",
    "TurnTasks",
    "await_bounded",
    "check_control",
    "current_turn",
]

log = logging.getLogger("pride.turn")

# Bound on a turn's shielded finalisation (nested-task cancellation, signal
# drain, terminal observers). The design pride follows sets no drain timeout; an unbounded
# shield could pin a branch forever on a stuck observer, so pride bounds it and
# logs when the bound is hit.
FINALIZE_GRACE = 10.0


async def await_bounded(pending: Any, what: str, logger: logging.Logger) -> None:
    """Await subscriber work for at most FINALIZE_GRACE; past it, cancel and log."""
    with trio.move_on_after(FINALIZE_GRACE) as bound:
        await pending
    if bound.cancelled_caught:
        logger.error("%s took over %ss; cancelled", what, FINALIZE_GRACE)


TurnPhase = Literal["active", "finalizing", "closed"]
_PHASE_ORDER = {"active": 0, "finalizing": 1, "closed": 2}


class LoopDirective(enum.Enum):
    """What an out-of-band controller asks a running loop to do."""

    CONTINUE = "continue"
    """Carry on (a no-op for `check_control`)."""
    BREAK = "break"
    """Stop the loop; the turn fails with [`LoopBreak`][pride.LoopBreak]."""
    CANCEL = "cancel"
    """End the stream cleanly ([`StopStream`][pride.StopStream]); the turn ends normally."""


@attrs.frozen
class LoopControl:
    """A directive written into one turn's context, with an optional reason."""

    directive: LoopDirective
    reason: str | None = None


@attrs.define(eq=False)
class TurnExecutionContext:
    """What one top-level turn owns. Never serialised.

    Attributes:
        turn_id: a fresh uuid4 per top-level turn.
        model: the model snapshot resolved when the turn started.
        owner_task: the trio task running the turn (the branch's actor).
        phase: ``"active"`` → ``"finalizing"`` → ``"closed"``, never backward.
        provider_blocks: context-provider text injected into this turn's requests.
        provider_report: the context providers' report for this turn, if any ran.
        control: the pending loop control directive, if any.
    """

    turn_id: UUID
    model: Any
    owner_task: trio.lowlevel.Task
    phase: TurnPhase = "active"
    provider_blocks: tuple[str, ...] = ()
    provider_report: Any = None
    control: LoopControl | None = None

    def advance(self, phase: TurnPhase) -> None:
        """Move to ``phase``; phases only move forward.

        Raises:
            RuntimeError: ``phase`` is earlier than the current one.
        """
        if _PHASE_ORDER[phase] < _PHASE_ORDER[self.phase]:
            raise RuntimeError(f"turn phase cannot go back from {self.phase} to {phase}")
        self.phase = phase


@attrs.define(eq=False)
class TurnState:
    """The runtime's side of one top-level turn: what it tracks beside the context.

    Attributes:
        context: the turn's `TurnExecutionContext`.
        command: the work command the turn serves.
        started_at: ``time.perf_counter()`` when the turn started.
        meter: the turn's allowance and usage so far (`pride.budget.accounts`):
            what ``RunEnd`` reports, and what every model and tool call is
            checked against.
        host: the actor's long-lived nursery, hosting the turn's task groups.
        nested: the turn's nested tasks (its "turn nursery"), once any started.
        signals: the turn's pending signal deliveries (the signal drain), once any.
        trace: the tracer's record of the turn, when tracing is on (`pride.actors.instrument`).
        journal: the turn's journal run (`pride.actors.journaling`), when the branch
            keeps a journal.
        suspended: the turn stopped for approval (set as it finalises).
        call_ids: the ids of the tool calls its model replies made so far (made
            on the first reply with tool calls): each is unique in the turn
            (`pride.actors.model_call.unique_call_ids`).
        gathering: the context providers are being asked (a provider's own
            nested model call must not ask them again).
        writing_back: the providers' writeback hooks are running (an operate a
            hook runs on the branch, nested in the turn, must not call them again).
    """

    context: TurnExecutionContext
    command: WorkCommand
    host: trio.Nursery | None = attrs.field(default=None, repr=False)
    started_at: float = attrs.field(factory=time.perf_counter)
    meter: Meter = attrs.field(factory=lambda: Meter(None, None), repr=False)
    nested: TurnTasks | None = attrs.field(default=None, repr=False)
    signals: TurnTasks | None = attrs.field(default=None, repr=False)
    trace: Any = attrs.field(default=None, repr=False)
    journal: TurnRecord | None = attrs.field(default=None, repr=False)
    suspended: bool = False
    call_ids: set[str] | None = attrs.field(default=None, repr=False)
    gathering: bool = attrs.field(default=False, repr=False)
    writing_back: bool = attrs.field(default=False, repr=False)

    @property
    def input_tokens(self) -> int:
        """Prompt tokens of the turn's model calls so far."""
        return self.meter.input_tokens

    @property
    def output_tokens(self) -> int:
        """Completion tokens of the turn's model calls so far."""
        return self.meter.output_tokens

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens served from a provider cache, so far."""
        return self.meter.cached_tokens

    @property
    def cache_write_tokens(self) -> int:
        """Prompt tokens written to a provider cache, so far."""
        return self.meter.cache_write_tokens

    @property
    def reasoning_tokens(self) -> int:
        """Output tokens the models spent reasoning, so far."""
        return self.meter.reasoning_tokens

    @property
    def cost_usd(self) -> float | None:
        """The cost of the turn's model calls so far (None: none reported one)."""
        return self.meter.cost_usd

    @property
    def model_calls(self) -> int:
        """The turn's model calls so far."""
        return self.meter.model_calls

    @property
    def tool_calls(self) -> int:
        """The turn's tool calls so far."""
        return self.meter.tool_calls

    def nested_group(self) -> TurnTasks:
        """The group holding this turn's nested tasks (created on first use)."""
        if self.nested is None:
            self.nested = TurnTasks(self._host(), f"nested work of turn {self.context.turn_id}")
        return self.nested

    def signal_group(self) -> TurnTasks:
        """The group holding this turn's pending signal deliveries (created on first use)."""
        if self.signals is None:
            self.signals = TurnTasks(self._host(), f"signals of turn {self.context.turn_id}")
        return self.signals

    def cancel_nested(self) -> None:
        """Cancel the turn's nested tasks now (a budget stopped the turn)."""
        if self.nested is not None:
            self.nested.cancel()

    def _host(self) -> trio.Nursery:
        if self.host is None:
            raise RuntimeError(f"turn {self.context.turn_id} has no actor to host its tasks")
        return self.host

    def record_usage(
        self, input_tokens: int, output_tokens: int, cached_tokens: int, cost_usd: float | None
    ) -> None:
        """Add one model call's usage to the turn's totals (reported on RunEnd).

        For a model call made outside `TurnView.call_model` (which counts its
        own): the call is counted, then its usage, against the turn's budgets.

        Raises:
            BudgetExceeded: the turn's (or its session's) allowance is spent.
        """
        self.meter.admit_model_call()
        self.meter.add_tokens(input_tokens, output_tokens, cached_tokens, cost_usd)


@attrs.frozen
class TurnScope:
    """A view of a turn from the code running in it.

    ``owns_lifecycle`` is True for the top-level entry (the driver, which
    emits lifecycle signals) and False for nested calls, which share the same
    turn and never emit lifecycle signals. ``stream`` is where this scope's
    items go (a ``pride.stream`` consumer), if anywhere. ``meter`` is a
    nested command's own allowance (its ``budget``), drawing on the turn's;
    None uses the turn's.
    """

    state: TurnState = attrs.field(repr=False)
    owns_lifecycle: bool
    stream: trio.MemorySendChannel[Any] | None = None
    meter: Meter | None = attrs.field(default=None, repr=False)

    @property
    def allowance(self) -> Meter:
        """The meter this scope's calls are checked against and counted on."""
        return self.meter if self.meter is not None else self.state.meter

    @property
    def context(self) -> TurnExecutionContext:
        """The turn's execution context."""
        return self.state.context

    @property
    def turn_id(self) -> UUID:
        """The id of the turn this scope belongs to."""
        return self.state.context.turn_id

    @property
    def streaming(self) -> bool:
        """True when a [`pride.stream`][pride.stream] consumer receives this scope's items."""
        return self.stream is not None

    def start_soon(
        self, async_fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Run ``async_fn(*args)`` as nested work in the turn's nursery.

        The task inherits the turn binding, so verb calls on the same branch
        join this turn. Tasks still running when the turn body ends are
        cancelled and awaited before the terminal signal. A failure of such a
        task is logged and does not change the turn's result (await your own
        nursery instead when a child's failure should fail the turn).

        Raises:
            RuntimeError: the turn is no longer active.
        """
        if self.state.context.phase != "active":
            raise RuntimeError(f"turn {self.turn_id} is not active; cannot start work")
        self.state.nested_group().start_soon(async_fn, *args, name=name)

    async def emit(self, item: Any) -> None:
        """Hand ``item`` to the turn's stream consumer; waits until it is taken.

        Without a consumer (the command was sent with ``ask``) this is only a
        checkpoint. If the consumer has gone, raises [`StopStream`][pride.StopStream]
        so the producing loop ends cleanly.
        """
        stream = self.stream
        if stream is None:
            await trio.lowlevel.checkpoint()
            return
        try:
            await stream.send(item)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise StopStream("the stream consumer has gone") from None

    def check_control(self) -> None:
        """Consume this turn's pending directive and act on it.

        No directive or CONTINUE: nothing. BREAK: raises
        [`LoopBreak`][pride.LoopBreak]. CANCEL: raises [`StopStream`][pride.StopStream].
        """
        context = self.state.context
        control = context.control
        if control is None:
            return
        context.control = None
        _raise_for(control)

    def record_usage(
        self, input_tokens: int, output_tokens: int, cached_tokens: int, cost_usd: float | None
    ) -> None:
        """Add one model call's usage to the turn's totals (reported on RunEnd).

        For a model call made outside `TurnView.call_model` (a registered
        operation calling a model itself): the call counts against the turn's
        budgets like any other.

        Raises:
            BudgetExceeded: the turn's (or its session's) allowance is spent.
        """
        meter = self.allowance
        meter.admit_model_call()
        meter.add_tokens(input_tokens, output_tokens, cached_tokens, cost_usd)


class TurnTasks:
    """Tasks that belong to one turn, hosted by a longer-lived nursery.

    Opening a trio nursery per turn costs more than the rest of a short turn,
    so a turn's nested tasks run in the actor's nursery, each inside its own
    cancel scope that this group owns. `cancel_and_wait` gives the same
    guarantee a per-turn nursery would: every task has ended before it
    returns. A task's failure is logged (it is never awaited by the turn, so
    it cannot change the turn's result) — except
    [`Escalate`][pride.Escalate], which is kept in `escalation`: a task of
    the turn saying "this branch is not to be trusted" escalates the turn.
    """

    __slots__ = ("_closed", "_host", "_idle", "_label", "_scopes", "escalation")

    def __init__(self, host: trio.Nursery, label: str) -> None:
        self._host = host
        self._label = label
        self._scopes: set[trio.CancelScope] = set()
        self._idle: trio.Event | None = None
        self._closed = False
        self.escalation: Escalate | None = None

    def __len__(self) -> int:
        return len(self._scopes)

    def cancel(self) -> None:
        """Cancel the running tasks now (without waiting; see `cancel_and_wait`)."""
        for scope in self._scopes:
            scope.cancel()

    def start_soon(
        self, async_fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None
    ) -> None:
        """Start ``async_fn(*args)`` in the group (it inherits the caller's context)."""
        if self._closed:
            raise RuntimeError(f"{self._label} is closed; cannot start {async_fn!r}")
        scope = trio.CancelScope()
        self._scopes.add(scope)
        self._host.start_soon(self._run, scope, async_fn, args, name=name or async_fn)

    async def _run(
        self,
        scope: trio.CancelScope,
        async_fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
    ) -> None:
        try:
            with scope:
                await async_fn(*args)
        except Escalate as exc:
            log.error("%s: a task escalated: %s", self._label, exc)
            if self.escalation is None:
                self.escalation = exc
        except Exception:
            log.exception("%s: a task failed; the turn's result is unchanged", self._label)
        finally:
            self._scopes.discard(scope)
            if not self._scopes and self._idle is not None:
                self._idle.set()

    async def wait(self) -> None:
        """Wait until every task of the group has ended."""
        while self._scopes:
            self._idle = trio.Event()
            await self._idle.wait()

    async def cancel_and_wait(self) -> None:
        """Refuse new tasks, cancel the running ones, and wait until they have ended."""
        self._closed = True
        for scope in self._scopes:
            scope.cancel()
        await self.wait()


def _raise_for(control: LoopControl) -> None:
    if control.directive is LoopDirective.BREAK:
        raise LoopBreak(control.reason or "loop stopped by a BREAK directive")
    if control.directive is LoopDirective.CANCEL:
        raise StopStream(control.reason or "stream ended by a CANCEL directive")


# ------------------------------------------------------------- the binding


class _Owner(Protocol):
    """What a turn needs of its branch (a `pride.Branch` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def id_str(self) -> str: ...

    def poll_control(self, *, turn_id: UUID | None = None) -> LoopControl | None: ...


class _Host(Protocol):
    """What a turn needs of its branch's actor (an `pride.actors.actor.Actor` is
    one): the turn it serves now, and the directory that resolves the names its
    turns send to."""

    @property
    def turn(self) -> TurnState | None: ...

    @property
    def directory(self) -> Any: ...


class _Binding:
    """What the turn binding holds: the branch, its actor, the scope bound."""

    # A plain slotted class, never mutated: one is made for every turn, and a
    # frozen attrs class costs a setattr call per field.
    __slots__ = ("actor", "branch", "scope")

    def __init__(self, branch: _Owner, actor: _Host, scope: TurnScope) -> None:
        self.branch = branch
        self.actor = actor
        self.scope = scope


_active_turn: contextvars.ContextVar[_Binding | None] = contextvars.ContextVar(
    "pride_active_turn", default=None
)


def bind(branch: _Owner, actor: _Host, scope: TurnScope) -> contextvars.Token[_Binding | None]:
    """Bind the current task (and tasks it starts) to ``scope``; reset with the token."""
    return _active_turn.set(_Binding(branch, actor, scope))


def unbind(token: contextvars.Token[_Binding | None]) -> None:
    """Restore the binding that was current before `bind`."""
    _active_turn.reset(token)


binding: Callable[[], _Binding | None] = _active_turn.get
"""The current task's turn binding, live or stale (the context variable's own
``get``: asked on every send, so no Python call around it)."""


def live_scope_for(branch: object) -> TurnScope | None:
    """The scope the current task holds on ``branch``'s active turn, if live.

    Live means: the binding names this branch, the branch's active pointer
    is the binding's turn, and that turn has not closed. A finalizing turn is
    returned too; the caller decides (TurnFinalizingError). So is a turn
    handed to its commit while its terminal's subscribers run
    (`pride.durable.commit`): finalizing, its actor serving no other turn.
    """
    bound = _active_turn.get()
    if bound is None or bound.branch is not branch:
        return None
    state = bound.scope.state
    serving = bound.actor.turn
    if (serving is not state and serving is not None) or state.context.phase == "closed":
        return None
    return bound.scope


def current_turn() -> TurnScope | None:
    """The turn the calling task is part of, or None.

    Returns a scope only while that turn is live (active or finalizing) and
    still its branch's current turn.
    """
    bound = _active_turn.get()
    if bound is None:
        return None
    return live_scope_for(bound.branch)


def check_control(branch: _Owner) -> None:
    """Poll ``branch``'s active turn for a directive and act on it.

    No directive or CONTINUE: nothing. BREAK raises [`LoopBreak`][pride.LoopBreak]
    (the turn fails); CANCEL raises [`StopStream`][pride.StopStream] (the stream
    ends cleanly).
    """
    control = branch.poll_control()
    if control is not None:
        _raise_for(control)
