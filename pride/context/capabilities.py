"""Capability grants: what structured output a branch's model may emit, and observing it.

A grant is a class (attrs, dataclass or pydantic model) whose field names are
the granted keys. Granting does two things:

* with ``prompt=True`` the system prompt gets a block, between
  [`CAP_BEGIN`][pride.context.capabilities.CAP_BEGIN] and
  [`CAP_END`][pride.context.capabilities.CAP_END], telling the model it may emit a
  fenced ```json block whose top-level keys are granted keys, with the JSON
  schema of their values. Re-granting replaces a balanced block instead of
  stacking another; a prompt whose markers are unbalanced (a truncated block,
  or a user's own text containing a marker) is never cut, only appended to.
* every assistant message recorded afterwards is observed: each JSON object
  block in it (fenced blocks, or the whole reply when it is one object) with
  no granted key is ignored; one mixing granted and other keys gives a
  [`CapabilityViolation`][pride.CapabilityViolation]; a wholly granted one is validated key
  by key against the grant's field types and gives a
  [`StructuredOutput`][pride.StructuredOutput] (the validated values as JSON data) or an
  [`EmissionRejected`][pride.EmissionRejected] (with the validation error).

Observation only: nothing is executed or authorised here; a session policy
decides what, if anything, follows a signal.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

import attrs
import msgspec

from ..messages import CapabilityViolation, EmissionRejected, Signal, StructuredOutput, System

__all__ = [
    "CAP_BEGIN",
    "CAP_END",
    "MAX_BLOCKS_PER_REPLY",
    "CapabilityGrant",
    "apply_block",
    "extract_blocks",
    "observe",
    "strip_block",
]

log = logging.getLogger("pride.context")

CAP_BEGIN = "<!-- pride:capabilities -->"
"""Opens the capability block in a system prompt."""
CAP_END = "<!-- /pride:capabilities -->"
"""Closes the capability block in a system prompt."""

# The blanks after the tag are possessive (``*+``): the body's ``.*?`` matches
# them too, so a fence never closed made them backtrack, rescanning the rest of
# the reply once per blank (80 KB took 30 s of the event loop). Fewer blanks can
# never find a closing fence that all of them missed.
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*+\n?(.*?)```", re.DOTALL)

MAX_BLOCKS_PER_REPLY = 100
"""The most fenced blocks of one assistant reply that are observed; later ones are
not read (and a warning says how many there were)."""

Validator = Callable[[Any], Any]


@attrs.frozen(eq=False)
class CapabilityGrant:
    """A runtime grant: the operable class, its granted keys and their validators.

    Build one with [`from_operable`][pride.context.capabilities.CapabilityGrant.from_operable]
    (``branch.grant_capabilities`` does).

    Attributes:
        operable: the class the grant was made from.
        keys: the granted keys (the operable's field names, in field order).
        schema: ``{"properties": ..., "$defs": ...}``, the JSON schema shown
            to the model.
    """

    operable: type
    keys: tuple[str, ...]
    schema: Mapping[str, Any]
    _validators: Mapping[str, Validator] = attrs.field(repr=False)

    @classmethod
    def from_operable(cls, operable: type) -> CapabilityGrant:
        """The grant of ``operable``'s fields.

        Raises:
            TypeError: ``operable`` is not an attrs class, a dataclass or a
                pydantic model class, has no fields, or a field type has no
                JSON schema.
        """
        if not isinstance(operable, type):
            raise TypeError(
                "operable must be a class (attrs, dataclass or pydantic model), "
                f"got an instance of {type(operable).__name__}"
            )
        if _is_pydantic(operable):
            validators, schema = _pydantic_fields(operable)
        elif attrs.has(operable) or dataclasses.is_dataclass(operable):
            validators, schema = _msgspec_fields(operable)
        else:
            raise TypeError(
                "operable must be an attrs class, a dataclass or a pydantic model, "
                f"got {operable.__name__}"
            )
        if not validators:
            raise TypeError(f"operable {operable.__name__} has no fields to grant")
        return cls(operable, tuple(validators), schema, validators)

    def validate(self, block: Mapping[str, Any]) -> dict[str, Any]:
        """``block`` with each value validated against its field, as JSON data.

        Defaults of nested types are filled in (``{"claim": "x"}`` may come
        back as ``{"claim": "x", "confidence": 0.5}``).

        Raises:
            ValueError: a key is not granted, or a value does not validate;
                the message is ``"<key>: <the validator's error>"``.
        """
        out: dict[str, Any] = {}
        for key, value in block.items():
            validator = self._validators.get(key)
            if validator is None:
                raise ValueError(f"{key}: not a granted capability")
            try:
                out[key] = validator(value)
            except Exception as exc:
                raise ValueError(f"{key}: {exc}") from None
        return out

    def render_prompt(self) -> str:
        """The marked block appended to the system prompt."""
        names = ", ".join(self.keys)
        schema = json.dumps(self.schema, indent=2, ensure_ascii=False, default=str)
        return (
            f"{CAP_BEGIN}\n"
            "## Structured capabilities\n\n"
            "You may report structured results by including a fenced ```json block in your "
            "reply. Each top-level key of the block is a capability; include only those that "
            "fit the current step (several, one, or none), and keep writing your answer as "
            f"usual around the block. The granted keys are: {names}. A block using any other "
            "key is rejected, and so is a value that does not match this schema:\n\n"
            f"```json\n{schema}\n```\n"
            f"{CAP_END}"
        )


def _is_pydantic(cls: type) -> bool:
    return callable(getattr(cls, "model_validate", None)) and isinstance(
        getattr(cls, "model_fields", None), Mapping
    )


def _msgspec_fields(cls: type) -> tuple[dict[str, Validator], dict[str, Any]]:
    try:
        hints = typing.get_type_hints(cls)
        full = msgspec.json.schema(cls)
    except (NameError, TypeError, ValueError) as exc:
        raise TypeError(
            f"cannot derive a JSON schema from operable {cls.__name__}: {exc}"
        ) from None
    if attrs.has(cls):
        names = [field.name for field in attrs.fields(cls)]
    else:
        names = [field.name for field in dataclasses.fields(cls)]
    validators = {name: _msgspec_validator(hints.get(name, Any)) for name in names}
    defs = dict(full.get("$defs", {}))
    ref = full.get("$ref", "")
    body = defs.pop(ref.removeprefix("#/$defs/"), full) if ref else full
    schema: dict[str, Any] = {"properties": body.get("properties", {})}
    if defs:
        schema["$defs"] = defs
    return validators, schema


def _msgspec_validator(tp: Any) -> Validator:
    def validate(value: Any) -> Any:
        return msgspec.to_builtins(msgspec.convert(value, tp))

    return validate


def _pydantic_fields(cls: Any) -> tuple[dict[str, Validator], dict[str, Any]]:
    import pydantic

    validators: dict[str, Validator] = {}
    for name, info in cls.model_fields.items():
        adapter = pydantic.TypeAdapter(info.annotation)
        validators[name] = _pydantic_validator(adapter)
    full = cls.model_json_schema()
    schema: dict[str, Any] = {"properties": full.get("properties", {})}
    if "$defs" in full:
        schema["$defs"] = full["$defs"]
    return validators, schema


def _pydantic_validator(adapter: Any) -> Validator:
    def validate(value: Any) -> Any:
        return adapter.dump_python(adapter.validate_python(value), mode="json")

    return validate


# ------------------------------------------------------------- the prompt block


def _balanced_span(text: str) -> tuple[int, int] | None:
    """The span of the last marked block, or None when there is none or markers are unbalanced.

    Balanced: as many begin as end markers, pairing up in order (begin, end,
    begin, end, ...), never nested.
    """
    if text.count(CAP_BEGIN) != text.count(CAP_END) or CAP_BEGIN not in text:
        return None
    position = 0
    span = None
    while True:
        begin = text.find(CAP_BEGIN, position)
        if begin < 0:
            return span
        end = text.find(CAP_END, begin + len(CAP_BEGIN))
        following = text.find(CAP_BEGIN, begin + len(CAP_BEGIN))
        if end < 0 or (0 <= following < end) or text.find(CAP_END, position, begin) >= 0:
            return None
        position = end + len(CAP_END)
        span = (begin, position)


def strip_block(text: str) -> str:
    """``text`` without its (last) balanced capability block; unchanged if unbalanced or absent."""
    span = _balanced_span(text)
    if span is None:
        return text
    head, tail = text[: span[0]].rstrip(), text[span[1] :].lstrip()
    if head and tail:
        return f"{head}\n\n{tail}"
    return head or tail


def apply_block(system: System | None, block: str | None) -> System | None:
    """The system message with its balanced block removed and ``block`` (if any) appended.

    Returns a new [`System`][pride.System] (fresh id, other fields kept), the
    same object when nothing changes, a new system holding only the block
    when there was none, or None when removing the block leaves nothing.
    """
    text = system.system_message if system is not None else ""
    stripped = strip_block(text)
    if block is not None:
        stripped = f"{stripped.rstrip()}\n\n{block}" if stripped.strip() else block
    if system is not None and stripped == text:
        return system
    if not stripped:
        return None
    if system is None:
        return System(system_message=stripped)
    return type(system)(**{**_init_fields(system), "system_message": stripped})


def _init_fields(system: System) -> dict[str, Any]:
    """The init fields of ``system`` except its identity (a replacement gets a fresh id)."""
    return {
        field.alias: getattr(system, field.name)
        for field in attrs.fields(type(system))
        if field.init and field.name not in ("id", "created_at")
    }


# ------------------------------------------------------------------ observation


def extract_blocks(text: str) -> list[dict[str, Any]]:
    """The JSON objects in ``text``: every fenced block that parses to one (of the first
    `MAX_BLOCKS_PER_REPLY`), else the whole text.

    A reply is model output: each block observed becomes a signal for the
    observer, and a reply may hold hundreds of thousands of small blocks.
    """
    blocks: list[dict[str, Any]] = []
    fenced = [
        match.group(1)
        for match in itertools.islice(_FENCE.finditer(text), MAX_BLOCKS_PER_REPLY + 1)
    ]
    if len(fenced) > MAX_BLOCKS_PER_REPLY:
        del fenced[MAX_BLOCKS_PER_REPLY:]
        log.warning(
            "an assistant reply holds more than %d fenced blocks (MAX_BLOCKS_PER_REPLY); "
            "the later ones are not observed",
            MAX_BLOCKS_PER_REPLY,
        )
    candidates = fenced if fenced else ([text] if text.lstrip().startswith("{") else [])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # not JSON, or nested past the reader's depth
            continue
        if isinstance(value, dict):
            blocks.append(value)
    return blocks


def observe(
    grant: CapabilityGrant,
    text: str,
    *,
    branch_id: UUID | None = None,
    branch_name: str | None = None,
    turn_id: UUID | None = None,
) -> list[Signal]:
    """The signals one assistant reply gives under ``grant``, in block order.

    Blocks with no granted key give nothing; mixed blocks a
    CapabilityViolation; wholly granted blocks a StructuredOutput or an
    EmissionRejected.
    """
    signals: list[Signal] = []
    allowed = grant.keys
    for block in extract_blocks(text):
        granted = [key for key in block if key in allowed]
        if not granted:
            continue
        offending = tuple(key for key in block if key not in allowed)
        if offending:
            signals.append(
                CapabilityViolation(
                    branch_id=branch_id,
                    branch_name=branch_name,
                    offending=offending,
                    allowed=allowed,
                    block=block,
                    turn_id=turn_id,
                )
            )
            continue
        try:
            data = grant.validate(block)
        except ValueError as exc:
            signals.append(
                EmissionRejected(
                    branch_id=branch_id,
                    branch_name=branch_name,
                    error=str(exc),
                    block=block,
                    turn_id=turn_id,
                )
            )
            continue
        signals.append(
            StructuredOutput(
                branch_id=branch_id, branch_name=branch_name, data=data, turn_id=turn_id
            )
        )
    return signals
