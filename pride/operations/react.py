"""ReAct and ReActStream: think, act, observe, then answer, all in one turn.

The algorithm (the reference system's, plus loop control):

1. optionally ``interpret`` the instruction into a clearer prompt;
2. round 1: ``operate`` with the [`ReActAnalysis`][pride.ReActAnalysis]
   format, ``reason=True``, the selected tools offered (``actions``) and
   executed inside the turn; the guidance tells the model how many extra
   rounds it may ask for;
3. while ``extension_allowed``, extensions remain (``max_extensions``,
   default 3, capped at 100) and the last analysis says
   ``extension_needed``: check loop control, then another ``operate`` round.
   The caller's context is shown in round 1 only. A round whose reply did
   not parse into an analysis ends the rounds (it cannot ask for more);
4. check loop control, then the final answer: ``operate`` with the caller's
   ``response_format`` (default [`Analysis`][pride.Analysis])
   and no tools.

Every nested ``operate``/``interpret`` runs inline in the same turn (one
RunStart, one terminal signal), with a nested scope sharing the turn context.

Returns (``ReAct``): the answer. With the default format it is text: the
``Analysis.answer``, or the final reply's own text when that did not parse
into an ``Analysis`` (the answer is text either way). With the caller's
``response_format`` it is an instance of that format, or an
[`Unparsed`][pride.Unparsed] when the final reply did not parse. With
``return_analysis``: ``(answer, rounds)``, ``rounds`` being each round's
[`OperateResult`][pride.OperateResult] (``.output`` is its
ReActAnalysis; ``.action_requests``/``.action_responses`` its tool work).

``ReActStream`` emits each round's OperateResult as it completes, then the
answer, to its ``pride.stream`` consumer (no token chunks: the items are the
rounds). Through ``ask`` it returns the list of those items.

Loop control: BREAK fails the turn ([`LoopBreak`][pride.LoopBreak]). CANCEL stops
at once, without the final-answer call, and ends the turn cleanly: ``ReAct``
returns None (``(None, rounds so far)`` with ``return_analysis``);
``ReActStream`` ends its stream (through ``ask``: the items so far).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..errors import StopStream
from ..messages import Interpret, Operate, ReAct, ReActStream
from ._items import Items
from .interpret import interpret
from .operate import operate
from .results import Analysis, OperateResult, ReActAnalysis, Unparsed

if TYPE_CHECKING:
    from .view import TurnView

__all__ = ["MAX_EXTENSIONS_CAP", "react", "react_stream"]

log = logging.getLogger("pride.operations")

MAX_EXTENSIONS_CAP = 100
"""The most extension rounds one ReAct takes, whatever ``max_extensions`` says."""

OnRound = Callable[[Any], Awaitable[None]]


def _first_prompt(extensions: int) -> str:
    if extensions <= 0:
        return "Analyse the request and act if needed. Set extension_needed to false."
    return (
        "Work in rounds of analysis and action. After this round you may ask for up to "
        f"{extensions} more by setting extension_needed to true; ask only when another "
        "round would make the answer better."
    )


def _continue_prompt(remaining: int) -> str:
    return (
        "Continue: review the results so far, act again if that helps, and update your "
        f"analysis. Rounds left after this one: {remaining}."
    )


ANSWER_PROMPT = (
    "Now give your final answer to the original request, using your analysis and any "
    "tool results above."
)


async def react(turn: TurnView, command: ReAct) -> Any:
    """Run ReAct and return the answer (and the rounds with ``return_analysis``).

    Raises:
        ValueError: ``max_extensions`` is negative.
        LoopBreak: a BREAK directive arrived between rounds.
        ProviderError: a model call failed.

    Cancellation: a CANCEL directive returns None (see the module docstring);
    cancelling the turn cancels the round in flight.
    """
    rounds: list[OperateResult] = []

    async def keep(item: Any) -> None:
        if isinstance(item, OperateResult):
            rounds.append(item)

    try:
        answer = await _run(turn, command, keep, stream_tokens=True)
    except StopStream:
        answer = None
    return (answer, rounds) if command.return_analysis else answer


async def react_stream(turn: TurnView, command: ReActStream) -> list[Any] | None:
    """Run ReAct, emitting each round's OperateResult and then the answer.

    Returns the list of items when nobody streams (``ask``), else None.

    Raises:
        ValueError: ``max_extensions`` is negative.
        LoopBreak: a BREAK directive arrived between rounds.
        StopStream: the consumer left, or a CANCEL directive (the turn ends cleanly).
    """
    items = Items(turn)
    try:
        answer = await _run(turn, command, items.put, stream_tokens=False)
    except StopStream:
        if items.streaming:
            raise
        return items.result()
    await items.put(answer)
    return items.result()


async def _run(
    turn: TurnView,
    command: ReAct | ReActStream,
    on_round: OnRound,
    *,
    stream_tokens: bool,
) -> Any:
    if command.max_extensions < 0:
        raise ValueError(f"max_extensions must be >= 0, got {command.max_extensions}")
    extensions = command.max_extensions
    if extensions > MAX_EXTENSIONS_CAP:
        log.warning("ReAct: max_extensions=%d capped at %d", extensions, MAX_EXTENSIONS_CAP)
        extensions = MAX_EXTENSIONS_CAP
    if not command.extension_allowed:
        extensions = 0
    model = turn.model(command.chat_model)
    inner = turn.nested(stream_tokens=stream_tokens)
    instruction = command.instruction
    if command.interpret and (instruction or command.plain_content):
        instruction = await interpret(
            inner,
            Interpret(
                command.plain_content or instruction,
                domain=command.interpret_domain,
                style=command.interpret_style,
                interpret_model=model,
            ),
        )
    options = dict(command.request_options)
    effort = ""
    if command.reasoning_effort is not None:
        options["reasoning_effort"] = command.reasoning_effort
        effort = f" Reasoning effort: {command.reasoning_effort}."
    has_tools = bool(turn.acts.select(command.tools))
    shared = {
        "chat_model": model,
        "parse_model": command.parse_model,
        "sender": command.sender,
        "recipient": command.recipient,
        "request_options": options,
    }

    def round_command(text: str, guidance: str, strategy: Any, **first: Any) -> Operate:
        return Operate(
            text,
            guidance=guidance + effort,
            response_format=ReActAnalysis,
            tools=command.tools,
            actions=has_tools,
            reason=True,
            invoke_actions=True,
            action_strategy=strategy or command.action_strategy,
            **shared,
            **first,
        )

    guidance = _first_prompt(extensions)
    if command.guidance:
        guidance = f"{command.guidance}\n\n{guidance}"
    first = round_command(
        instruction,
        guidance,
        None,
        context=command.context,
        plain_content=None if command.interpret else command.plain_content,
        images=command.images,
        image_detail=command.image_detail,
    )
    result = await operate(inner, first)
    await on_round(result)
    while extensions > 0 and _extension_needed(result):
        turn.check_control()
        extensions -= 1
        strategy = result.output.action_strategy
        result = await operate(inner, round_command(_continue_prompt(extensions), "", strategy))
        await on_round(result)
    turn.check_control()
    final = Operate(
        ANSWER_PROMPT,
        guidance=effort.strip() or None,
        response_format=command.response_format or Analysis,
        actions=False,
        invoke_actions=False,
        **shared,
    )
    answer = await operate(inner, final)
    if command.response_format is None:
        if isinstance(answer, Analysis):
            return answer.answer
        if isinstance(answer, Unparsed):  # the reply is the answer, only not wrapped in JSON
            return answer.text
    return answer


def _extension_needed(result: Any) -> bool:
    output = getattr(result, "output", None)
    if not isinstance(output, ReActAnalysis):
        log.info("ReAct: a round's reply did not parse into an analysis; moving to the answer")
        return False
    return output.extension_needed
