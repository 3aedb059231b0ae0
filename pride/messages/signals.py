"""Signals: what observers see of a branch and its supervisors.

Every signal carries ``schema_version`` (`SIGNAL_SCHEMA_VERSION`), the
emitting branch's id and name, and its creation time. The version is bumped
only when a field is removed or renamed; additive fields keep it. Version 2
renamed ``RunEnd.num_turns`` and ``RunFailed.num_turns`` to ``model_calls``
(they always counted model calls, not turns); the codec still reads version 1
data, and ``num_turns`` remains as a deprecated read-only alias.

Per turn, an observer sees ``RunStart``, then the turn's ``MessageAdded`` (and
capability signals), then exactly one terminal: ``RunEnd`` or ``RunFailed``,
all carrying the same ``turn_id``. A turn that stops for approval ends its
run with ``RunSuspended`` (a ``RunFailed``) after one ``ApprovalRequested``
per pending call; when it is resolved it runs again under the same
``turn_id``, from a ``RunStart`` with ``resumed=True`` to its terminal. So
does a turn a crash interrupted, once its branch is restored.

Per flow node (`pride.flows`), an observer sees ``NodeStarted`` and then
exactly one terminal (``NodeCompleted``, ``NodeFailed`` or ``NodeCancelled``),
or ``NodeSkipped`` alone for a node that never started.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from uuid import UUID

import attrs

from .budget import Usage
from .conversation import RoledMessage

__all__ = [
    "SIGNAL_SCHEMA_VERSION",
    "ApprovalRequested",
    "BranchRestarted",
    "BranchStarted",
    "BranchStopped",
    "CapabilityViolation",
    "EmissionRejected",
    "MessageAdded",
    "NodeCancelled",
    "NodeCompleted",
    "NodeFailed",
    "NodeSignal",
    "NodeSkipped",
    "NodeStarted",
    "RunEnd",
    "RunFailed",
    "RunStart",
    "RunSuspended",
    "SessionFailed",
    "Signal",
    "StructuredOutput",
    "ToolProgress",
    "TurnEnded",
]

SIGNAL_SCHEMA_VERSION = 2

_JsonValue = Annotated[Any, "pride:json"]


@attrs.frozen(kw_only=True)
class Signal:
    """Base of every observation event."""

    branch_id: UUID | None = None
    branch_name: str | None = None
    created_at: float = attrs.field(factory=time.time)
    schema_version: int = SIGNAL_SCHEMA_VERSION


@attrs.frozen(kw_only=True)
class RunStart(Signal):
    """A top-level turn began. ``command`` names the command type (``"Chat"``).

    ``resumed`` is True when the turn continues from its journal (after an
    approval, or after a crash): it keeps the turn id of its first run, and
    ``command`` names the command that started it.
    """

    turn_id: UUID | None = None
    command: str = ""
    resumed: bool = False


@attrs.frozen(kw_only=True)
class TurnEnded(Signal):
    """What both terminals of a turn carry: its id, how long it ran, and what it used.

    The base of [`RunEnd`][pride.RunEnd] and [`RunFailed`][pride.RunFailed]
    (``observe(TurnEnded, ...)`` sees every terminal). Usage is summed over the
    turn's model calls. ``total_cost_usd`` is None when no call reported or
    priced its cost; it is never coerced to 0. ``model_calls`` counts the turn's
    model calls (a ReAct turn makes several; parse reformat calls count),
    ``tool_calls`` the tool calls made; ``usage`` has them as one
    [`pride.Usage`][pride.Usage]. ``cached_tokens`` (served from a provider cache)
    and ``cache_write_tokens`` (written to it) are part of ``input_tokens``;
    ``reasoning_tokens`` are part of ``output_tokens`` ([`pride.Usage`][pride.Usage]
    says which provider reports which).
    """

    turn_id: UUID | None = None
    duration_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    total_cost_usd: float | None = None
    model_calls: int = 0
    tool_calls: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def usage(self) -> Usage:
        """The turn's usage as a [`pride.Usage`][pride.Usage]."""
        return Usage(
            self.input_tokens,
            self.output_tokens,
            self.total_cost_usd,
            self.model_calls,
            self.tool_calls,
            cached_tokens=self.cached_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
        )

    @property
    def num_turns(self) -> int:
        """Deprecated: ``model_calls`` (the reference system's name; it never counted turns)."""
        warnings.warn(
            f"{type(self).__name__}.num_turns is deprecated: it counts model calls, "
            "so read model_calls",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.model_calls


@attrs.frozen(kw_only=True)
class RunEnd(TurnEnded):
    """A turn finished (its usage fields are those of every terminal, `TurnEnded`)."""


@attrs.frozen(kw_only=True)
class RunFailed(TurnEnded):
    """A turn failed or was cancelled. ``error_type`` is the exception class name.

    The usage fields say what the turn had used when it ended (a turn stopped
    by its budget, say), as on [`RunEnd`][pride.RunEnd].
    """

    error_type: str = ""
    error_message: str = ""
    cancelled: bool = False


@attrs.frozen(kw_only=True)
class RunSuspended(RunFailed):
    """A turn stopped for approval (its caller got
    [`ApprovalRequired`][pride.ApprovalRequired]): the terminal of this run of
    the turn. It is a ``RunFailed`` for observers that pair every ``RunStart``
    with one terminal; ``pending`` lists the call ids it waits on. Resolved, the
    turn runs again (``RunStart`` with ``resumed=True``, same ``turn_id``)."""

    pending: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ApprovalRequested(Signal):
    """A tool call that needs a person's approval was reached, and did not run.

    Emitted once per pending call, before the turn's
    [`RunSuspended`][pride.RunSuspended]. Resolve it with
    ``session.resolve(turn_id, {call_id: Approve() | Deny(reason)})``.
    """

    turn_id: UUID | None = None
    call_id: str = ""
    function: str = ""
    arguments: Mapping[str, _JsonValue] = attrs.field(factory=dict)
    reason: str | None = None


@attrs.frozen(kw_only=True)
class MessageAdded(Signal):
    """A message was recorded in the branch's conversation."""

    message: RoledMessage
    turn_id: UUID | None = None


@attrs.frozen(kw_only=True)
class StructuredOutput(Signal):
    """An assistant message carried a valid capability bundle (observation only)."""

    data: Mapping[str, _JsonValue]
    turn_id: UUID | None = None


@attrs.frozen(kw_only=True)
class CapabilityViolation(Signal):
    """An emitted block mixed granted keys with keys outside the grant."""

    offending: tuple[str, ...]
    allowed: tuple[str, ...]
    block: Mapping[str, _JsonValue] | None = None
    turn_id: UUID | None = None


@attrs.frozen(kw_only=True)
class EmissionRejected(Signal):
    """A wholly granted block failed validation against the grant's schema."""

    error: str
    block: Mapping[str, _JsonValue] | None = None
    turn_id: UUID | None = None


@attrs.frozen(kw_only=True)
class ToolProgress(Signal):
    """A running tool call reported how far it has got (an MCP progress
    notification, or `pride.report_progress` in a plain tool).

    ``call_id`` is the provider's tool-call id, or the ``ActionRequest``'s id
    (as a string) for a call without one, so a UI can match it to the call.
    ``progress`` increases with each report; ``total`` is None when unknown.
    Progress signals of a call arrive in order, before its ActionResponse and
    before the turn's terminal signal.
    """

    turn_id: UUID | None = None
    call_id: str | None = None
    function: str = ""
    progress: float = 0.0
    total: float | None = None
    message: str | None = None


@attrs.frozen(kw_only=True)
class BranchStarted(Signal):
    """A branch's actor started serving its mailbox."""

    restart: bool = False


@attrs.frozen(kw_only=True)
class BranchStopped(Signal):
    """A branch's actor stopped: a deliberate stop, a shutdown, or a crash."""

    reason: Literal["normal", "shutdown", "crash"] = "normal"
    error: str | None = None


@attrs.frozen(kw_only=True)
class BranchActivated(Signal):
    """A virtual branch was activated: built by its kind's factory, its stored
    state restored, and started under the session (see docs/virtual.md).

    ``restored`` is True when the store held a conversation of that name;
    ``elapsed`` is the seconds the activation took (factory, store read, start).
    """

    restored: bool = False
    elapsed: float = 0.0


@attrs.frozen(kw_only=True)
class BranchPassivated(Signal):
    """A virtual branch left memory; its conversation stays in the store.

    ``reason``: ``idle`` (nothing for its kind's ``passivate_after``
    seconds), ``max_active`` (the least recently used beyond its kind's
    limit), ``manual`` (``session.passivate``), ``shutdown`` (its session
    stopped) or ``crash`` (its actor crashed: the next message activates it
    afresh).
    """

    reason: Literal["idle", "max_active", "manual", "shutdown", "crash"] = "idle"


@attrs.frozen(kw_only=True)
class BranchRestarted(Signal):
    """A supervisor restarted a branch (or child session) after a crash."""

    cause: str = ""


@attrs.frozen(kw_only=True)
class SessionFailed(Signal):
    """A session exceeded its restart intensity and is stopping its children."""

    session_name: str | None = None
    cause: str = ""


@attrs.frozen(kw_only=True)
class NodeSignal(Signal):
    """Base of a flow node's lifecycle signals.

    ``branch_id`` and ``branch_name`` name the node's target branch (when it
    is known); ``elapsed`` is the seconds since the flow started, so the
    signals of one flow form a timeline.

    Attributes:
        flow_id: the id of the flow run.
        flow_name: the flow's name, if it has one.
        node: the node's name.
        elapsed: seconds since the flow started.
        depends_on: the names of the nodes it waits for.
        spawned_by: the node whose operation added it to the running flow, if any.
    """

    flow_id: UUID | None = None
    flow_name: str | None = None
    node: str = ""
    elapsed: float = 0.0
    depends_on: tuple[str, ...] = ()
    spawned_by: str | None = None


@attrs.frozen(kw_only=True)
class NodeStarted(NodeSignal):
    """A node's dependencies completed and its command was sent to its branch.

    ``command`` is the command type's name (``"Chat"``). Its turn may still
    wait in the branch's mailbox behind the branch's other work.
    """

    command: str = ""


@attrs.frozen(kw_only=True)
class NodeCompleted(NodeSignal):
    """A node's command finished; ``duration`` is seconds from its start."""

    turn_id: UUID | None = None
    duration: float = 0.0


@attrs.frozen(kw_only=True)
class NodeFailed(NodeSignal):
    """A node's command (or its condition, or the function building its command) raised."""

    turn_id: UUID | None = None
    duration: float = 0.0
    error_type: str = ""
    error_message: str = ""


@attrs.frozen(kw_only=True)
class NodeSkipped(NodeSignal):
    """A node never started: ``reason`` says why (a dependency that did not
    complete, its condition was false, the flow was cancelled or stopped)."""

    reason: str = ""


@attrs.frozen(kw_only=True)
class NodeCancelled(NodeSignal):
    """A started node was cancelled (the caller gave up, or ``fail_fast``);
    its turn, if it had begun, ended with its own terminal first."""

    turn_id: UUID | None = None
    duration: float = 0.0
    reason: str = ""
