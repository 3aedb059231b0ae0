"""parse: model text into a response format, with reformat calls when it does not fit.

The algorithm (the reference system's, PR #2511 included):

1. one direct attempt: find the JSON ([`extract_json`][pride.operations.parse.extract_json]),
   map its keys onto the format's (`match_keys`),
   build the format;
2. on failure, up to ``max_retries`` *reformat* calls to the parse model, each
   attempt parsed the same way. Every reformat prompt names the previous
   error, so a retry is never the same request twice;
3. when all fail, ``handle_validation`` decides: ``"raise"`` raises
   [`ParseFailed`][pride.ParseFailed] naming the format, the attempts and the last
   error; ``"return_value"`` returns an [`Unparsed`][pride.Unparsed] carrying the
   original text and why it failed; ``"return_none"`` returns None. Either way
   the failure says its kind: ``"extraction"`` (no JSON found) or
   ``"schema"`` (JSON that does not fit), as the reference system splits them
   (its ``ExtractionError``/``SchemaRejectedError``).

The reference system's ``return_value`` hands back the text as a ``str``
subclass; pride returns a value of its own type instead, so a failed parse
cannot pass for an answer (pasted into an f-string, say).

Parsing records nothing in the conversation. Reformat calls go through the
turn's [`call_model`][pride.operations.view.TurnView.call_model] (hooks, usage
on the turn, logs) but never stream tokens, and are sent without the
conversation's history or system prompt: they are a utility, not a
conversation turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..errors import ParseFailed
from ..messages import Instruction, Parse
from ._fuzzy import HandleUnmatched, match_keys
from ._request import build_request
from .formats import FormatTarget, extract_json, schema_keys
from .results import FailureKind, Unparsed

if TYPE_CHECKING:
    from ..llm import iModel
    from .view import TurnView

__all__ = ["MAX_RETRIES_CAP", "ParseTarget", "parse", "parse_text"]

MAX_RETRIES_CAP = 5
"""The most reformat calls one parse makes, whatever ``max_retries`` says."""

HandleValidation = Literal["raise", "return_value", "return_none"]


class ParseTarget(Protocol):
    """What a parse builds: ``schema`` (``{"name", "schema"}`` or None) and ``build``."""

    @property
    def schema(self) -> dict[str, Any] | None: ...

    @property
    def name(self) -> str: ...

    def build(self, data: Any) -> Any:
        """Build the result from decoded JSON; raise ParseFailed when it does not fit."""
        ...


async def parse(turn: TurnView, command: Parse) -> Any:
    """Parse ``command.text`` into ``command.response_format``; records nothing.

    Without a response format the decoded JSON value is returned.

    Raises:
        TypeError: ``text`` is not a str, or the format has no JSON schema.
    """
    if not isinstance(command.text, str):
        raise TypeError(f"parse needs text (a str), got {type(command.text).__name__}")
    return await parse_text(
        turn,
        command.text,
        FormatTarget(command.response_format),
        max_retries=command.max_retries,
        handle_validation=command.handle_validation,
        parse_model=command.parse_model,
        fuzzy_match=command.fuzzy_match,
        similarity_threshold=command.similarity_threshold,
        handle_unmatched=command.handle_unmatched,
        fill_value=command.fill_value,
        fill_mapping=command.fill_mapping,
    )


async def parse_text(
    turn: TurnView,
    text: str,
    target: ParseTarget,
    *,
    max_retries: int = 3,
    handle_validation: HandleValidation = "return_value",
    parse_model: Any = None,
    fuzzy_match: bool = True,
    similarity_threshold: float = 0.85,
    handle_unmatched: HandleUnmatched = "force",
    fill_value: Any = None,
    fill_mapping: Mapping[str, Any] | None = None,
) -> Any:
    """Parse ``text`` into ``target``, asking the parse model to reformat on failure.

    Args:
        turn: the turn whose parse model (or ``parse_model``) reformats.
        text: the model text to parse.
        target: what to build (a [`FormatTarget`][pride.operations.chat.FormatTarget]).
        max_retries: reformat calls after the direct attempt (capped at 5).
        handle_validation: ``"raise"``, ``"return_value"`` or ``"return_none"``.
        parse_model: a model spec overriding the branch's parse model.
        fuzzy_match: match near-miss keys (Jaro-Winkler similarity).
        similarity_threshold: the least similarity for a fuzzy key match.
        handle_unmatched: what to do with keys that match no field.
        fill_value: the value for missing required keys.
        fill_mapping: values for specific missing keys.

    Returns:
        What ``target.build`` returned; after every attempt failed, an
        [`Unparsed`][pride.Unparsed] (``return_value``) or None (``return_none``).

    Raises:
        ParseFailed: every attempt failed and ``handle_validation="raise"``.
        ValueError: ``max_retries`` is negative or ``handle_validation`` unknown.
        ProviderError: a reformat call failed.
    """
    if handle_validation not in ("raise", "return_value", "return_none"):
        raise ValueError(f"unknown handle_validation {handle_validation!r}")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    retries = min(max_retries, MAX_RETRIES_CAP)
    body = target.schema["schema"] if target.schema is not None else None
    expected, required = schema_keys(body)

    def attempt(candidate: str) -> Any:
        try:
            data = extract_json(candidate)
        except ParseFailed as exc:
            raise ParseFailed(str(exc), "extraction") from None
        try:
            if expected and isinstance(data, dict):
                data = match_keys(
                    data,
                    expected,
                    required=required,
                    fuzzy=fuzzy_match,
                    threshold=similarity_threshold,
                    handle_unmatched=handle_unmatched,
                    fill_value=fill_value,
                    fill_mapping=fill_mapping,
                )
            return target.build(data)
        except ParseFailed as exc:
            raise ParseFailed(str(exc), "schema") from None

    candidate = text
    try:
        return attempt(candidate)
    except ParseFailed as exc:
        error = exc
    # Resolved once: a model given as a spec would otherwise be built anew
    # (with its own HTTP client and limiter) for every reformat call.
    model = turn.model(parse_model, parse=True) if retries else None
    for _ in range(retries):
        assert model is not None
        candidate = await _reformat(
            turn, candidate, body=body, target=target, error=error, model=model
        )
        try:
            return attempt(candidate)
        except ParseFailed as exc:
            error = exc
    kind: FailureKind = "extraction" if error.failure_kind == "extraction" else "schema"
    if handle_validation == "raise":
        tries = "the direct attempt" + (f" and {retries} reformat calls" if retries else "")
        raise ParseFailed(
            f"could not parse the reply into {target.name} after {tries}: {error}", kind
        ) from error
    if handle_validation == "return_none":
        return None
    return Unparsed(text, kind, str(error), target.name, attempts=1 + retries)


async def _reformat(
    turn: TurnView,
    text: str,
    *,
    body: dict[str, Any] | None,
    target: ParseTarget,
    error: ParseFailed,
    model: iModel,
) -> str:
    """One reformat call: the failed text, the schema and the error it gave."""
    prompt = Instruction(
        instruction=(
            f"Rewrite the text below as one JSON value matching the {target.name} schema. "
            f"The last attempt to read it failed with: {error}. "
            "Fix exactly that, keep the content, and answer with the JSON only."
        ),
        context={"schema": body if body is not None else "any JSON value", "text": text},
    )
    request = build_request(
        turn,
        model,
        prompt,
        response_format=target.schema,
        include_history=False,
        include_system=False,
    )
    response = await turn.call_model(model, request, stream_tokens=False)
    return response.text
