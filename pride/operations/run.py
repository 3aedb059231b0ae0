"""run: stream a turn's messages as they are produced, tool loop included.

Items, in order: the Instruction (recorded first), the reply's text chunks
(``str``) while the model streams (and its reasoning as
[`ReasoningDelta`][pride.ReasoningDelta] items, for a model that thinks), the
reply's [`Reasoning`][pride.Reasoning] messages, the AssistantResponse, then for each
round of tool calls the ActionRequests (before the calls run) and the
ActionResponses. The model is offered the selected tools natively (a model
without native tool calling is offered none); its calls are executed inside
the turn and fed back until it answers without tool calls. At most
``max_rounds`` rounds of calls run; the call after the last round is made
with ``tool_choice="none"``, so the turn ends with an answer.

Loop control is checked after every item (chunks included): BREAK fails the
turn ([`LoopBreak`][pride.LoopBreak]), CANCEL ends it cleanly. A consumer leaving
early ends it cleanly too; whatever was recorded stays recorded, and a tool
call cut short still gets an ActionResponse saying so.

Through ``ask`` (no stream consumer) run returns the list of items it would
have streamed, without chunks; on CANCEL, the items so far.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import StopStream
from ..messages import Run
from ._items import Items
from ._request import build_request
from .act import action_calls, bounded_calls, run_actions, unexecuted_note
from .chat import make_instruction, make_response, record_reasoning
from .formats import format_schema

if TYPE_CHECKING:
    from .view import TurnView

__all__ = ["run"]

log = logging.getLogger("pride.operations")


async def run(turn: TurnView, command: Run) -> list[Any] | None:
    """Stream the turn's messages; return them as a list when nobody streams.

    Raises:
        ValueError: ``max_rounds`` is negative.
        KeyError: ``tools`` names a tool that is not registered.
        ProviderError: a model call failed.
        LoopBreak: a BREAK directive.
    """
    if command.max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, got {command.max_rounds}")
    items = Items(turn, check_control=True)
    put = items.put

    model = turn.model(command.chat_model)
    tools = turn.acts.schemas(command.tools) if model.supports_native_tools else ()
    schema = format_schema(command.response_format)
    instruction = make_instruction(turn, command, tool_schemas=tools, response_schema=schema)
    await turn.gather_context(instruction)
    try:
        turn.add_message(instruction)
        await put(instruction)
        rounds = 0
        while True:
            last = rounds >= command.max_rounds
            request = build_request(
                turn,
                model,
                None,
                tools=tools,
                tool_choice="none" if tools and last else None,
                response_format=schema,
                options=command.request_options,
            )
            response = await turn.call_model(model, request, control=True)
            calls, errors = action_calls(response.tool_calls)
            if calls and (last or not tools):
                log.warning(
                    "run on branch %r: the model asked for tools %s; the calls were not executed",
                    turn.name,
                    f"after the last round (max_rounds={command.max_rounds})"
                    if tools
                    else "it was not offered",
                )
                text = unexecuted_note(calls, response.text)
                calls = []
            else:
                calls, text = bounded_calls(calls, response.text)
            for block in record_reasoning(turn, response):
                await put(block)
            if text or not calls:
                assistant = make_response(turn, response, text)
                turn.add_message(assistant)
                await put(assistant)
            if not calls:
                break
            await run_actions(turn, calls, argument_errors=errors, emit=put)
            rounds += 1
    except StopStream:
        if items.streaming:
            raise
    return items.result()
