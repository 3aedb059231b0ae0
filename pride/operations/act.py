"""act: execute tool calls and record each as an ActionRequest/ActionResponse pair.

Calls run through the branch's action manager: concurrently inside the
current turn (or sequentially on request), sync tools in threads. A failed
call becomes an ActionResponse carrying the error, so the model can see it.
A session's blocking ``before_tool_call`` hook can deny a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..messages import Act, ActionCall, ActionRequest, ActionResponse

if TYPE_CHECKING:
    from ..actors.branch import Branch
    from ..actors.turn import TurnScope

__all__ = ["act", "run_actions"]


async def run_actions(
    branch: Branch,
    scope: TurnScope | None,
    calls: Sequence[ActionCall],
    *,
    strategy: str = "concurrent",
    max_concurrent: int | None = None,
) -> list[ActionResponse]:
    """Execute ``calls`` and record a request/response pair for each, in call order."""
    turn_id = scope.turn_id if scope is not None else None
    hooked = branch._hooks is not None

    async def before(call: ActionCall) -> None:
        if hooked:
            await branch.run_hook("before_tool_call", {"branch": branch, "call": call})

    async def after(outcome: Any) -> None:
        status = "ok" if outcome.succeeded else "error"
        branch.logs.append(_tool_entry(outcome, status, turn_id))
        if hooked:
            point = "after_tool_call" if outcome.succeeded else "tool_call_error"
            branch.fire_hook(point, {"branch": branch, "outcome": outcome})

    outcomes = await branch.acts.execute(
        calls,
        strategy=strategy,  # type: ignore[arg-type]
        max_concurrent=max_concurrent,
        before_call=before,
        after_call=after,
    )
    responses = []
    for call, outcome in zip(calls, outcomes, strict=True):
        request = branch.add_message(
            ActionRequest(
                function=call.function,
                arguments=dict(call.arguments),
                call_id=call.call_id,
                sender=str(branch.id),
                recipient=call.function,
            )
        )
        response = ActionResponse(
            function=call.function,
            arguments=dict(call.arguments),
            output=outcome.output,
            error=outcome.error,
            action_request_id=request.id,
            call_id=call.call_id,
            sender=call.function,
            recipient=str(branch.id),
        )
        branch.add_message(response)
        responses.append(response)
    return responses


def _tool_entry(outcome: Any, status: str, turn_id: Any) -> Any:
    from ..actors.logs import LogEntry

    return LogEntry(
        kind="tool",
        name=outcome.function,
        started_at=outcome.started_at,
        duration_ms=outcome.duration * 1000.0,
        status=status,  # type: ignore[arg-type]
        turn_id=str(turn_id) if turn_id is not None else None,
        error_type=outcome.error.split(":", 1)[0] if outcome.error else None,
    )


async def act(branch: Branch, command: Act, scope: TurnScope | None) -> list[ActionResponse]:
    """Execute the command's calls (not a model turn) and return their responses."""
    return await run_actions(
        branch,
        scope,
        command.action_requests,
        strategy=command.strategy,
        max_concurrent=command.max_concurrent,
    )
