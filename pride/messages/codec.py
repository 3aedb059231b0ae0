"""One cattrs converter for everything that travels: messages, commands, signals.

Public functions: [`unstructure`][pride.messages.unstructure] (object to plain data),
[`structure`][pride.messages.structure]
(plain data to object), [`to_json`][pride.messages.to_json] and
[`from_json`][pride.messages.from_json].

Wire form: a JSON object whose ``"type"`` key names the class (``"Chat"``)
followed by the class's fields. Structuring as a base class (``RoledMessage``,
``Command``, ``Signal``) dispatches on that tag; structuring as a concrete
class checks it when present. UUIDs are strings; tuples are lists.

Validation is strict: a string field does not accept ``5``, an int field does
not accept ``True`` or ``"5"``; numbers are finite and integers fit in 64
bits, and text is read and written as strict JSON (`_json`); the hooks that
check each value are in `_hooks`. Any problem raises one
[`InvalidMessage`][pride.InvalidMessage] naming every offending path, e.g.
``Chat.instruction: expected str, got int`` (of one list or object, the first
`MAX_ITEM_PROBLEMS` bad items, then a line saying the rest was not checked:
hostile data of all bad items is refused at once, not item by item to its end);
a half-built object is never returned and no raw cattrs or ``KeyError`` escapes.
"""

from __future__ import annotations

import functools
import math
import typing
from collections.abc import Callable, Mapping
from operator import attrgetter
from typing import Any, TypeVar
from uuid import UUID

import attrs
import cattrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

from . import commands, conversation, reasoning, signals
from ._errors import InvalidMessage
from ._hooks import (
    MAX_ITEM_PROBLEMS,
    OPTIONS_MODEL,
    Problem,
    call_kwargs,
    check_json,
    is_homogeneous_tuple,
    is_marker,
    is_str_mapping,
    mapping_hook,
    structure_bool,
    structure_budget,
    structure_float,
    structure_int,
    structure_model_spec,
    structure_response_format,
    structure_str,
    structure_tool_selection,
    structure_uuid,
    tuple_hook,
    type_name,
    unstructure_model_spec,
    unstructure_response_format,
)
from ._json import (
    ENCODER,
    INT_MAX,
    INT_MIN,
    MAX_DEPTH,
    TOO_DEEP,
    dump_json,
    is_plain,
    is_scalar_text,
    parse_json,
    scrub,
)
from .budget import Budget

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEM_PROBLEMS",
    "TAG",
    "dump_json",
    "from_json",
    "id_text",
    "is_scalar_text",
    "parse_json",
    "registered_types",
    "row_json",
    "scrub",
    "structure",
    "to_json",
    "unstructure",
]

T = TypeVar("T")

TAG = "type"

_MESSAGE_TYPES: tuple[type, ...] = (
    conversation.System,
    conversation.Instruction,
    conversation.AssistantResponse,
    conversation.ActionRequest,
    conversation.ActionResponse,
    reasoning.Reasoning,
)
_COMMAND_TYPES: tuple[type, ...] = (
    commands.Chat,
    commands.ChatAndRecord,
    commands.Communicate,
    commands.Operate,
    commands.Parse,
    commands.Interpret,
    commands.Act,
    commands.ReAct,
    commands.ReActStream,
    commands.Run,
    commands.Call,
    commands.Resume,
    commands.Attach,
    commands.Detach,
    commands.Stop,
)
_SIGNAL_TYPES: tuple[type, ...] = (
    signals.RunStart,
    signals.RunEnd,
    signals.RunFailed,
    signals.RunSuspended,
    signals.ApprovalRequested,
    signals.MessageAdded,
    signals.StructuredOutput,
    signals.CapabilityViolation,
    signals.EmissionRejected,
    signals.ToolProgress,
    signals.BranchStarted,
    signals.BranchStopped,
    signals.BranchRestarted,
    signals.BranchActivated,
    signals.BranchPassivated,
    signals.SessionFailed,
    signals.NodeStarted,
    signals.NodeCompleted,
    signals.NodeFailed,
    signals.NodeSkipped,
    signals.NodeCancelled,
)
_DECISION_TYPES: tuple[type, ...] = (commands.Approve, commands.Deny)
# Stream items of their own kind (beside text chunks, messages and signals).
_STREAM_TYPES: tuple[type, ...] = (reasoning.ReasoningDelta,)
_TAGGED: dict[str, type] = {
    cls.__name__: cls
    for cls in _MESSAGE_TYPES + _COMMAND_TYPES + _SIGNAL_TYPES + _DECISION_TYPES + _STREAM_TYPES
}
# Fields renamed by a signal schema version: (old name, new name, the last
# version that used the old name). Data of that version or older (or without
# a version) is read under the new name, so stored or sent signals of an
# older process still decode.
_RENAMED: dict[type, tuple[tuple[str, str, int], ...]] = {
    signals.RunEnd: (("num_turns", "model_calls", 1),),
    signals.RunFailed: (("num_turns", "model_calls", 1),),
}
_BASES: tuple[type, ...] = (
    conversation.RoledMessage,
    commands.Command,
    commands.WorkCommand,
    commands.PriorityCommand,
    signals.Signal,
    commands.Decision,
    signals.NodeSignal,
)


def registered_types() -> tuple[type, ...]:
    """Every concrete type the codec tags, in a stable order."""
    return tuple(_TAGGED.values())


# ------------------------------------------------------------------ converter


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True)
    converter.register_structure_hook(str, structure_str)
    converter.register_structure_hook(int, structure_int)
    converter.register_structure_hook(float, structure_float)
    converter.register_structure_hook(bool, structure_bool)
    converter.register_structure_hook(UUID, structure_uuid)
    converter.register_unstructure_hook(UUID, id_text)
    converter.register_structure_hook_func(
        is_marker("pride:json"), lambda value, _: check_json(value)
    )
    converter.register_unstructure_hook_func(is_marker("pride:json"), check_json)
    converter.register_structure_hook_func(is_marker("pride:model"), structure_model_spec)
    converter.register_unstructure_hook_func(is_marker("pride:model"), unstructure_model_spec)
    converter.register_structure_hook_func(
        is_marker("pride:response_format"), structure_response_format
    )
    converter.register_unstructure_hook_func(
        is_marker("pride:response_format"), unstructure_response_format
    )
    # Live references stay in process: they serialise as null and come back as None.
    converter.register_structure_hook_func(is_marker("pride:live"), lambda value, _: None)
    converter.register_unstructure_hook_func(is_marker("pride:live"), lambda value: None)
    converter.register_structure_hook(commands.ToolSelection, structure_tool_selection)
    converter.register_structure_hook(Budget, structure_budget)
    converter.register_structure_hook_factory(is_homogeneous_tuple, tuple_hook(converter))
    converter.register_structure_hook_factory(is_str_mapping, mapping_hook(converter))
    converter.register_structure_hook_func(
        lambda tp: tp is typing.Any, lambda value, _: check_json(value)
    )

    # Bases first: the generated functions of the concrete classes look up the
    # hooks of their field types (``MessageAdded.message: RoledMessage``) eagerly.
    for base in _BASES:
        converter.register_unstructure_hook(base, lambda obj: converter.unstructure(obj, type(obj)))
        converter.register_structure_hook(base, _structure_by_tag(converter, base))
    for cls in _TAGGED.values():
        _register_tagged(converter, cls)
    return converter


def _register_tagged(converter: cattrs.Converter, cls: type) -> None:
    name = cls.__name__
    base_unstructure: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter)
    if cls is commands.Call:

        def build(data: Mapping[str, Any], _: Any) -> commands.Call:
            raw = converter.structure(data, _CallWire)
            if "budget" in raw.kwargs:  # what Call("op", budget=...) means in process
                raise Problem(
                    "'budget' is the Call's own field (it bounds the turn), not an argument "
                    "of the operation: give it beside 'kwargs'",
                    "kwargs.budget",
                )
            kwargs = call_kwargs(raw.kwargs, "kwargs")
            return commands.Call(raw.operation, budget=raw.budget, **kwargs)

        base_structure: Callable[[Any, Any], Any] = build
    else:
        base_structure = make_dict_structure_fn(cls, converter)

    def unstructure_tagged(obj: Any) -> dict[str, Any]:
        return {TAG: name, **base_unstructure(obj)}

    hints = typing.get_type_hints(cls, include_extras=True) if attrs.has(cls) else {}
    model_fields = tuple(
        field.name for field in attrs.fields(cls) if is_marker("pride:model")(hints.get(field.name))
    )

    # Subclasses (RunSuspended is a RunFailed) inherit their base's renames.
    renamed = next((_RENAMED[base] for base in cls.__mro__ if base in _RENAMED), ())

    def structure_tagged(data: Any, _: Any) -> Any:
        if not isinstance(data, Mapping):
            raise Problem(f"expected an object, got {type_name(data)}")
        tag = data.get(TAG, name)
        if tag != name:
            raise Problem(f"type tag {tag!r} does not match {name}")
        fields = {key: value for key, value in data.items() if key != TAG}
        options = fields.get("request_options")
        if isinstance(options, Mapping) and "model" in options:
            raise Problem(OPTIONS_MODEL, "request_options.model")
        for old_name, new_name, last in renamed:
            if old_name in fields:
                _rename(fields, old_name, new_name, last)
        obj = base_structure(fields, cls)
        for field in model_fields:  # say where a model name came from, for its errors
            value = getattr(obj, field)
            if isinstance(value, commands.ModelName):
                value.field = f"{name}.{field}"
        return obj

    converter.register_unstructure_hook(cls, unstructure_tagged)
    converter.register_structure_hook(cls, structure_tagged)


def _rename(fields: dict[str, Any], old_name: str, new_name: str, last: int) -> None:
    """Read ``old_name`` as ``new_name`` in data of schema version ``last`` or older."""
    version = fields.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > last:
        raise Problem(
            f"{old_name!r} was renamed {new_name!r} in schema version {last + 1} "
            f"(this data says version {version})",
            old_name,
        )
    if new_name in fields:
        raise Problem(f"both {old_name!r} and its new name {new_name!r} are given", old_name)
    fields[new_name] = fields.pop(old_name)


@attrs.frozen
class _CallWire:
    operation: str
    kwargs: Mapping[str, commands.JsonValue] = attrs.field(factory=dict)
    budget: Budget | None = None


def _structure_by_tag(converter: cattrs.Converter, base: type) -> Callable[[Any, Any], Any]:
    def structure(data: Any, _: Any) -> Any:
        if not isinstance(data, Mapping):
            raise Problem(f"expected an object, got {type_name(data)}")
        if TAG not in data:
            raise Problem(f"missing type tag {TAG!r}")
        tag = data[TAG]
        cls = _TAGGED.get(tag) if isinstance(tag, str) else None
        if cls is None or not issubclass(cls, base):
            raise Problem(f"unknown type tag {tag!r} for {base.__name__}")
        return converter.structure(data, cls)

    return structure


@functools.cache
def _converter() -> cattrs.Converter:
    # Built on first use: generating the hooks for every wire type takes about
    # a tenth of a second, which a program that never serialises should not pay
    # at import.
    return _make_converter()


# ------------------------------------------------------------------- errors

# Data nested beyond the interpreter's recursion limit cannot be walked (by
# json or by the converter): it is refused like any other bad input.
_TOO_DEEP = TOO_DEEP


def _problems(exc: BaseException, path: str) -> list[tuple[str, str]]:
    if isinstance(exc, ForbiddenExtraKeysError):
        return [(path, f"unknown field(s) {', '.join(sorted(exc.extra_fields))}")]
    if isinstance(exc, ClassValidationError | IterableValidationError | BaseExceptionGroup):
        found: list[tuple[str, str]] = []
        for sub in exc.exceptions:
            sub_path = path
            for note in getattr(sub, "__notes__", ()):
                if hasattr(note, "name"):
                    sub_path = f"{path}.{note.name}"
                elif hasattr(note, "index"):
                    sub_path = f"{path}[{note.index!r}]"
            found.extend(_problems(sub, sub_path))
        return found
    if isinstance(exc, KeyError):
        return [(path, "required field missing")]
    if isinstance(exc, RecursionError):
        return [(path, _TOO_DEEP)]
    if isinstance(exc, Problem):
        return [(f"{path}.{exc.where}" if exc.where else path, str(exc))]
    return [(path, f"{type(exc).__name__}: {exc}")]


def _root_name(data: Any, tp: Any) -> str:
    if tp in _TAGGED.values():
        return str(tp.__name__)
    if isinstance(data, Mapping) and isinstance(data.get(TAG), str) and data[TAG] in _TAGGED:
        return str(data[TAG])
    return getattr(tp, "__name__", None) or str(tp)


# -------------------------------------------------------------------- public


def unstructure(obj: Any) -> Any:
    """Turn a message, command or signal (or a container of them) into plain data.

    Raises:
        InvalidMessage: a field holds something with no wire form (a class as
            ``response_format``, a non-JSON value).
    """
    try:
        return _converter().unstructure(obj)
    except Problem as exc:
        raise InvalidMessage([(type(obj).__name__, str(exc))]) from None
    except RecursionError:
        raise InvalidMessage([(type(obj).__name__, _TOO_DEEP)]) from None


def structure(data: Any, tp: type[T] | Any) -> T:
    """Build an object of type ``tp`` from plain data, validating strictly.

    ``tp`` may be a concrete class (``Chat``), a tagged base (``RoledMessage``,
    ``Command``, ``Signal``) or a container of them (``list[RoledMessage]``).

    Raises:
        InvalidMessage: naming every offending path (at most `MAX_ITEM_PROBLEMS`
            items of one list or object).
    """
    try:
        return typing.cast(T, _converter().structure(data, tp))
    except (
        Problem,
        cattrs.BaseValidationError,
        KeyError,
        TypeError,
        ValueError,
        RecursionError,
    ) as exc:
        problems = _problems(exc, _root_name(data, tp))
        raise InvalidMessage(problems) from None


def to_json(obj: Any) -> str:
    """Serialise to compact strict JSON text (see [`unstructure`][pride.messages.unstructure]).

    Raises:
        InvalidMessage: as [`unstructure`][pride.messages.unstructure], or a value strict JSON
            cannot
            carry (a non-finite float, an integer outside 64 bits, a lone
            surrogate), named by its path (``Chat.context.k``).
    """
    text = _message_text(obj)
    if text is not None:
        return text
    data = unstructure(obj)
    try:
        return dump_json(data)
    except InvalidMessage as exc:
        raise InvalidMessage(
            [(type(obj).__name__ + path.removeprefix("$"), reason) for path, reason in exc.problems]
        ) from None


def row_json(obj: Any, tp: Any) -> tuple[str, InvalidMessage | None]:
    """The JSON text a store keeps for ``obj`` (read back as ``tp``), and why it is a
    replacement, if it is.

    The wire form (`to_json`), else, where strict JSON cannot carry a value (a
    lone surrogate in a text), the documented replacement (U+FFFD, `dump_json`
    with ``replace``), given only once it was seen to read back as ``tp``: in a
    field with fixed values (an image's ``detail``) the replacement is no value
    at all. A store writes its rows one after another through here, without
    handing each one back and forth.

    Raises:
        InvalidMessage: ``obj`` has no wire form, or its replacement would not
            read back (the path names the field).
    """
    try:
        return to_json(obj), None
    except InvalidMessage as exc:
        text = dump_json(unstructure(obj), replace=True)  # raises: no wire form
        from_json(text, tp)  # raises: the replacement is no value there
        return text, exc


def id_text(identity: Any) -> str:
    """``str(identity)``, the wire form of a `UUID`; msgspec makes it (``UUID.__str__``
    formats in Python: 19.5k instructions against 3.6k, callgrind, and every stored
    message needs its id as text twice, in its row and its id column: 6% of a stored
    turn, benchmarks.instructions' "durable turn, store")."""
    if type(identity) is not UUID:
        return str(identity)
    return ENCODER.encode(identity)[1:-1].decode("ascii")


# ------------------------------------------------------- a message's own text


def _fields(cls: type) -> tuple[str, ...]:
    # What both the converter (cattrs skips init=False attributes) and msgspec (it
    # skips names with a leading underscore) write of an attrs class.
    return tuple(
        field.name for field in attrs.fields(cls) if field.init and not field.name.startswith("_")
    )


# A conversation message of these classes is written by msgspec from the message
# itself once every field's value is checked, skipping the converter's unstructuring
# (a dict per message built by cattrs' generated code): the same row, key order
# apart (tests/messages/test_message_text.py compares the two for every class).
# Kept as a fast path beside the general one because it is measured (callgrind):
# an Instruction costs 15.3k instructions this way against 53.3k, an
# AssistantResponse 25.0k against 55.8k, together 13% of a stored turn (531.9k,
# benchmarks.instructions' "durable turn, store, journal off"), which records one of each.
_MESSAGES: dict[type, tuple[bytes, Callable[[Any], tuple[Any, ...]]]] = {
    # Every field's value in one C call (attrgetter of several names returns a tuple).
    cls: (f'{{"{TAG}":"{cls.__name__}",'.encode(), attrgetter(*_fields(cls)))
    for cls in (
        conversation.System,
        conversation.Instruction,
        conversation.AssistantResponse,
        conversation.ActionRequest,
        conversation.ActionResponse,
    )
}
# Field values msgspec writes as the converter does, with no check (text with a lone
# surrogate makes msgspec raise; `_message_text` then steps aside).
_AS_IS_FIELD = frozenset({str, type(None), bool, UUID})


def _message_text(message: Any) -> str | None:
    """The JSON text of a conversation message, or None to go the converter's way.

    None unless ``message`` is one of the five message classes (exactly: a
    subclass may add fields or hooks) and every field holds what strict JSON
    carries as it is (a `UUID` as well: both ways write it as text).
    """
    known = _MESSAGES.get(type(message))
    if known is None:
        return None
    prefix, values = known
    for value in values(message):
        kind = type(value)
        if kind in _AS_IS_FIELD:
            continue
        if kind is float:
            if not math.isfinite(value):
                return None
        elif kind is tuple or kind is list or kind is dict:
            if value and not is_plain(value, MAX_DEPTH - 2):
                return None
        elif kind is not int or not INT_MIN <= value <= INT_MAX:
            return None
    try:
        body = ENCODER.encode(message)
    except UnicodeEncodeError:  # a lone surrogate (in a field no converter scrubs)
        return None
    return (prefix + body[1:]).decode("utf-8")


def from_json(text: str | bytes, tp: type[T] | Any) -> T:
    """Parse strict JSON text (`parse_json`) and [`structure`][pride.messages.structure] it as
    ``tp``.

    Raises:
        InvalidMessage: the text is not strict JSON (path ``$``) or the data is invalid.
    """
    return typing.cast(T, structure(parse_json(text), tp))
