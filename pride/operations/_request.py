"""Turn request compilation: history + new instruction (+ context) into a ModelRequest.

The history is compiled once per provider shape and kept up to date by the
branch's [`History`][pride.branch.branch.History], so this costs a list copy
plus the rendering of the new instruction, whatever the history's length.

The system prompt goes to the provider as a real system message (OpenAI: the
first entry; Anthropic: the ``system`` parameter), with the turn's context
provider blocks appended for this request only — never recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..llm import ModelRequest, iModel
from ..messages import Instruction
from ..messages.history import ProviderShape, merge_entry

if TYPE_CHECKING:
    from .view import TurnView

__all__ = ["build_request", "system_text"]


def system_text(turn: TurnView, extra: str | None = None) -> str | None:
    """The system prompt for this turn's requests: the system message, provider
    blocks, then ``extra`` (text for this one request, e.g. tool descriptions)."""
    blocks = turn.provider_blocks  # the view's first, then the history's: one visit each
    system = turn.messages.system
    if extra is None and not blocks:
        return system.text if system is not None else None
    parts = [system.text] if system is not None else []
    parts.extend(blocks)
    if extra:
        parts.append(extra)
    return "\n\n".join(parts) or None


def build_request(
    turn: TurnView,
    model: iModel,
    instruction: Instruction | None,
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    response_format: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    tool_choice: str | None = None,
    include_history: bool = True,
    include_system: bool = True,
    extra_system: str | None = None,
) -> ModelRequest:
    """Compile the request for ``model``: system, history, then ``instruction``.

    ``instruction`` may be None when the history already ends with the turn's
    input (a tool loop continuing after action responses). ``extra_system``
    is appended to the system text of this request only (never recorded);
    ``include_system=False`` sends no system text at all (utility calls such
    as parse reformats).
    """
    shape: ProviderShape = model.api_format  # type: ignore[assignment]
    # What this module makes of its own arguments, first: then the history, once.
    response_format = _plain(response_format)
    options = _plain(options) or {}
    system = system_text(turn, extra_system) if include_system else None
    # Only the reasoning this model's endpoint produced goes back to it.
    entries = turn.messages.compile(shape, origin=model.reasoning_origin) if include_history else []
    if instruction is not None:
        merge_entry(
            entries,
            instruction.to_openai() if shape == "openai" else instruction.to_anthropic(),
            shape,
        )
    if shape == "openai":
        messages = [{"role": "system", "content": system}, *entries] if system else entries
        return ModelRequest(
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            response_format=response_format,
            options=options,
        )
    return ModelRequest(
        messages=entries,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        response_format=response_format,
        options=options,
    )


def _plain(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if value is None or isinstance(value, dict):
        return value
    return dict(value)
