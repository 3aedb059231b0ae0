"""The turn journal's records: a step as the store holds it, and an unfinished turn.

A step is kept as strict JSON in the store's ``steps`` table (see
`pride.store.journal`); reading one back checks every field, because a file
is not trusted. A [`WaitingTurn`][pride.durable.records.WaitingTurn] is
a turn that has not ended: suspended for approval, or interrupted by a crash.
See `pride.durable.journal` for how they are used.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal
from uuid import UUID

import attrs

from ..errors import InvalidMessage
from ..llm import ModelResponse, ToolCall
from ..messages import (
    ActionCall,
    PendingCall,
    Reasoning,
    Usage,
    WorkCommand,
    structure,
    unstructure,
)
from ..messages.budget import MAX_COST_USD, MAX_COUNT
from ..messages.codec import dump_json, parse_json
from ..tools import ActionOutcome

__all__ = [
    "StepRecord",
    "StepState",
    "WaitingTurn",
    "call_id_of",
    "parse_tag",
    "step_ids",
    "tag_text",
    "tool_step",
]

log = logging.getLogger("pride.journal")

StepState = Literal["done", "started", "pending", "approved"]


@attrs.frozen
class StepRecord:
    """One journaled step.

    A model step holds ``response``; a tool step the call (``function``,
    ``arguments``, ``call_id``) and its ``state``: ``"done"`` (``output`` or
    ``error``), ``"started"`` (it may have run: not idempotent, interrupted),
    ``"pending"`` (waiting for a person, ``reason`` says why) or
    ``"approved"`` (a person said yes; it runs next).
    """

    kind: Literal["model", "tool"]
    response: ModelResponse | None = None
    state: StepState = "done"
    function: str = ""
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    call_id: str | None = None
    output: Any = None
    error: str | None = None
    approved: bool = False
    reason: str | None = None

    def to_text(self) -> str:
        """Strict JSON; an output strict JSON cannot carry is stored as its ``str``."""
        wire = _StepWire(
            self.kind,
            None if self.response is None else _ResponseWire.of(self.response),
            self.state,
            self.function,
            self.arguments,
            self.call_id,
            self.output,
            self.error,
            self.approved,
            self.reason,
        )
        try:
            return dump_json(unstructure(wire), replace=True)
        except (InvalidMessage, TypeError, ValueError, RecursionError):
            log.warning(
                "journal: the output of a %s call is not JSON data; journaled as its text",
                self.function,
            )
            return dump_json(unstructure(attrs.evolve(wire, output=str(self.output))), replace=True)

    @classmethod
    def from_text(cls, text: str) -> StepRecord:
        """Read a stored step back (a file is not trusted: every field is checked).

        Raises:
            InvalidMessage: the row is not a step.
        """
        data = parse_json(text)
        try:
            wire: _StepWire = structure(data, _StepWire)
        except (AttributeError, TypeError) as exc:  # a shape the generated hooks trip over
            raise InvalidMessage([("step", f"not a journal step: {exc}")]) from None
        if (wire.kind == "model") != (wire.response is not None):
            raise InvalidMessage([("step.response", "a model step, and only one, holds a reply")])
        if wire.response is not None:
            _check_usage(wire.response.usage)
        return cls(
            wire.kind,
            None if wire.response is None else wire.response.response(),
            wire.state,
            wire.function,
            dict(wire.arguments),
            wire.call_id,
            wire.output,
            wire.error,
            wire.approved,
            wire.reason,
        )

    def outcome(self, call: ActionCall) -> ActionOutcome:
        """The outcome a done tool step answers ``call`` with."""
        return ActionOutcome(
            function=call.function,
            arguments=dict(call.arguments),
            call_id=call.call_id,
            output=self.output,
            error=self.error,
        )


# The wire form of a step: plain attrs classes the codec checks field by field
# (strict types, no extra keys) when a stored step is read back.


@attrs.frozen
class _UsageWire:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    # Added later (issue 33): a record an older pride wrote has neither and reads them as 0.
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@attrs.frozen
class _ToolCallWire:
    name: str
    arguments: Mapping[str, Any]
    id: str
    arguments_error: str | None = None


@attrs.frozen
class _ResponseWire:
    text: str
    tool_calls: tuple[_ToolCallWire, ...] = ()
    usage: _UsageWire = _UsageWire()
    model: str = ""
    provider: str = ""
    finish_reason: str | None = None
    # A resumed tool loop sends the reply's reasoning back (Anthropic refuses it otherwise).
    reasoning: tuple[Reasoning, ...] = ()

    @classmethod
    def of(cls, response: ModelResponse) -> _ResponseWire:
        usage = response.usage
        return cls(
            response.text,
            tuple(
                _ToolCallWire(call.name, call.arguments, call.id, call.arguments_error)
                for call in response.tool_calls
            ),
            _UsageWire(
                usage.input_tokens,
                usage.output_tokens,
                usage.cached_tokens,
                usage.cost_usd,
                usage.cache_write_tokens,
                usage.reasoning_tokens,
            ),
            response.model,
            response.provider,
            response.finish_reason,
            response.reasoning,
        )

    def response(self) -> ModelResponse:
        usage = self.usage
        return ModelResponse(
            self.text,
            tuple(
                ToolCall(call.name, dict(call.arguments), call.id, call.arguments_error)
                for call in self.tool_calls
            ),
            Usage(
                usage.input_tokens,
                usage.output_tokens,
                usage.cost_usd,
                cached_tokens=usage.cached_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                reasoning_tokens=usage.reasoning_tokens,
            ),
            self.model,
            self.provider,
            self.finish_reason,
            self.reasoning,
        )


def _check_usage(usage: _UsageWire) -> None:
    """Refuse a journaled reply's usage that no provider's reply is read with (a
    count outside 0 to `MAX_COUNT`, a cost outside 0 to `MAX_COST_USD`): a
    resumed turn sums it into its figures and its budget, and a negative one
    would buy calls past ``max_input_tokens`` or ``max_cost_usd``.

    Raises:
        InvalidMessage: naming the field.
    """
    problems = [
        (f"step.response.usage.{field}", f"a count from 0 to {MAX_COUNT}, got {value}")
        for field in _COUNTS
        if not 0 <= (value := getattr(usage, field)) <= MAX_COUNT
    ]
    cost = usage.cost_usd
    if cost is not None and not 0 <= cost <= MAX_COST_USD:
        problems.append(
            ("step.response.usage.cost_usd", f"a cost from 0 to {MAX_COST_USD:g}, got {cost}")
        )
    if problems:
        raise InvalidMessage(problems)


# Every count the wire holds, read off it: a count added to it later is checked too.
_COUNTS = tuple(field.name for field in attrs.fields(_UsageWire) if field.name != "cost_usd")


@attrs.frozen
class _StepWire:
    kind: Literal["model", "tool"]
    response: _ResponseWire | None = None
    state: StepState = "done"
    function: str = ""
    arguments: Mapping[str, Any] = attrs.field(factory=dict)
    call_id: str | None = None
    output: Any = None
    error: str | None = None
    approved: bool = False
    reason: str | None = None


def tool_step(call: ActionCall, state: StepState, approved: bool, call_id: str) -> StepRecord:
    """A tool step of ``call`` in ``state``, resolved by ``call_id`` (unique in its turn)."""
    return StepRecord(
        "tool",
        state=state,
        function=call.function,
        arguments=dict(call.arguments),
        call_id=call_id,
        approved=approved,
    )


# ------------------------------------------------------------- waiting turns


@attrs.define(eq=False)
class WaitingTurn:
    """An unfinished turn of a branch: suspended for approval, or interrupted by a crash.

    Attributes:
        turn_id: the turn's id (kept when it runs again).
        command: the command that started it; None when it could not be
            journaled or read back (``problem`` says why: it can only be abandoned).
        status: ``"suspended"`` (waits for decisions) or ``"running"`` (a crash
            interrupted it).
        steps: its journaled steps, by number.
        tag: the sender's tag of the envelope that started (or last resumed) it.
        stored: its rows are in the store (a resumed run updates them).
        announced: call ids whose ``ApprovalRequested`` was emitted already.
    """

    turn_id: UUID
    command: WorkCommand | None
    status: str
    steps: dict[int, StepRecord] = attrs.field(factory=dict)
    tag: Any = None
    problem: str | None = None
    stored: bool = False
    announced: set[str] = attrs.field(factory=set)

    def pending(self) -> tuple[PendingCall, ...]:
        """The calls it waits on, in step order."""
        return tuple(
            PendingCall(call_id_of(index, step.call_id), step.function, dict(step.arguments))
            for index, step in sorted(self.steps.items())
            if step.kind == "tool" and step.state == "pending"
        )


def step_ids(steps: Mapping[int, StepRecord], base: int, calls: Sequence[ActionCall]) -> list[str]:
    """The id each call of a batch (numbered from ``base``) is resolved by, unique
    in the turn whose steps so far are ``steps``.

    A step the journal holds keeps the id it was recorded (and announced) with.
    A new one takes its call's id, unless an earlier step of the turn (or of
    the batch) has it: ids come from the model or from a request, so two calls
    may share one, and a person's decision must apply to exactly the call that
    was shown (issue 36). Such a call is resolved by ``step-N`` instead (N its
    step number; the id of a call without one too), which depends only on the
    steps before it, so a resumed run gives every call the id it had.
    """
    taken = {
        call_id_of(index, step.call_id)
        for index, step in steps.items()
        if step.kind == "tool" and index < base
    }
    ids: list[str] = []
    for position, call in enumerate(calls):
        index = base + position
        step = steps.get(index)
        if step is not None and step.kind == "tool":
            chosen = call_id_of(index, step.call_id)
        else:
            chosen = call.call_id if call.call_id is not None else f"step-{index}"
            suffix = 0
            while chosen in taken:
                suffix += 1
                chosen = f"step-{index}" if suffix == 1 else f"step-{index}-{suffix}"
        taken.add(chosen)
        ids.append(chosen)
    return ids


def call_id_of(step: int, call_id: str | None) -> str:
    """The id a pending call is resolved by."""
    # The provider's id when there is one; else one that names the step, stable
    # across runs (an ActionRequest's id is made again by every run).
    return call_id if call_id is not None else f"step-{step}"


# ------------------------------------------------------------------ tags


def tag_text(tag: Any) -> str | None:
    """A sender's tag as JSON text (None when it has none, or none JSON carries)."""
    if tag is None:
        return None
    try:
        return json.dumps(tag)
    except (TypeError, ValueError):
        return None


def parse_tag(text: str | None) -> Any:
    """A stored tag read back: a string or an integer, else None (a file is not trusted)."""
    if text is None:
        return None
    try:
        tag = parse_json(text)
    except InvalidMessage:
        return None
    return tag if isinstance(tag, str | int) and not isinstance(tag, bool) else None
