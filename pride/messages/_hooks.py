"""The codec's strict hooks: scalars, JSON data, model names, budgets and containers.

Each hook raises `Problem` naming what is wrong (and, for a nested value,
where below the current path); [`pride.messages.codec`][pride.messages.codec]
turns problems into one [`InvalidMessage`][pride.InvalidMessage] naming every
path. Decoded data is never trusted with a model configuration: a model field
holds a name only ([`ModelName`][pride.messages.commands.ModelName]), which
the branch resolves among its own models.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

import cattrs
from cattrs.errors import AttributeValidationNote, IterableValidationError, IterableValidationNote

from . import commands
from ._json import JsonPath, json_path, number_problem
from .budget import BUDGET_FIELDS, Budget, limit_problem

__all__ = [
    "MAX_ITEM_PROBLEMS",
    "OPTIONS_MODEL",
    "Problem",
    "call_kwargs",
    "check_json",
    "is_homogeneous_tuple",
    "is_marker",
    "is_str_mapping",
    "mapping_hook",
    "structure_bool",
    "structure_budget",
    "structure_float",
    "structure_int",
    "structure_model_spec",
    "structure_response_format",
    "structure_str",
    "structure_tool_selection",
    "structure_uuid",
    "tuple_hook",
    "type_name",
    "unstructure_model_spec",
    "unstructure_response_format",
]


MAX_ITEM_PROBLEMS = 10
"""How many bad items of one list or object are named before the rest is left
unchecked. Each refused item keeps an exception with its notes until the error is
built (60 µs and about 80 bytes of error text each): a request of 16 MB, every item
bad, would hold the event loop for minutes; ten say what is wrong as well."""


class Problem(Exception):
    """A validation failure at the current path (or at ``where`` below it); its
    text is the reason."""

    def __init__(self, reason: str, where: str = "") -> None:
        super().__init__(reason)
        self.where = where


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ------------------------------------------------------------ strict scalars


def structure_str(value: Any, _: Any) -> str:
    if not isinstance(value, str):
        raise Problem(f"expected str, got {type_name(value)}")
    return value


def structure_int(value: Any, _: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Problem(f"expected int, got {type_name(value)}")
    if (problem := number_problem(value)) is not None:
        raise Problem(problem)
    return value


def structure_float(value: Any, _: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Problem(f"expected float, got {type_name(value)}")
    if (problem := number_problem(value)) is not None:
        raise Problem(problem)
    return float(value)


def structure_bool(value: Any, _: Any) -> bool:
    if not isinstance(value, bool):
        raise Problem(f"expected bool, got {type_name(value)}")
    return value


def structure_uuid(value: Any, _: Any) -> UUID:
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise Problem(f"expected UUID string, got {type_name(value)}")
    try:
        return UUID(value)
    except ValueError:
        raise Problem(f"invalid UUID {value!r}") from None


def check_json(value: Any, path: JsonPath = "") -> Any:
    """Return ``value`` if it is plain JSON data; raise naming where it is not."""
    # ``path`` is formatted only for a refusal (`json_path` says why).
    if value is None or isinstance(value, str | bool):
        return value
    if isinstance(value, int | float):
        if (problem := number_problem(value)) is not None:
            where = json_path(path)
            raise Problem(f"{where}: {problem}" if where else problem)
        return value
    if isinstance(value, list | tuple):
        return [check_json(item, (path, index)) for index, item in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise Problem(f"{json_path(path) or 'object'} has a non-string key {key!r}")
            out[key] = check_json(item, (path, key))
        return out
    where = json_path(path)
    where = f"{where}: " if where else ""
    raise Problem(f"{where}expected JSON data, got {type_name(value)}")


def is_marker(marker: str) -> Callable[[Any], bool]:
    def predicate(tp: Any) -> bool:
        return typing.get_origin(tp) is typing.Annotated and marker in tp.__metadata__

    return predicate


NOT_OFFERED = (
    "a model configuration cannot come from outside (it could name its own base_url, "
    "provider or key); give the name of a model the application made available"
)
# request_options go into the provider's request body, where "model" would pick
# a model the application never offered, on its endpoint and with its key.
OPTIONS_MODEL = (
    "a decoded command may not choose the model through request_options; name one of "
    "the models the application made available in chat_model"
)
# Keys of a model configuration: an object holding one, anywhere in a decoded
# Call's arguments, is a model configuration in disguise.
CONFIG_KEYS = frozenset({"base_url", "api_key", "provider", "key_env"})


def structure_model_spec(value: Any, _: Any) -> Any:
    # Decoded data is never trusted with a model configuration: a name only
    # (commands.ModelName), which the branch resolves among its own models.
    if value is None:
        return None
    if isinstance(value, str):
        return commands.ModelName(value)
    if isinstance(value, Mapping):
        raise Problem(NOT_OFFERED)
    raise Problem(f"expected a model name (str) or null, got {type_name(value)}")


def call_kwargs(value: Any, path: JsonPath) -> Any:
    """A decoded Call's arguments, checked as JSON and stripped of model power:
    a model argument (``chat_model``, ...) at any depth becomes a
    [`ModelName`][pride.messages.commands.ModelName], and a model configuration
    anywhere is refused (an operation may pass its arguments on to a verb)."""
    # ``path`` is formatted only for a refusal, and a model name's field when
    # asked: formatted for each, one long key over many names made each name
    # hold its own copy of it (quadratic time and memory).
    if isinstance(value, Mapping):
        if CONFIG_KEYS.intersection(value):
            raise Problem(NOT_OFFERED, json_path(path))
        out = {}
        for key, item in value.items():
            where = (path, key)
            if key == "request_options" and isinstance(item, Mapping) and "model" in item:
                raise Problem(OPTIONS_MODEL, json_path((where, "model")))
            if key in commands.MODEL_FIELDS and item is not None:
                if not isinstance(item, str):
                    raise Problem(NOT_OFFERED, json_path(where))
                out[key] = commands.ModelName(item, functools.partial(_call_field, where))
            else:
                out[key] = call_kwargs(item, where)
        return out
    if isinstance(value, list | tuple):
        return [call_kwargs(item, (path, index)) for index, item in enumerate(value)]
    return value


def _call_field(path: JsonPath) -> str:
    return f"Call.{json_path(path)}"


def unstructure_model_spec(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return check_json(value)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):  # an iModel: its projection never holds a key
        return check_json(to_dict())
    raise Problem(f"a {type_name(value)} is not a model spec")


def structure_response_format(value: Any, _: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(check_json(value))
    raise Problem(f"expected a JSON schema object or null, got {type_name(value)}")


def unstructure_response_format(value: Any) -> Any:
    if value is None or isinstance(value, Mapping):
        return check_json(value)
    raise Problem(
        f"response_format {getattr(value, '__name__', value)!r} is a class; only a JSON "
        "schema dict can be serialised"
    )


def structure_budget(value: Any, _: Any) -> Budget:
    # Checked field by field here rather than by Budget's own validators, so a
    # bad limit is named by its path (``Chat.budget.max_tool_calls``).
    if not isinstance(value, Mapping):
        raise Problem(f"expected a budget object, got {type_name(value)}")
    unknown = sorted(str(key) for key in value if key not in BUDGET_FIELDS)
    if unknown:
        raise Problem(f"unknown field(s) {', '.join(unknown)}")
    for name in BUDGET_FIELDS:
        problem = limit_problem(name, value.get(name))
        if problem is None:
            problem = number_problem(value.get(name))
        if problem is not None:
            raise Problem(problem, name)
    return Budget(**{name: value.get(name) for name in BUDGET_FIELDS})


def structure_tool_selection(value: Any, _: Any) -> commands.ToolSelection:
    if isinstance(value, bool):
        return value
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise Problem(f"tool name [{index}] should be str, got {type_name(item)}")
        return tuple(value)
    raise Problem(f"expected bool or a list of tool names, got {type_name(value)}")


def is_homogeneous_tuple(tp: Any) -> bool:
    args = typing.get_args(tp)
    return typing.get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis


def is_str_mapping(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin in (Mapping, dict) and typing.get_args(tp)[:1] == (str,)


def tuple_hook(converter: cattrs.Converter) -> Callable[[Any], Callable[[Any, Any], Any]]:
    """Lists (or tuples) only: cattrs would happily iterate a string into characters."""

    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        item_type = typing.get_args(tp)[0]

        def structure_tuple(value: Any, _: Any) -> tuple[Any, ...]:
            if not isinstance(value, list | tuple):
                raise Problem(f"expected a list, got {type_name(value)}")
            items: list[Any] = []
            errors: list[Exception] = []
            for index, item in enumerate(value):
                try:
                    items.append(converter.structure(item, item_type))
                except Exception as exc:
                    exc.add_note(IterableValidationNote(f"@ index {index}", index, item_type))
                    if _enough(errors, exc, more=index + 1 < len(value)):
                        break
            if errors:
                raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
            return tuple(items)

        return structure_tuple

    return factory


def mapping_hook(converter: cattrs.Converter) -> Callable[[Any], Callable[[Any, Any], Any]]:
    """JSON objects only, with string keys; values structured by their declared type."""

    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        value_type = typing.get_args(tp)[1]

        def structure_mapping(value: Any, _: Any) -> dict[str, Any]:
            if not isinstance(value, Mapping):
                raise Problem(f"expected an object, got {type_name(value)}")
            out: dict[str, Any] = {}
            errors: list[Exception] = []
            for index, (key, item) in enumerate(value.items()):
                if not isinstance(key, str):
                    raise Problem(f"expected string keys, got {type_name(key)}")
                try:
                    out[key] = converter.structure(item, value_type)
                except Exception as exc:
                    exc.add_note(AttributeValidationNote(f"@ key {key!r}", key, value_type))
                    if _enough(errors, exc, more=index + 1 < len(value)):
                        break
            if errors:
                raise IterableValidationError(f"While structuring {tp!r}", errors, tp)
            return out

        return structure_mapping

    return factory


def _enough(errors: list[Exception], exc: Exception, *, more: bool) -> bool:
    """Add ``exc`` to a container's ``errors``; True once `MAX_ITEM_PROBLEMS` are
    there, with (when ``more`` items follow) a last problem saying they were not
    checked, named by the container's own path."""
    errors.append(exc)
    if len(errors) < MAX_ITEM_PROBLEMS:
        return False
    if more:
        errors.append(
            Problem(
                f"{MAX_ITEM_PROBLEMS} items were refused; the items after the "
                f"{MAX_ITEM_PROBLEMS}th were not checked (fix these first)"
            )
        )
    return True
