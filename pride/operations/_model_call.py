"""One model call inside a turn: hooks, token streaming, usage and logs in one place.

Every operation that calls a model goes through `call_model`, so
hooks (``before_model_call``, ``model_stream_chunk``, ``after_model_call``),
usage accounting on the turn (reported on ``RunEnd``) and the branch's call
log behave the same for every verb.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import trio

from ..errors import InvalidMessage, StopStream
from ..llm import ModelRequest, ModelResponse, iModel
from ..messages.commands import ModelName

if TYPE_CHECKING:
    from ..actors.branch import Branch
    from ..actors.turn import TurnScope

__all__ = ["call_model", "resolve_model"]


def resolve_model(
    branch: Branch, spec: Any, scope: TurnScope | None, *, parse: bool = False
) -> iModel:
    """The model for this call: an override spec, else the turn's snapshot.

    A top-level override becomes the turn's model snapshot; it never changes
    ``branch.chat_model`` (ADR-0018 D3). ``parse`` picks the parse model.

    Raises:
        InvalidMessage: ``spec`` is a [`ModelName`][pride.messages.commands.ModelName]
            (a model named by a command decoded from outside) that names none of
            the models the branch holds.
    """
    if isinstance(spec, ModelName):
        model = _offered(branch, spec, scope)
        if scope is not None and scope.owns_lifecycle and not parse:
            scope.context.model = model
        return model
    if spec is not None:
        model = iModel.from_spec(spec)
        if scope is not None and scope.owns_lifecycle and not parse:
            scope.context.model = model
        return model
    if parse:
        return branch.parse_model
    if scope is not None:
        snapshot: iModel = scope.context.model
        return snapshot
    return branch.chat_model


def _offered(branch: Branch, name: ModelName, scope: TurnScope | None) -> iModel:
    """The model called ``name`` among those the application gave the branch: its
    chat model (the turn's snapshot too) and its parse model. Never a new one:
    a name from outside must not pick an endpoint or a key (what pride trusts)."""
    models = [branch.chat_model, branch.parse_model]
    if scope is not None:
        models.insert(0, scope.context.model)
    for model in models:
        if name in (f"{model.provider}/{model.model}", model.model):
            return model
    offered = ", ".join(sorted({f"{model.provider}/{model.model}" for model in models}))
    raise InvalidMessage(
        [
            (
                name.field or "model",
                f"no model named {str(name)!r} is made available by branch {branch.name!r} "
                f"(it offers: {offered})",
            )
        ]
    )


async def call_model(
    branch: Branch,
    scope: TurnScope | None,
    model: iModel,
    request: ModelRequest,
    *,
    stream_tokens: bool = True,
    control: bool = False,
) -> ModelResponse:
    """Call ``model``; stream text chunks to the turn's consumer when there is one.

    Args:
        stream_tokens: stream text chunks when the turn has a stream consumer.
        control: check the turn's loop control after each streamed chunk
            (streaming verbs honour BREAK/CANCEL mid-reply).

    Raises:
        ProviderError: the provider call failed (after the model's retries).
        StopStream: the stream consumer left, or a CANCEL directive (``control``).
        LoopBreak: a BREAK directive (``control``).

    Cancellation: an in-flight call is aborted (its HTTP stream closed).
    """
    hooked = branch._hooks is not None
    if hooked:
        await branch.run_hook(
            "before_model_call", {"branch": branch, "model": model, "request": request}
        )
    started = time.perf_counter()
    turn_id = scope.turn_id if scope is not None else None
    try:
        if stream_tokens and scope is not None and scope.streaming:
            async with model.stream(request) as chunks:
                async for delta in chunks:
                    if hooked:
                        branch.fire_hook("model_stream_chunk", {"branch": branch, "chunk": delta})
                    await scope.emit(delta)
                    if control:
                        scope.check_control()
            response = chunks.response
        else:
            response = await model.invoke(request)
    except (trio.Cancelled, StopStream):
        branch.logs.record(
            "model", model.model, started=started, status="cancelled", turn_id=turn_id
        )
        raise
    except BaseException as exc:
        branch.logs.record(
            "model", model.model, started=started, status="error", turn_id=turn_id, error=exc
        )
        raise
    usage = response.usage
    if scope is not None:
        scope.record_usage(
            usage.input_tokens, usage.output_tokens, usage.cached_tokens, usage.cost_usd
        )
    branch.logs.record(
        "model",
        model.model,
        started=started,
        status="ok",
        turn_id=turn_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost_usd=usage.cost_usd,
        detail={"messages": request.messages, "reply": response.text}
        if branch.logs.config.include_content
        else None,
    )
    if hooked:
        branch.fire_hook(
            "after_model_call", {"branch": branch, "model": model, "response": response}
        )
    return response
