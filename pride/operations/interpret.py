"""interpret: rewrite raw user input into a clearer prompt. Records nothing.

The model sees the conversation so far (so "do that again" can be resolved)
and is asked to restate the input as a precise, self-contained request,
keeping its intent. ``domain`` and ``style`` steer the rewrite. The call runs
at temperature 0.1 unless ``request_options`` says otherwise, as in the
reference system.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..messages import Instruction, Interpret
from ._request import build_request

if TYPE_CHECKING:
    from .view import TurnView

__all__ = ["INTERPRET_TEMPERATURE", "interpret", "interpret_instruction"]

INTERPRET_TEMPERATURE = 0.1
"""The default sampling temperature of an interpret call."""

_TASK = (
    "Rewrite the user's raw input below into a clear, precise and self-contained prompt "
    "for an AI assistant. Keep the user's intent and every concrete detail; make implicit "
    "requirements explicit; do not answer it. Reply with the rewritten prompt only."
)


def interpret_instruction(
    turn: TurnView, text: str, domain: str | None, style: str | None
) -> Instruction:
    """The instruction an interpret call sends (never recorded)."""
    guidance = []
    if domain:
        guidance.append(f"The input belongs to the domain of {domain}; use its vocabulary.")
    if style:
        guidance.append(f"Write the prompt in this style: {style}.")
    return Instruction(
        instruction=_TASK,
        guidance=" ".join(guidance) or None,
        context={"user_input": text},
        sender=turn.user or "user",
        recipient=turn.id_str,
    )


async def interpret(turn: TurnView, command: Interpret) -> str:
    """Return ``command.text`` rewritten as a clearer prompt; records nothing.

    Raises:
        ProviderError: the model call failed.
    """
    model = turn.model(command.interpret_model)
    instruction = interpret_instruction(turn, command.text, command.domain, command.style)
    await turn.gather_context(instruction)
    request = build_request(
        turn,
        model,
        instruction,
        options={"temperature": INTERPRET_TEMPERATURE, **command.request_options},
    )
    response = await turn.call_model(model, request)
    return response.text.strip()
