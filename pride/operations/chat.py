"""chat, chat_and_record, communicate: one model call over the history.

* ``chat`` records nothing and returns the reply text (or the instruction and
  response messages when ``return_ins_res_message``).
* ``chat_and_record`` records the instruction and the response after the
  call succeeds (a failed call records nothing).
* ``communicate`` records both, then parses into ``response_format`` when one
  is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..messages import AssistantResponse, Chat, ChatAndRecord, Communicate, Instruction
from ..messages.commands import _Prompt
from ._context import gather_context
from ._model_call import call_model, resolve_model
from ._request import build_request
from .formats import FormatTarget, format_schema
from .parse import parse_text

if TYPE_CHECKING:
    from ..actors.branch import Branch
    from ..actors.turn import TurnScope
    from ..llm import ModelResponse

__all__ = ["chat", "chat_and_record", "communicate", "make_instruction", "make_response"]


def make_instruction(
    branch: Branch,
    command: _Prompt,
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
    return Instruction(
        instruction=command.instruction,
        guidance=command.guidance,
        context=command.context,
        plain_content=command.plain_content,
        images=command.images,
        image_detail=command.image_detail,
        tool_schemas=tool_schemas,
        response_format=response_schema,
        sender=command.sender or branch.user or "user",
        recipient=command.recipient or branch.id_str,
    )


_TEXT_FIELDS = ("instruction", "guidance", "plain_content", "sender", "recipient")


def _check_text(command: _Prompt) -> None:
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
    branch: Branch, response: ModelResponse, text: str | None = None
) -> AssistantResponse:
    """The AssistantResponse message for a model reply (or ``text``), usage in its metadata."""
    usage = response.usage
    return AssistantResponse(
        assistant_response=response.text if text is None else text,
        sender=branch.id_str,
        recipient=branch.user or "user",
        metadata={
            "model": response.model,
            "usage": {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cached_tokens": usage.cached_tokens,
                "cost_usd": usage.cost_usd,
            },
        },
    )


async def _exchange(
    branch: Branch, command: _Prompt, scope: TurnScope | None, *, tools: Any = False
) -> tuple[Instruction, ModelResponse]:
    model = resolve_model(branch, command.chat_model, scope)
    schema = format_schema(command.response_format)
    tool_schemas = branch.acts.schemas(tools) if tools else ()
    instruction = make_instruction(
        branch, command, tool_schemas=tool_schemas, response_schema=schema
    )
    await gather_context(branch, scope, instruction)
    request = build_request(
        branch,
        model,
        scope,
        instruction,
        tools=tool_schemas if model.supports_native_tools else (),
        response_format=schema,
        options=command.request_options,
    )
    response = await call_model(branch, scope, model, request)
    return instruction, response


async def chat(branch: Branch, command: Chat, scope: TurnScope | None) -> Any:
    """One model call over the history; records nothing."""
    instruction, response = await _exchange(branch, command, scope, tools=command.tools)
    if command.return_ins_res_message:
        return instruction, make_response(branch, response)
    return response.text


async def chat_and_record(branch: Branch, command: ChatAndRecord, scope: TurnScope | None) -> str:
    """Chat, then record the instruction and the response; returns the text."""
    instruction, response = await _exchange(branch, command, scope)
    assistant = make_response(branch, response)
    branch.add_message(instruction)
    branch.add_message(assistant)
    return assistant.assistant_response


async def communicate(branch: Branch, command: Communicate, scope: TurnScope | None) -> Any:
    """Chat, record both messages, then parse into ``response_format`` if given."""
    if command.clear_messages:
        branch.messages.clear()
    instruction, response = await _exchange(branch, command, scope)
    assistant = make_response(branch, response)
    branch.add_message(instruction)
    branch.add_message(assistant)
    if command.response_format is None or command.skip_validation:
        return assistant.assistant_response
    return await parse_text(
        branch,
        scope,
        assistant.assistant_response,
        FormatTarget(command.response_format),
        max_retries=command.num_parse_retries,  # parse_text applies the cap
        handle_validation=command.handle_validation,
        parse_model=command.parse_model,
    )
