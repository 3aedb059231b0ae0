"""OpenAI's reasoning controls as model options, checked before anything is sent.

``reasoning_effort`` (how much the model reasons before it answers) and
``reasoning_summary`` (whether, and how fully, the Responses API reports a
summary of that reasoning) are request options like ``temperature``: given to
[`iModel`][pride.iModel] they apply to every call, in a request's ``options``
to that call. A value outside OpenAI's vocabulary is refused naming the
accepted ones, instead of as an HTTP 400 after a round trip: a ``ValueError``
when the model is made, a ``BadRequest`` (not retried) when a call's own
options hold it, before anything is sent. Chat completions takes
``reasoning_effort`` as is and has no summaries; the Responses API takes both
as its ``reasoning`` object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "REASONING_EFFORTS",
    "REASONING_OPTIONS",
    "REASONING_SUMMARIES",
    "check_reasoning_options",
    "reasoning_object",
]

#: The reasoning efforts OpenAI accepts (not every model takes every one).
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")

#: The reasoning summaries the Responses API can report.
REASONING_SUMMARIES = ("auto", "concise", "detailed")

#: The request options holding reasoning controls, and their vocabularies.
REASONING_OPTIONS: dict[str, tuple[str, ...]] = {
    "reasoning_effort": REASONING_EFFORTS,
    "reasoning_summary": REASONING_SUMMARIES,
}


def _check(name: str, value: Any) -> None:
    accepted = REASONING_OPTIONS[name]
    if value not in accepted:
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, accepted))} (or None), got {value!r}"
        )


def check_reasoning_options(options: Mapping[str, Any], *, responses: bool) -> None:
    """Refuse a reasoning option with a value OpenAI does not accept.

    Args:
        options: request options (only the reasoning ones are looked at).
        responses: the options go over the Responses API (else chat
            completions, which has no reasoning summaries).

    Raises:
        ValueError: a value outside the option's vocabulary, or a summary asked
            of chat completions.
    """
    for name in REASONING_OPTIONS:
        value = options.get(name)
        if value is not None:
            _check(name, value)
    if not responses and options.get("reasoning_summary") is not None:
        raise ValueError("reasoning_summary needs the Responses API; give openai_api='responses'")


def reasoning_object(values: Mapping[str, Any]) -> dict[str, str]:
    """The Responses API's ``reasoning`` object for the reasoning options in ``values``.

    Raises:
        ValueError: a value outside the option's vocabulary.
    """
    reasoning = {}
    for name, value in values.items():
        if value is not None:
            _check(name, value)
            reasoning[name.removeprefix("reasoning_")] = value
    return reasoning
