"""A callable's signature as a msgspec Struct: its JSON schema and its validator.

Each tool's parameters become one synthetic `msgspec.Struct` (built with
`msgspec.defstruct`). msgspec then does both jobs from that one type:

* ``msgspec.json.schema_components`` writes the JSON schema the model sees;
* ``msgspec.convert`` checks and converts the model's arguments, the way a
  JSON decode would (``1`` is accepted for a ``float``, an ISO string for a
  ``datetime``, a dict for an attrs class or dataclass; ``"1"`` is not an
  ``int``).

Schema and validation therefore cannot disagree. Why msgspec rather than a
hand-written mapping from annotations to JSON types: it is maintained, fast,
and already covers ``Optional``/unions, ``Literal``, enums, ``TypedDict``,
``NamedTuple``, dataclasses, attrs classes, Structs, containers, ``datetime``,
``UUID`` and ``Annotated[..., msgspec.Meta(...)]`` constraints.

A parameter with a default is optional: its field defaults to
`msgspec.UNSET`, it is left out of ``"required"``, and when the model
omits it the function's own default applies (the default object itself, not a
copy). The default is also shown in the schema when it is JSON-encodable.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Union

import attrs
import msgspec

from ..errors import ToolArgumentError

__all__ = ["Parameters"]

_MISSING_FIELD = re.compile(r"Object missing required field `(?P<name>[^`]*)`")
_UNKNOWN_FIELD = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_TOP_FIELD = re.compile(r"\.(?P<name>\w+)(?P<rest>.*)")


@attrs.frozen
class Parameters:
    """The model-facing parameters of one callable.

    Built once per tool by `from_callable`; `bind` then turns a
    model's argument object into the ``(args, kwargs)`` of the actual call.
    """

    tool_name: str
    schema: dict[str, Any]
    """The JSON schema of the argument object (``"type": "object"``)."""
    _struct: type[msgspec.Struct]
    _names: tuple[str, ...]
    _positional_only: tuple[str, ...]
    _defaults: Mapping[str, Any]
    _var_keyword: Any
    """The value type of ``**kwargs``, or None when the callable takes no ``**kwargs``."""
    _bound: frozenset[str] = frozenset()
    """Names the application bound (`functools.partial`): never the model's to give."""

    @classmethod
    def from_callable(
        cls, fn: Callable[..., Any], tool_name: str, descriptions: Mapping[str, str]
    ) -> Parameters:
        """Describe ``fn``'s parameters.

        Parameters bound by `functools.partial` and ``*args`` are not
        exposed (a JSON argument object cannot fill ``*args``); ``**kwargs``
        lets the model pass extra named arguments of its value type, never
        one named like a bound argument (the application's choice stands).

        Raises:
            TypeError: the signature cannot be read, an annotation does not
                resolve, or a parameter's type has no JSON schema.
        """
        try:
            signature = inspect.signature(fn, eval_str=True)
        except NameError as exc:
            raise TypeError(
                f"tool {tool_name!r}: cannot resolve the type hints of {fn!r}: {exc} "
                "(types named in annotations must be importable from the function's module)"
            ) from exc
        except ValueError as exc:
            raise TypeError(f"tool {tool_name!r}: cannot read the signature of {fn!r}") from exc

        bound = fn.keywords if isinstance(fn, functools.partial) else {}
        reserved = _bound_names(fn, signature)
        fields: list[tuple[Any, ...]] = []
        names: list[str] = []
        positional_only: list[str] = []
        defaults: dict[str, Any] = {}
        var_keyword: Any = None
        for param in signature.parameters.values():
            annotation = _annotation(param.annotation)
            if param.kind is param.VAR_POSITIONAL or param.name in bound:
                continue
            if param.kind is param.VAR_KEYWORD:
                var_keyword = annotation
                continue
            names.append(param.name)
            if param.kind is param.POSITIONAL_ONLY:
                positional_only.append(param.name)
            if param.name in descriptions:
                annotation = Annotated[
                    annotation, msgspec.Meta(description=descriptions[param.name])
                ]
            # The Struct's attributes get neutral names (p0, p1, ...) and carry the
            # parameter's name as their wire name: msgspec cannot store attributes
            # such as `__x`, but any identifier is a fine JSON key.
            attribute = f"p{len(names) - 1}"
            if param.default is param.empty:
                fields.append((attribute, annotation, msgspec.field(name=param.name)))
            else:
                defaults[param.name] = param.default
                # A union built at run time from a runtime type: mypy cannot follow it.
                optional = Union[annotation, msgspec.UnsetType]  # type: ignore[valid-type]  # noqa: UP007
                fields.append(
                    (attribute, optional, msgspec.field(default=msgspec.UNSET, name=param.name))
                )

        struct = msgspec.defstruct(
            f"{tool_name}_arguments",
            fields,
            kw_only=True,
            forbid_unknown_fields=var_keyword is None,
        )
        schema = _schema(struct, var_keyword, tool_name, fields)
        for name, default in defaults.items():
            # A default that is not JSON-encodable is simply not shown.
            with contextlib.suppress(TypeError, ValueError):
                schema["properties"][name]["default"] = msgspec.to_builtins(default)
        return cls(
            tool_name,
            schema,
            struct,
            tuple(names),
            tuple(positional_only),
            defaults,
            var_keyword,
            reserved,
        )

    def convert(self, arguments: object) -> dict[str, Any]:
        """Validate a model's arguments and convert them to the annotated types.

        Args:
            arguments: The argument object, as decoded from the model's JSON.

        Returns:
            The converted arguments by parameter name (extra ``**kwargs``
            arguments last). Omitted optional parameters are absent, so the
            function's own defaults apply.

        Raises:
            ToolArgumentError: ``arguments`` is not a mapping, names an unknown
                parameter, misses a required one, or has a value of the wrong
                type. The message names the tool and the argument.
        """
        if not isinstance(arguments, Mapping):
            raise ToolArgumentError(
                f"tool {self.tool_name!r}: arguments must be a JSON object, "
                f"got {type(arguments).__name__}"
            )
        declared = dict(arguments)
        for key in declared:
            if not isinstance(key, str):
                raise ToolArgumentError(
                    f"tool {self.tool_name!r}: argument names must be strings, got {key!r}"
                )
            if key in self._bound:
                # Passed on through **kwargs, it would replace the partial's value.
                raise ToolArgumentError(
                    f"tool {self.tool_name!r}: argument {key!r} is bound by the application "
                    "and cannot be given"
                )
        extra = {}
        if self._var_keyword is not None:
            extra = {key: declared.pop(key) for key in list(declared) if key not in self._names}
        try:
            value = msgspec.convert(declared, self._struct)
        except msgspec.ValidationError as exc:
            raise self._argument_error(str(exc)) from exc
        converted = {
            name: field
            for index, name in enumerate(self._names)
            if (field := getattr(value, f"p{index}")) is not msgspec.UNSET
        }
        for key, raw in extra.items():
            converted[key] = self._convert_extra(key, raw)
        return converted

    def bind(self, arguments: object) -> tuple[list[Any], dict[str, Any]]:
        """Validate a model's arguments and build the call's ``(args, kwargs)``.

        Positional-only parameters are passed by position, in order up to the
        last one given (skipped optional ones get their defaults); the rest by
        keyword.

        Raises:
            ToolArgumentError: as `convert`.
        """
        kwargs = self.convert(arguments)
        args: list[Any] = []
        given = [name for name in self._positional_only if name in kwargs]
        if given:
            last = self._positional_only.index(given[-1])
            for name in self._positional_only[: last + 1]:
                args.append(kwargs.pop(name) if name in kwargs else self._defaults[name])
        return args, kwargs

    def _convert_extra(self, key: str, value: object) -> Any:
        """Check one ``**kwargs`` argument against the ``**kwargs`` annotation."""
        try:
            return msgspec.convert(value, self._var_keyword)
        except msgspec.ValidationError as exc:
            raise self._value_error(key, str(exc)) from exc

    def _value_error(self, name: str, message: str, path: str = "") -> ToolArgumentError:
        """``tool 'f': invalid value for argument 'x' (at `x.y`): <msgspec's reason>``."""
        if located := _at_path(message):
            message, path = located
        where = f" (at `{name}{path}`)" if path else ""
        return ToolArgumentError(
            f"tool {self.tool_name!r}: invalid value for argument {name!r}{where}: {message}"
        )

    def _argument_error(self, message: str) -> ToolArgumentError:
        """Reword a msgspec validation message in terms of the tool's arguments."""
        tool = f"tool {self.tool_name!r}"
        if missing := _MISSING_FIELD.fullmatch(message):
            return ToolArgumentError(f"{tool} is missing required argument {missing['name']!r}")
        if unknown := _UNKNOWN_FIELD.fullmatch(message):
            expected = ", ".join(self._names) or "none"
            return ToolArgumentError(
                f"{tool} got an unexpected argument {unknown['name']!r} (parameters: {expected})"
            )
        located = _at_path(message)
        top = _TOP_FIELD.fullmatch(located[1]) if located else None
        if located is None or top is None:
            return ToolArgumentError(f"{tool}: invalid arguments: {message}")
        return self._value_error(top["name"], located[0], top["rest"])


def _at_path(message: str) -> tuple[str, str] | None:
    """``(reason, path)`` of a msgspec message ``<reason> - at `$<path>```, or None."""
    # Not a pattern: ``(.*) - at `\$(.*)``` backtracked through every " - at `$"
    # in the message, where msgspec quotes the model's value (a wrong enum's):
    # 320 KB of them took 37 s of the event loop. The last one is the path's.
    reason, at, path = message.rpartition(" - at `$")
    if not at or not path.endswith("`"):
        return None
    return reason, path[:-1]


def _bound_names(fn: Callable[..., Any], signature: inspect.Signature) -> frozenset[str]:
    """The names a `functools.partial` fixed: its keywords, and the parameters
    its positional arguments filled (gone from ``signature``, the partial's own).

    Nested partials are flattened by `functools` itself, so one level is all.
    """
    if not isinstance(fn, functools.partial):
        return frozenset()
    names = set(fn.keywords)
    try:
        inner = inspect.signature(fn.func)
    except (TypeError, ValueError):
        return frozenset(names)
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    names.update(
        name
        for name, param in inner.parameters.items()
        if param.kind not in variadic and name not in signature.parameters
    )
    return frozenset(names)


def _annotation(annotation: Any) -> Any:
    """The type msgspec sees for a parameter: unannotated and ``object`` mean any."""
    if annotation is inspect.Parameter.empty or annotation is object:
        return Any
    return annotation


def _schema(
    struct: type[msgspec.Struct], var_keyword: Any, tool_name: str, fields: list[tuple[Any, ...]]
) -> dict[str, Any]:
    """The argument object's JSON schema, self-contained (nested types in ``$defs``)."""
    types: tuple[Any, ...] = (struct,) if var_keyword is None else (struct, var_keyword)
    try:
        refs, components = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    except TypeError as exc:
        for _, annotation, field in fields:
            try:
                msgspec.json.schema(annotation)
            except TypeError:
                raise TypeError(
                    f"tool {tool_name!r}: parameter {field.name!r} has type {annotation!r}, "
                    "which has no JSON schema; give it a JSON-compatible type or bind it with "
                    "functools.partial"
                ) from exc
        raise TypeError(
            f"tool {tool_name!r}: **kwargs type {var_keyword!r} has no JSON schema"
        ) from exc
    key = refs[0]["$ref"].rpartition("/")[2]
    schema: dict[str, Any] = components.pop(key)
    schema.pop("title", None)
    schema.setdefault("properties", {})
    if var_keyword is not None:
        schema["additionalProperties"] = refs[1]
    if components:
        schema["$defs"] = components
    return schema
