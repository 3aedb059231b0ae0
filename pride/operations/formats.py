"""Response formats: their JSON schema, and parsing model text into them.

A response format is a JSON schema dict, or a class: attrs, dataclass,
TypedDict or msgspec Struct (schemas by msgspec), or a pydantic model when
pydantic is installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import ParseFailed

if TYPE_CHECKING:
    from ..actors.branch import Branch
    from ..actors.turn import TurnScope

__all__ = ["extract_json", "format_schema", "parse_response"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def format_schema(response_format: Any) -> dict[str, Any] | None:
    """``{"name", "schema"}`` for a response format, or None for no format."""
    if response_format is None:
        return None
    if isinstance(response_format, Mapping):
        if "schema" in response_format and "name" in response_format:
            return {"name": str(response_format["name"]), "schema": dict(response_format["schema"])}
        return {
            "name": str(response_format.get("title", "response")),
            "schema": dict(response_format),
        }
    name = getattr(response_format, "__name__", "response")
    schema_fn = getattr(response_format, "model_json_schema", None)
    if callable(schema_fn):  # pydantic
        return {"name": name, "schema": schema_fn()}
    try:
        schema = msgspec.json.schema(response_format)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot derive a JSON schema from response_format {name!r}: {exc}"
        ) from None
    return {"name": name, "schema": _inline(schema)}


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve a top-level ``$ref`` into ``$defs`` so providers see an object schema."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        defs = schema.get("$defs", {})
        target = dict(defs.get(ref.removeprefix("#/$defs/"), {}))
        if len(defs) > 1:
            target["$defs"] = defs
        return target
    return schema


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: a fenced block, the whole text, or the first object.

    Raises:
        ParseFailed: no JSON value could be found.
    """
    candidates = [match.group(1).strip() for match in _FENCE.finditer(text)]
    candidates.append(text.strip())
    start = text.find("{")
    end = text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ParseFailed("no JSON object found in the reply")


def convert(data: Any, response_format: Any) -> Any:
    """Validate and build ``response_format`` from decoded JSON ``data``.

    Raises:
        ParseFailed: the data does not fit the format.
    """
    if isinstance(response_format, Mapping):
        if not isinstance(data, dict):
            raise ParseFailed(f"expected a JSON object, got {type(data).__name__}")
        return data
    validate = getattr(response_format, "model_validate", None)
    if callable(validate):  # pydantic
        try:
            return validate(data)
        except Exception as exc:
            raise ParseFailed(str(exc)) from None
    try:
        return msgspec.convert(data, response_format, strict=False)
    except (msgspec.ValidationError, TypeError) as exc:
        raise ParseFailed(str(exc)) from None


async def parse_response(
    branch: Branch,
    scope: TurnScope | None,
    text: str,
    response_format: Any,
    *,
    max_retries: int = 3,
    handle_validation: str = "return_value",
    parse_model: Any = None,
) -> Any:
    """Parse ``text`` into ``response_format``; ask the parse model to reformat on failure.

    Each reformat request names the previous error, so retries differ. After
    ``max_retries`` failures: ``raise`` raises ParseFailed, ``return_value``
    returns the text, ``return_none`` returns None.
    """
    from ..messages import Instruction
    from ._model_call import call_model, resolve_model
    from ._request import build_request

    attempt_text = text
    error: ParseFailed | None = None
    for attempt in range(max_retries + 1):
        try:
            return convert(extract_json(attempt_text), response_format)
        except ParseFailed as exc:
            error = exc
        if attempt == max_retries:
            break
        schema = format_schema(response_format)
        model = resolve_model(branch, parse_model, scope, parse=True)
        prompt = Instruction(
            instruction=(
                "Reformat the text below as one JSON object matching the schema. "
                f"The previous attempt failed: {error}. Answer with JSON only."
            ),
            context={"text": attempt_text, "schema": schema["schema"] if schema else None},
        )
        request = build_request(
            branch, model, scope, prompt, response_format=schema, include_history=False
        )
        attempt_text = (await call_model(branch, scope, model, request, stream_tokens=False)).text
    if handle_validation == "raise":
        raise ParseFailed(f"could not parse the reply into {_name(response_format)}: {error}")
    if handle_validation == "return_none":
        return None
    return text


def _name(response_format: Any) -> str:
    return getattr(response_format, "__name__", None) or "the response format"
