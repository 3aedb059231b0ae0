"""The structured types the verbs ask models for and return.

* [`Reason`][pride.Reason]: the ``reason`` field ``operate(reason=True)`` adds.
* [`OperateResult`][pride.OperateResult]: what ``operate`` returns when ``reason`` or
  ``actions`` is on.
* [`Unparsed`][pride.Unparsed]: a reply that did not parse into its response
  format, under ``handle_validation="return_value"``.
* [`ReActAnalysis`][pride.ReActAnalysis]: the format of each ReAct round.
* [`Analysis`][pride.Analysis]: ReAct's default final-answer format.

They are attrs classes, so msgspec derives their JSON schemas and builds them
from the model's JSON like any user response format.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..messages import ActionCall, ActionResponse

__all__ = ["Analysis", "OperateResult", "ReActAnalysis", "Reason", "Unparsed"]

FailureKind = Literal["extraction", "schema"]


@attrs.frozen
class Reason:
    """Why the model answered as it did.

    Attributes:
        title: a few words naming the reasoning.
        content: the reasoning itself.
        confidence_score: the model's confidence, from 0 to 1.
    """

    title: str | None = None
    content: str | None = None
    confidence_score: float | None = None


@attrs.frozen
class OperateResult:
    """The outcome of ``operate`` with ``reason`` or ``actions`` on.

    Attributes:
        output: the parsed response format; without a response format, the
            model's answer text. When parsing failed it is an
            [`Unparsed`][pride.Unparsed] (``handle_validation="return_value"``)
            or None (``"return_none"``).
        reason: the model's [`Reason`][pride.Reason], when ``reason=True`` and it gave one.
        action_requests: every tool call the model asked for, in order,
            executed or not.
        action_responses: the recorded responses of the calls that were
            executed (empty when ``invoke_actions=False``).
    """

    output: Any
    reason: Reason | None = None
    action_requests: tuple[ActionCall, ...] = ()
    action_responses: tuple[ActionResponse, ...] = ()


@attrs.frozen
class Unparsed:
    """A reply that did not parse into its response format, after every reformat call.

    What ``parse``, ``communicate`` and ``operate`` give back under
    ``handle_validation="return_value"`` (their default) instead of the
    format: a value of its own type, so that a failure is never mistaken for
    an answer (the reference system returns a ``str`` subclass, which reads
    like one in an f-string). Check for it with ``isinstance(result,
    pride.Unparsed)``; ``handle_validation="raise"`` raises
    [`ParseFailed`][pride.ParseFailed] instead, with the same ``failure_kind``.

    Attributes:
        text: the reply as the model gave it (before any reformat call).
        failure_kind: ``"extraction"`` when the last attempt found no JSON,
            ``"schema"`` when it found JSON that does not fit the format.
        error: what the last attempt said was wrong.
        format: the name of the format asked for (``"Answer"``).
        attempts: the attempts made: the direct one plus the reformat calls.
    """

    text: str
    failure_kind: FailureKind
    error: str
    format: str
    attempts: int = 1


@attrs.frozen
class ReActAnalysis:
    """One ReAct round: the model's analysis, and whether it wants another round.

    Attributes:
        analysis: what the model concluded from the request and results so far.
        extension_needed: True to ask for another think-act-observe round.
        action_strategy: how the next round's actions should run
            (``"sequential"`` when their order matters).
    """

    analysis: str
    extension_needed: bool = False
    action_strategy: Literal["concurrent", "sequential"] | None = None


@attrs.frozen
class Analysis:
    """ReAct's default final-answer format: the answer text."""

    answer: str
