"""operate: a structured turn with optional reasoning and tool actions.

One operate call:

1. builds the structure to ask for (`Operative`):
   the response format, plus ``reason`` and, on the fenced-JSON path, the
   action fields;
2. calls the model over the history, offering the selected tools when
   ``actions=True``: natively when the model supports tool calling (the
   provider's tool calls keep their ids), otherwise described in the system
   text of the request, the model listing ``action_requests`` in its JSON;
3. records the Instruction and the AssistantResponse;
4. with ``invoke_actions``, executes the requested calls inside the turn
   ([`run_actions`][pride.operations.act.run_actions]: concurrent by default,
   ``max_concurrent`` capping, or sequential), recording each
   ActionRequest/ActionResponse pair, then calls the model again so its
   answer reflects the results. This repeats while the model asks for tools,
   for at most ``max_rounds`` rounds of execution; the call after the last
   round offers no tools (``tool_choice="none"`` natively, no action fields
   in the fenced schema), so the turn ends with an answer. The reference
   system returns after one round; pride's callers expect an answer that
   has seen the tool results;
5. calls the context providers' writeback when actions produced responses;
6. parses the final reply into the structure (reformat retries as in
   [`parse_text`][pride.operations.chat.parse_text], ``handle_validation`` applying).

What it returns: with ``reason`` or ``actions`` on, an
[`OperateResult`][pride.OperateResult]; otherwise the parsed
response format, or the reply text when there is none (or with
``skip_validation``). A final reply that does not parse is never returned
as a bare ``str``: ``handle_validation`` gives
[`ParseFailed`][pride.ParseFailed] (``"raise"``), an
[`Unparsed`][pride.Unparsed] (``"return_value"``, the default) or None
(``"return_none"``), in ``OperateResult.output`` when there is one.

Loop control: the turn's directive is checked between rounds (BREAK fails
the turn with LoopBreak; CANCEL ends it cleanly with StopStream).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..messages import ActionCall, ActionResponse, Operate
from ._operative import Operative, Parsed
from ._request import build_request
from .act import action_calls, bounded_calls, run_actions, unexecuted_note
from .chat import make_instruction, make_response, record_reasoning
from .parse import parse_text
from .results import OperateResult

if TYPE_CHECKING:
    from ..llm import ModelResponse, iModel
    from .view import TurnView

__all__ = ["PARSE_RETRIES", "operate", "tools_prompt"]

log = logging.getLogger("pride.operations")

PARSE_RETRIES = 3
"""Reformat calls operate allows when the final reply does not parse."""


def tools_prompt(schemas: Sequence[dict[str, Any]]) -> str:
    """The system text describing tools on the fenced-JSON path."""
    lines = [
        "You can use these tools. To call them, list the calls in `action_requests` "
        'as {"function": <tool name>, "arguments": {...}}; their results come back '
        "in the next message. Leave `action_requests` empty when no tool is needed.",
    ]
    for schema in schemas:
        parameters = json.dumps(schema.get("parameters") or {}, separators=(",", ":"))
        description = schema.get("description") or ""
        lines.append(f"- {schema['name']}: {description} Parameters (JSON schema): {parameters}")
    return "\n".join(lines)


async def operate(turn: TurnView, command: Operate) -> Any:
    """Run a structured turn; see the module docstring for the algorithm.

    Raises:
        ValueError: ``max_rounds`` is negative, or the response format clashes
            with the fields operate adds.
        KeyError: ``tools`` names a tool that is not registered.
        ParseFailed: the final reply did not parse and ``handle_validation="raise"``.
        ProviderError: a model call failed.
        LoopBreak: a BREAK directive arrived between rounds.
    """
    if command.max_rounds < 0:
        raise ValueError(f"max_rounds must be >= 0, got {command.max_rounds}")
    model = turn.model(command.chat_model)
    native = model.supports_native_tools
    offered = turn.acts.schemas(command.tools) if command.actions else ()
    fenced = bool(offered) and not native
    operative = Operative(command.response_format, reason=command.reason, actions=fenced)
    instruction = make_instruction(
        turn, command, tool_schemas=offered, response_schema=operative.schema
    )
    await turn.gather_context(instruction)
    rounds = _Rounds(turn, command, model=model, offered=offered, native=native)
    response = await rounds.call(instruction, operative, last=False)
    turn.add_message(instruction)
    current = operative
    while True:
        parsed: Any = None
        if native:  # calls to tools that were not offered are never run
            calls, errors = action_calls(response.tool_calls if offered else ())
        else:
            parsed = await rounds.parse(current, response.text)
            calls = list(parsed.calls) if isinstance(parsed, Parsed) else []
            errors = {}
        calls, text = bounded_calls(calls, response.text)
        execute = bool(calls) and command.invoke_actions and rounds.rounds < command.max_rounds
        rounds.record_reply(response, calls, text, executed=execute)
        if not execute:
            break
        await rounds.execute(calls, errors)
        turn.check_control()
        last = rounds.rounds >= command.max_rounds
        if fenced and last:
            current = Operative(command.response_format, reason=command.reason, actions=False)
        response = await rounds.call(None, current, last=last)
    if rounds.responses:
        await turn.writeback_context(list(rounds.responses))
    if native:
        parsed = await rounds.parse(operative, response.text)
    if isinstance(parsed, Parsed):
        output, reason = parsed.output, parsed.reason
    else:  # no structure or skip_validation (text), or a failure: Unparsed or None
        output, reason = parsed, None
    if command.reason or command.actions:
        return OperateResult(output, reason, tuple(rounds.requested), tuple(rounds.responses))
    return output


class _Rounds:
    """The state of one operate call's rounds: calls requested, responses recorded."""

    def __init__(
        self,
        turn: TurnView,
        command: Operate,
        *,
        model: iModel,
        offered: Sequence[dict[str, Any]],
        native: bool,
    ) -> None:
        self.turn = turn
        self.command = command
        self.model = model
        self.offered = offered
        self.native = native
        self.rounds = 0
        self.requested: list[ActionCall] = []
        self.responses: list[ActionResponse] = []

    async def call(self, instruction: Any, operative: Operative, *, last: bool) -> ModelResponse:
        """One model call; ``instruction`` None continues from the recorded history."""
        tools: Sequence[dict[str, Any]] = ()
        tool_choice = None
        extra = None
        if self.offered and self.native:
            tools = self.offered
            tool_choice = "none" if last else None
        elif self.offered and operative.actions:
            extra = tools_prompt(self.offered)
        request = build_request(
            self.turn,
            self.model,
            instruction,
            tools=tools,
            tool_choice=tool_choice,
            response_format=operative.schema,
            options=self.command.request_options,
            extra_system=extra,
        )
        return await self.turn.call_model(self.model, request)

    async def parse(self, operative: Operative, text: str) -> Any:
        """The reply parsed into ``operative`` (a Parsed), or the fallback value."""
        if not operative.structured or self.command.skip_validation:
            return text
        return await parse_text(
            self.turn,
            text,
            operative,
            max_retries=PARSE_RETRIES,
            handle_validation=self.command.handle_validation,
            parse_model=self.command.parse_model,
        )

    def record_reply(
        self, response: ModelResponse, calls: Sequence[ActionCall], text: str, *, executed: bool
    ) -> None:
        """Record the reply (its reasoning first) with ``text``; native calls that will
        not run are noted in it."""
        self.requested.extend(calls)
        record_reasoning(self.turn, response)
        if self.native and calls and not executed:
            if self.command.invoke_actions:
                log.warning(
                    "operate on branch %r: the model asked for tools after the last round "
                    "(max_rounds=%d); the calls were not executed",
                    self.turn.name,
                    self.command.max_rounds,
                )
            text = unexecuted_note(calls, text)
        elif self.native and calls and not text:
            return  # the tool calls alone are the reply (an empty text block is invalid)
        self.turn.add_message(make_response(self.turn, response, text))

    async def execute(self, calls: Sequence[ActionCall], errors: dict[int, str]) -> None:
        """Run one round of calls and record their pairs."""
        self.responses.extend(
            await run_actions(
                self.turn,
                calls,
                strategy=self.command.action_strategy,
                max_concurrent=self.command.max_concurrent,
                argument_errors=errors,
            )
        )
        self.rounds += 1
