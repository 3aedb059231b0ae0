"""act: execute tool calls and record each as an ActionRequest/ActionResponse pair.

Calls run through the branch's action manager: concurrently inside the
current turn (or sequentially on request), sync tools in threads. A failed
call becomes an ActionResponse carrying the error, so the model can see it;
it never fails the turn. Every call passes through the turn's
[`call_tools`][pride.operations.view.TurnView.call_tools], where a session's
blocking ``before_tool_call`` hook can deny it (its response then says
``denied: ...``).

Recording order: the batch's ActionRequests are recorded before the calls
run, then one ActionResponse per request, in call order. For native tool
calls this renders as one assistant entry carrying every tool call followed
by the tool results, the shape providers expect. If the batch is cut short
(the turn is cancelled, a tool escalates, a stream consumer leaves), each
request still gets a response recording why it has no result, so the
history never holds a tool call without its answer (which providers reject).

Progress: a running tool's reports (`pride.tools.report_progress`, an MCP
server's progress notifications) become `ToolProgress` signals, delivered to
the observer and, when the turn streams (``Run``, ``ReActStream``), handed to the stream
consumer as items; either way before the call's ActionResponse. They name
the call by its provider call id, or by its ActionRequest's id when it has none.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ToolError
from ..messages import Act, ActionCall, ActionRequest, ActionResponse, RoledMessage

if TYPE_CHECKING:
    from ..llm import ToolCall
    from ..tools import ActionOutcome
    from .view import TurnView

__all__ = [
    "MAX_CALLS_PER_REPLY",
    "Emit",
    "act",
    "action_calls",
    "bounded_calls",
    "run_actions",
    "unexecuted_note",
]

MAX_CALLS_PER_REPLY = 128
"""The most tool calls of one model reply that a turn runs (and records); the
rest are not run, and the reply's recorded text says how many."""

log = logging.getLogger("pride.operations")

Emit = Callable[[RoledMessage], Awaitable[None]]
"""Called with each recorded message (streaming verbs hand it to their consumer)."""


def action_calls(tool_calls: Sequence[ToolCall]) -> tuple[list[ActionCall], dict[int, str]]:
    """A model's native tool calls as ActionCalls, plus the argument errors by index.

    A call whose arguments could not be decoded is not executed; its response
    carries the decoding error so the model can correct itself.
    """
    calls = [ActionCall(call.name, call.arguments, call.id) for call in tool_calls]
    errors = {
        index: f"ToolArgumentError: {call.arguments_error}"
        for index, call in enumerate(tool_calls)
        if call.arguments_error
    }
    return calls, errors


def bounded_calls(calls: Sequence[ActionCall], text: str) -> tuple[list[ActionCall], str]:
    """The first `MAX_CALLS_PER_REPLY` of a reply's ``calls``, and its ``text`` with
    a note of how many more there were (``text`` unchanged when none).

    A reply is model output: it may ask for any number of calls (a 32 MiB reply
    holds hundreds of thousands), and each call run costs a task, a recorded
    request and response and a place in every later request, about 8 KB of
    memory here. Calls past the bound are neither run nor recorded.
    """
    if len(calls) <= MAX_CALLS_PER_REPLY:
        return list(calls), text
    dropped = len(calls) - MAX_CALLS_PER_REPLY
    log.warning(
        "the model asked for %d tool calls in one reply; the %d past the first %d "
        "(MAX_CALLS_PER_REPLY) are not run",
        len(calls),
        dropped,
        MAX_CALLS_PER_REPLY,
    )
    note = (
        f"({dropped} further tool calls were not run: "
        f"at most {MAX_CALLS_PER_REPLY} are run from one reply)"
    )
    return list(calls[:MAX_CALLS_PER_REPLY]), f"{text}\n\n{note}" if text else note


def unexecuted_note(calls: Sequence[ActionCall], text: str = "") -> str:
    """``text`` followed by a note recording tool calls the model asked for that
    were not run (the first `MAX_CALLS_PER_REPLY` listed, then how many more)."""
    listed = "; ".join(
        f"{call.function}({dict(call.arguments)})" for call in calls[:MAX_CALLS_PER_REPLY]
    )
    if len(calls) > MAX_CALLS_PER_REPLY:
        listed += f"; and {len(calls) - MAX_CALLS_PER_REPLY} more"
    note = f"(requested actions, not executed: {listed})"
    return f"{text}\n\n{note}" if text else note


async def run_actions(
    turn: TurnView,
    calls: Sequence[ActionCall],
    *,
    strategy: str = "concurrent",
    max_concurrent: int | None = None,
    argument_errors: Mapping[int, str] | None = None,
    emit: Emit | None = None,
) -> list[ActionResponse]:
    """Execute ``calls``; record and return one ActionResponse per call, in call order.

    Args:
        turn: whose tools run and whose conversation records the pairs.
        calls: the calls to run.
        strategy: ``"concurrent"`` (a nursery in the calling task: inside a
            turn, the calls are part of it) or ``"sequential"``.
        max_concurrent: at most this many calls at once (None: no cap).
        argument_errors: calls (by index) not to run, with the error to record.
        emit: awaited with each recorded message: the requests before the
            calls run, then the responses.

    Raises:
        Escalate: a tool or hook escalated (after recording error responses).
        ValueError: ``strategy`` or ``max_concurrent`` is invalid.

    Cancellation: running calls are cancelled; every request is answered
    with an error response recording the cancellation, then it propagates.
    """
    if not calls:  # nothing to run or record (the actor checkpoints between items)
        return []
    preset = argument_errors or {}
    sender = turn.id_str
    requests = [
        turn.add_message(
            ActionRequest(
                function=call.function,
                arguments=dict(call.arguments),
                call_id=call.call_id,
                sender=sender,
                recipient=call.function,
            )
        )
        for call in calls
    ]
    outcomes: list[ActionOutcome | None] = [None] * len(calls)
    try:
        if emit is not None:
            for request in requests:
                await emit(request)
        runnable = [index for index in range(len(calls)) if index not in preset]
        done = await turn.call_tools(
            [calls[index] for index in runnable],
            strategy=strategy,  # type: ignore[arg-type]
            max_concurrent=max_concurrent,
            call_ids=[_call_id(calls[index], requests[index]) for index in runnable],
        )
        for index, outcome in zip(runnable, done, strict=True):
            outcomes[index] = outcome
    except BaseException as exc:
        reason = f"not executed: the turn ended first ({type(exc).__name__})"
        _record_responses(turn, calls, requests, outcomes, preset, missing=reason)
        raise
    responses = _record_responses(turn, calls, requests, outcomes, preset)
    if emit is not None:
        for response in responses:
            await emit(response)
    return responses


def _call_id(call: ActionCall, request: ActionRequest) -> str:
    return call.call_id if call.call_id is not None else str(request.id)


def _record_responses(
    turn: TurnView,
    calls: Sequence[ActionCall],
    requests: Sequence[Any],
    outcomes: Sequence[ActionOutcome | None],
    preset: Mapping[int, str],
    *,
    missing: str = "not executed",
) -> list[ActionResponse]:
    responses = []
    recipient = turn.id_str
    for index, (call, request, outcome) in enumerate(zip(calls, requests, outcomes, strict=True)):
        if outcome is not None:
            output, error = outcome.output, outcome.error
        else:
            output, error = None, preset.get(index, missing)
        response = ActionResponse(
            function=call.function,
            arguments=dict(call.arguments),
            output=output,
            error=error,
            action_request_id=request.id,
            call_id=call.call_id,
            sender=call.function,
            recipient=recipient,
        )
        turn.add_message(response)
        responses.append(response)
    return responses


async def act(turn: TurnView, command: Act) -> list[ActionResponse]:
    """Execute the command's calls (not a model turn) and return their responses.

    Raises:
        ToolError: ``suppress_errors=False`` and a call failed (after every
            pair was recorded); the first failure's error is the message.
    """
    responses = await run_actions(
        turn,
        command.action_requests,
        strategy=command.strategy,
        max_concurrent=command.max_concurrent,
    )
    if not command.suppress_errors:
        failed = [response for response in responses if response.error is not None]
        if failed:
            raise ToolError(f"tool call {failed[0].function!r} failed: {failed[0].error}")
    return responses
