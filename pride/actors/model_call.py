"""One model call against a branch's runtime: hooks, token streaming, the call log.

`BranchTurn.call_model` decides whether a call is made and what it counts
(the budget's admission and token totals, a journal that already holds the
step, the trace span around it); `call_model_once` is the call itself, the
same for every verb.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import attrs
import trio

from ..errors import StopStream
from ..llm import ModelRequest, ModelResponse, ModelStream, iModel, new_call_id
from ..messages import Usage
from . import wiring

if TYPE_CHECKING:
    from ..budget.accounts import Meter
    from .actor import ServedBranch
    from .turn import TurnScope

__all__ = ["call_model_once", "unique_call_ids"]

log = logging.getLogger("pride.turn")

#: The usage of a call that failed before its provider sent anything.
NOTHING_SPENT = Usage()


async def call_model_once(
    branch: ServedBranch,
    scope: TurnScope | None,
    meter: Meter | None,
    model: iModel,
    request: ModelRequest,
    *,
    streaming: bool,
    control: bool,
) -> ModelResponse:
    """Call ``model`` once for ``branch``: the hooks around it, its deltas to the
    turn's consumer (``streaming``: text as ``str``, reasoning as
    [`ReasoningDelta`][pride.ReasoningDelta] items; cut the moment ``meter``'s
    output allowance runs out, which thinking and a tool call's arguments count
    against too; a directive checked after each delta with ``control``), and
    the call log, whatever the outcome. A stream that ends before its reply
    counts what it spent on ``meter``
    ([`ModelStream.usage`][pride.llm.ModelStream.usage]), and so does a plain
    call that ends without a reply after its request was sent (its prompt:
    [`iModel.invoke`][pride.iModel.invoke]'s ``spent``): no reply will carry
    its usage to the turn. A call whose request was never sent made no call:
    the model call ``meter`` admitted is taken back, as it is when the turn is
    cancelled (or escalated) while its ``before_model_call`` hook runs.

    Raises:
        BudgetExceeded: a streamed reply ran past ``max_output_tokens``.
        ProviderError: the provider call failed (after the model's retries).
        StopStream: the stream consumer left, or a CANCEL directive.
        LoopBreak: a BREAK directive.
        Escalate: a ``before_model_call`` hook escalated (the only exception
            a hook at that point raises: a failing one is logged).
    """
    hooks = branch.actor.hooks  # an ``active`` bus only: no payload is built for nobody
    hooked = hooks is not None and getattr(hooks, "active", True)
    if hooked:
        try:
            await wiring.run_hook(
                branch, "before_model_call", {"branch": branch, "model": model, "request": request}
            )
        except BaseException:
            # Cancelled (or escalated) while the hook ran: the call never began.
            if meter is not None:
                meter.withdraw_model_call()
            raise
    logs = branch.logs
    started = time.perf_counter()
    turn_id = scope.turn_id if scope is not None else None
    stream: ModelStream | None = None
    unanswered: list[Usage] = []  # what a plain call that got no reply spent
    try:
        if streaming:
            assert scope is not None
            cut = _Cut(meter) if meter is not None and meter.watches_output else None
            stream = model.stream(request, on_output=None if cut is None else cut.read)
            async with stream as chunks:
                async for delta in chunks:
                    if hooked and isinstance(delta, str):  # the hook's chunks are the answer's text
                        wiring.fire_hook(
                            branch, "model_stream_chunk", {"branch": branch, "chunk": delta}
                        )
                    await scope.emit(delta)
                    if control:
                        scope.check_control()
            response = chunks.response
        else:
            response = await model.invoke(request, spent=unanswered.append)
    except BaseException as exc:
        # A stream left early was billed for what it generated, a plain call
        # cancelled after its request went for its prompt: counted here, since
        # no reply will carry its usage to the turn.
        spent = stream.usage if stream is not None else (unanswered[0] if unanswered else None)
        if spent is None:
            # Its request never left (no API key, a refused connection, an error
            # status): no call was made, and none is counted.
            spent = NOTHING_SPENT
            if meter is not None:
                meter.withdraw_model_call()
        elif meter is not None:
            meter.add_spent(spent)
        cancelled = isinstance(exc, trio.Cancelled | StopStream)
        logs.record(
            "model",
            model.model,
            started=started,
            status="cancelled" if cancelled else "error",
            turn_id=turn_id,
            error=None if cancelled else exc,
            input_tokens=spent.input_tokens,
            output_tokens=spent.output_tokens,
            cost_usd=spent.cost_usd,
        )
        raise
    if scope is not None and response.tool_calls:  # before anything records them
        response = unique_call_ids(scope, response)
    usage = response.usage
    logs.record(
        "model",
        model.model,
        started=started,
        status="ok",
        turn_id=turn_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        detail={"messages": request.messages, "reply": response.text}
        if logs.config.include_content
        else None,
    )
    if hooked:
        wiring.fire_hook(
            branch, "after_model_call", {"branch": branch, "model": model, "response": response}
        )
    return response


class _Cut:
    """Cuts a stream the moment its output passes the meter's allowance: every piece
    the stream reads counts, a tool call's arguments as text and reasoning do (a
    model streaming a huge argument ran past ``max_output_tokens`` to its reply's end)."""

    __slots__ = ("meter", "streamed")

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.streamed = 0  # this reply's output tokens so far (an estimate)

    def read(self, text: str) -> None:
        """Count one piece of the stream's output.

        Raises:
            BudgetExceeded: the reply ran past ``max_output_tokens`` (it leaves
                the stream, as whatever ``on_output`` raises does).
        """
        self.streamed = self.meter.streamed(text, self.streamed)


def unique_call_ids(scope: TurnScope, response: ModelResponse) -> ModelResponse:
    """``response`` with each tool call's id unique in the turn.

    A tool-call id is model output, and so hostile: a model (or a compatible
    server numbering its calls ``call_0``, ``call_1`` in every reply) may give
    two calls of one reply, or of two rounds, the same id. Ids name the calls a
    person approves (``session.resolve``) and pair each call with its result,
    so a call whose id the turn already used gets a fresh one
    (`pride.llm.new_call_id`) before anything records it: the conversation,
    the journal and the approval all see the same, distinct ids. Replies
    answered from a journal pass here too, so a resumed turn knows the ids its
    earlier rounds used.
    """
    state = scope.state
    seen = state.call_ids
    if seen is None:
        seen = state.call_ids = set()
    calls = list(response.tool_calls)
    renamed = False
    for position, call in enumerate(calls):
        if call.id in seen:
            fresh = new_call_id()
            log.warning(
                "turn %s: the model gave a %s call the id %r, already used in this turn; "
                "it is called %r instead",
                state.context.turn_id,
                call.name,
                call.id[:100],
                fresh,
            )
            calls[position] = attrs.evolve(call, id=fresh)
            renamed = True
            seen.add(fresh)
        else:
            seen.add(call.id)
    return attrs.evolve(response, tool_calls=tuple(calls)) if renamed else response
