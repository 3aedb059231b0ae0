"""chat, chat_and_record, communicate: one model call over the history.

* ``chat`` records nothing and returns the reply text (or the instruction and
  response messages when ``return_ins_res_message``).
* ``chat_and_record`` records the instruction and the response after the
  call succeeds (a failed call records nothing).
* ``communicate`` records both, then parses into ``response_format`` when one
  is given.

None of them runs tools. A reply that asks for tool calls (``Chat(tools=True)``
offers them; a model may ask for them unoffered, from the calls in its history)
is answered with its text followed by a note naming the calls not run, the same
note ``run`` and ``operate`` record for calls past their last round, and a
warning is logged. A reply of tool calls alone was answered, and recorded, as
``""``: a silent empty answer to the caller, and an empty assistant message that
some providers refuse in every later request of the branch.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from ..messages import (
    AssistantResponse,
    Chat,
    ChatAndRecord,
    Communicate,
    Instruction,
    Operate,
    ReAct,
    ReActStream,
    Reasoning,
    Run,
)
from ._request import build_request
from .act import action_calls, unexecuted_note
from .formats import FormatTarget, format_schema
from .parse import parse_text

if TYPE_CHECKING:
    from ..llm import ModelResponse
    from .view import TurnView

__all__ = [
    "PromptCommand",
    "chat",
    "chat_and_record",
    "communicate",
    "make_instruction",
    "make_response",
    "record_reasoning",
]

log = logging.getLogger("pride.operations")

PromptCommand: TypeAlias = Chat | ChatAndRecord | Communicate | Operate | Run | ReAct | ReActStream
"""The commands that send an instruction to the model (they share the prompt fields)."""


def make_instruction(
    turn: TurnView,
    command: PromptCommand,
    *,
    tool_schemas: tuple[dict[str, Any], ...] = (),
    response_schema: dict[str, Any] | None = None,
) -> Instruction:
    """The Instruction message a prompt command records.

    Raises:
        TypeError: a text field of the command (instruction, guidance,
            plain_content, sender, recipient, images) is not text.
    """
    _check_text(command)
    sender = command.sender or turn.user or "user"
    recipient = command.recipient or turn.id_str
    if (
        command.guidance is None
        and command.context is None
        and command.plain_content is None
        and command.images == ()
        and command.image_detail == "auto"
        and tool_schemas == ()
        and response_schema is None
    ):
        # A plain prompt (most turns): its other fields are the message's defaults,
        # and each field passed costs a keyword match and a converter call.
        return Instruction(instruction=command.instruction, sender=sender, recipient=recipient)
    return Instruction(
        instruction=command.instruction,
        guidance=command.guidance,
        context=command.context,
        plain_content=command.plain_content,
        images=command.images,
        image_detail=command.image_detail,
        tool_schemas=tool_schemas,
        response_format=response_schema,
        sender=sender,
        recipient=recipient,
    )


_TEXT_FIELDS = ("instruction", "guidance", "plain_content", "sender", "recipient")


def _check_text(command: PromptCommand) -> None:
    # A recorded Instruction is rendered into every later request of its branch:
    # one that cannot be rendered (or that providers refuse) would fail every turn
    # after it. Commands built in process are not validated, so check here, before
    # anything is recorded.
    for name in _TEXT_FIELDS:
        value = getattr(command, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"{type(command).__name__}.{name} must be a str, got {type(value).__name__}"
            )
    for image in command.images:
        if not isinstance(image, str):
            raise TypeError(
                f"{type(command).__name__}.images must be str URLs, got {type(image).__name__}"
            )


def make_response(
    turn: TurnView, response: ModelResponse, text: str | None = None
) -> AssistantResponse:
    """The AssistantResponse message for a model reply (or ``text``), usage in its metadata."""
    usage = response.usage
    return AssistantResponse(
        assistant_response=response.text if text is None else text,
        sender=turn.id_str,
        recipient=turn.user or "user",
        metadata={
            "model": response.model,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cached_tokens": usage.cached_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "reasoning_tokens": usage.reasoning_tokens,
                "cost_usd": usage.cost_usd,
            },
        },
    )


def record_reasoning(turn: TurnView, response: ModelResponse) -> list[Reasoning]:
    """Record the reply's reasoning, if any; call it before recording the rest of the reply.

    Recorded first, the reasoning renders first in the reply's own provider
    entry, beside the tool calls it led to (`pride.messages.reasoning`): a
    thinking model's tool loop needs it back there.
    """
    if not response.reasoning:
        return []
    sender, recipient = turn.id_str, turn.user or "user"
    return [
        turn.add_message(attrs.evolve(block, sender=sender, recipient=recipient))
        for block in response.reasoning
    ]


def _answer(
    turn: TurnView, command: Chat | ChatAndRecord | Communicate, response: ModelResponse
) -> str:
    """The reply's text, with a note of the tool calls it asked for (none is run here)."""
    if not response.tool_calls:
        return response.text
    calls, _ = action_calls(response.tool_calls)
    verb = type(command).__name__
    log.warning(
        "%s on branch %r: the model asked for tools (%s), which %s does not run "
        "(Run, ReAct or Operate(actions=True) do); the answer notes the calls instead",
        verb,
        turn.name,
        ", ".join(call.function for call in calls),
        verb,
    )
    return unexecuted_note(calls, response.text)


async def _exchange(
    turn: TurnView, command: Chat | ChatAndRecord | Communicate, *, tools: Any = False
) -> tuple[Instruction, ModelResponse]:
    model = turn.model(command.chat_model)
    schema = format_schema(command.response_format)
    tool_schemas = turn.acts.schemas(tools) if tools else ()
    instruction = make_instruction(turn, command, tool_schemas=tool_schemas, response_schema=schema)
    await turn.gather_context(instruction)
    request = build_request(
        turn,
        model,
        instruction,
        tools=tool_schemas if model.supports_native_tools else (),
        response_format=schema,
        options=command.request_options,
    )
    response = await turn.call_model(model, request)
    return instruction, response


async def chat(turn: TurnView, command: Chat) -> Any:
    """One model call over the history; records nothing."""
    instruction, response = await _exchange(turn, command, tools=command.tools)
    text = _answer(turn, command, response)
    if command.return_ins_res_message:
        return instruction, make_response(turn, response, text)
    return text


async def chat_and_record(turn: TurnView, command: ChatAndRecord) -> str:
    """Chat, then record the instruction and the response; returns the text."""
    instruction, response = await _exchange(turn, command)
    assistant = make_response(turn, response, _answer(turn, command, response))
    turn.add_message(instruction)
    record_reasoning(turn, response)
    turn.add_message(assistant)
    return assistant.assistant_response


async def communicate(turn: TurnView, command: Communicate) -> Any:
    """Chat, record both messages, then parse into ``response_format`` if given."""
    if command.clear_messages:
        turn.messages.clear()
    instruction, response = await _exchange(turn, command)
    assistant = make_response(turn, response, _answer(turn, command, response))
    turn.add_message(instruction)
    record_reasoning(turn, response)
    turn.add_message(assistant)
    if command.response_format is None or command.skip_validation:
        return assistant.assistant_response
    return await parse_text(
        turn,
        assistant.assistant_response,
        FormatTarget(command.response_format),
        max_retries=command.num_parse_retries,  # parse_text applies the cap
        handle_validation=command.handle_validation,
        parse_model=command.parse_model,
    )
