"""Tests for the JSON schema of a tool's parameters (``Tool.parameters`` / ``Tool.schema()``)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import json
import keyword
from typing import Annotated, Any, Literal, NamedTuple, TypedDict

import attrs
import msgspec
import pytest
import trio
from hypothesis import given, strategies as st

from pride.tools import Tool

# Types used in annotations live at module level: tool schemas resolve
# annotations in the function's module.


@dataclasses.dataclass
class Point:
    """A point on the grid."""

    x: int
    y: int = 0


@attrs.define
class Box:
    width: float
    label: str = "box"


class Address(TypedDict):
    street: str
    number: int


class Pair(NamedTuple):
    left: str
    right: str


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Opaque:
    """A type msgspec cannot describe."""


def _params(fn: Any, **kw: Any) -> dict[str, Any]:
    return Tool(fn, **kw).parameters


def _walk(node: Any) -> list[dict[str, Any]]:
    """Every schema object inside ``node``, depth first."""
    found = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found.extend(_walk(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_walk(value))
    return found


_JSON_TYPES = {"object", "array", "string", "integer", "number", "boolean", "null"}


def assert_valid_parameters_schema(schema: dict[str, Any]) -> None:
    """The schema is JSON, an object schema, its refs resolve and its keywords are sane."""
    assert json.loads(json.dumps(schema)) == schema
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert set(schema.get("required", ())) <= set(schema["properties"])
    defs = schema.get("$defs", {})
    for node in _walk(schema):
        if "$ref" in node:
            prefix, _, name = node["$ref"].rpartition("/")
            assert prefix == "#/$defs"
            assert name in defs
        if isinstance(node.get("type"), str):
            assert node["type"] in _JSON_TYPES


class TestTypes:
    """Type hints become JSON schema types, through msgspec."""

    def test_scalars(self) -> None:
        """str, int, float and bool map to string, integer, number and boolean."""

        def f(s: str, i: int, x: float, b: bool) -> None: ...

        props = _params(f)["properties"]
        assert props == {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
        }

    def test_containers(self) -> None:
        """Lists, tuples, sets and str-keyed dicts become arrays and objects."""

        def f(
            tags: list[str], pair: tuple[int, str], ids: set[int], counts: dict[str, int]
        ) -> None: ...

        props = _params(f)["properties"]
        assert props["tags"] == {"type": "array", "items": {"type": "string"}}
        assert props["pair"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
        assert props["ids"] == {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
        assert props["counts"] == {"type": "object", "additionalProperties": {"type": "integer"}}

    def test_optional_and_union(self) -> None:
        """Optional and union types become anyOf, null included."""

        def f(a: int | None, b: int | str) -> None: ...

        props = _params(f)["properties"]
        assert props["a"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
        assert props["b"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}

    def test_literal_and_enum(self) -> None:
        """Literal and Enum parameters list their allowed values."""

        def f(mode: Literal["fast", "slow"], color: Color) -> None: ...

        schema = _params(f)
        assert schema["properties"]["mode"] == {"enum": ["fast", "slow"]}
        assert schema["properties"]["color"] == {"$ref": "#/$defs/Color"}
        assert sorted(schema["$defs"]["Color"]["enum"]) == ["green", "red"]

    def test_dataclass_attrs_typeddict_namedtuple(self) -> None:
        """Structured parameter types are described in $defs and referenced."""

        def f(point: Point, box: Box, address: Address, pair: Pair) -> None: ...

        schema = _params(f)
        assert schema["properties"]["point"] == {"$ref": "#/$defs/Point"}
        assert schema["$defs"]["Point"]["properties"] == {
            "x": {"type": "integer"},
            "y": {"type": "integer", "default": 0},
        }
        assert schema["$defs"]["Point"]["required"] == ["x"]
        assert schema["$defs"]["Box"]["properties"]["width"] == {"type": "number"}
        assert sorted(schema["$defs"]["Address"]["required"]) == ["number", "street"]
        assert schema["$defs"]["Pair"]["type"] == "array"
        assert_valid_parameters_schema(schema)

    def test_nested_list_of_optional_structs(self) -> None:
        """Nested generics over structured types keep their references."""

        def f(points: list[Point] | None = None) -> None: ...

        schema = _params(f)
        assert schema["properties"]["points"]["anyOf"][0] == {
            "type": "array",
            "items": {"$ref": "#/$defs/Point"},
        }
        assert_valid_parameters_schema(schema)

    def test_annotated_constraints(self) -> None:
        """msgspec.Meta constraints and descriptions in Annotated reach the schema."""

        def f(n: Annotated[int, msgspec.Meta(ge=1, le=10, description="How many.")]) -> None: ...

        assert _params(f)["properties"]["n"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": 10,
            "description": "How many.",
        }

    def test_unannotated_and_object_mean_any(self) -> None:
        """A parameter without a type hint, or typed object, accepts any JSON value."""

        def f(a, b: object, c: Any) -> None: ...  # type: ignore[no-untyped-def]

        assert _params(f)["properties"] == {"a": {}, "b": {}, "c": {}}

    def test_unsupported_type_is_a_clear_error(self) -> None:
        """A parameter type with no JSON schema fails at construction, naming the parameter."""

        def f(client: Opaque) -> None: ...

        with pytest.raises(TypeError, match=r"tool 'f': parameter 'client' has type .*Opaque"):
            Tool(f)

    def test_unresolvable_annotation_is_a_clear_error(self) -> None:
        """An annotation naming a type the module cannot see fails at construction."""

        @dataclasses.dataclass
        class Local:
            a: int

        def f(x: Local) -> None: ...

        with pytest.raises(TypeError, match=r"tool 'f': cannot resolve the type hints"):
            Tool(f)


class TestRequired:
    """Parameters with defaults are optional; the others are required."""

    def test_defaults_are_optional(self) -> None:
        """Only parameters without defaults are listed as required."""

        def f(a: int, b: int = 2, *, c: str, d: str = "x") -> None: ...

        schema = _params(f)
        assert schema["required"] == ["a", "c"]
        assert list(schema["properties"]) == ["a", "b", "c", "d"]

    def test_json_defaults_are_shown(self) -> None:
        """JSON-encodable defaults appear as "default"; others are left out."""
        sentinel = object()

        def f(a: int = 1, b: list[int] | None = None, c: Any = sentinel) -> None: ...

        props = _params(f)["properties"]
        assert props["a"]["default"] == 1
        assert props["b"]["default"] is None
        assert "default" not in props["c"]

    def test_no_parameters(self) -> None:
        """A function without parameters has an empty object schema."""

        def f() -> None: ...

        schema = _params(f)
        assert schema["type"] == "object"
        assert schema["properties"] == {}
        assert schema.get("required", []) == []

    def test_unknown_arguments_are_forbidden(self) -> None:
        """Without **kwargs the schema says additionalProperties is false."""

        def f(a: int) -> None: ...

        assert _params(f)["additionalProperties"] is False

    def test_var_keyword_allows_typed_extras(self) -> None:
        """**kwargs becomes additionalProperties of its value type; *args is not exposed."""

        def f(a: int, *rest: int, **filters: str) -> None: ...

        schema = _params(f)
        assert list(schema["properties"]) == ["a"]
        assert schema["additionalProperties"] == {"type": "string"}


class TestDescriptions:
    """Descriptions come from Google-style docstrings."""

    def test_summary_and_body_without_sections(self) -> None:
        """The description is the text before the first section."""

        def f(a: int) -> int:
            """Double a number.

            Works for negative numbers too.

            Args:
                a: The number.

            Returns:
                Twice ``a``.

            Raises:
                ValueError: never.
            """
            return 2 * a

        assert Tool(f).description == "Double a number.\n\nWorks for negative numbers too."

    def test_parameter_descriptions(self) -> None:
        """Args entries, with types in parentheses and continuation lines, describe parameters."""

        def f(query: str, limit: int = 10, *, lang: str = "en", **extra: str) -> None:
            """Search.

            Args:
                query (str): What to look for,
                    in plain words.
                limit: At most this many results.

            Keyword Args:
                lang: An ISO language code.
                **extra: Ignored.
            """

        props = _params(f)["properties"]
        assert props["query"]["description"] == "What to look for, in plain words."
        assert props["limit"]["description"] == "At most this many results."
        assert props["limit"]["default"] == 10
        assert props["lang"]["description"] == "An ISO language code."

    def test_described_structured_parameter(self) -> None:
        """A description sits beside the $ref of a structured parameter."""

        def f(point: Point | None = None) -> None:
            """Move.

            Args:
                point: Where to go.
            """

        prop = _params(f)["properties"]["point"]
        assert prop["description"] == "Where to go."
        assert prop["default"] is None

    def test_no_docstring(self) -> None:
        """A function without a docstring has an empty description."""

        def f(a: int) -> None: ...

        assert Tool(f).description == ""
        assert "description" not in _params(f)["properties"]["a"]

    def test_description_override(self) -> None:
        """description= replaces the docstring's description but keeps parameter ones."""

        def f(a: int) -> None:
            """Original.

            Args:
                a: The a.
            """

        tool = Tool(f, description="Replaced.")
        assert tool.description == "Replaced."
        assert tool.parameters["properties"]["a"]["description"] == "The a."


class TestCallables:
    """Any callable can be a tool; only the parameters the model fills are exposed."""

    def test_bound_method_hides_self(self) -> None:
        """A bound method's schema has no self."""

        class Calculator:
            def add(self, a: int, b: int) -> int:
                """Add."""
                return a + b

        tool = Tool(Calculator().add)
        assert tool.name == "add"
        assert list(tool.parameters["properties"]) == ["a", "b"]

    def test_partial_hides_bound_arguments(self) -> None:
        """Arguments bound by functools.partial are not shown to the model."""

        def fetch(client: Opaque, url: str, *, retries: int = 3, token: Opaque) -> None:
            """Fetch a URL."""

        tool = Tool(functools.partial(fetch, Opaque(), token=Opaque()))
        assert tool.name == "fetch"
        assert tool.description == "Fetch a URL."
        assert tool.parameters["required"] == ["url"]
        assert list(tool.parameters["properties"]) == ["url", "retries"]

    def test_callable_object_uses_call(self) -> None:
        """A callable object is named after its class and described by its __call__."""

        class Weather:
            """Holds an API client."""

            async def __call__(self, city: str) -> str:
                """Current weather.

                Args:
                    city: The city.
                """
                return "sunny"

        tool = Tool(Weather())
        assert tool.name == "Weather"
        assert tool.is_async
        assert tool.description == "Current weather."
        assert tool.parameters["properties"]["city"]["description"] == "The city."

    def test_callable_object_falls_back_to_class_docstring(self) -> None:
        """A callable object whose __call__ has no docstring is described by its class."""

        class Echo:
            """Echo the text back."""

            def __call__(self, text: str) -> str:
                return text

        assert Tool(Echo()).description == "Echo the text back."

    def test_schema_is_neutral_and_fresh(self) -> None:
        """schema() has name, description and parameters, and mutating it changes nothing."""

        def f(a: int) -> None:
            """F."""

        tool = Tool(f)
        schema = tool.schema()
        assert schema == {"name": "f", "description": "F.", "parameters": tool.parameters}
        schema["parameters"]["properties"].clear()
        assert tool.schema()["parameters"]["properties"] == {"a": {"type": "integer"}}


# ---------------------------------------------------------------- properties

_INTS = st.integers(min_value=-(2**53), max_value=2**53)
_PARAM_TYPES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, _INTS),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (str, st.text(max_size=10)),
    (bool, st.booleans()),
    (list[int], st.lists(_INTS, max_size=3)),
    (dict[str, str], st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)),
    (int | None, st.none() | _INTS),
    (Literal["a", "b"], st.sampled_from(["a", "b"])),
    (Point, st.builds(Point, _INTS, _INTS)),
    (list[Box], st.lists(st.builds(Box, st.floats(-1e6, 1e6), st.text(max_size=5)), max_size=2)),
    (Any, st.none() | _INTS | st.text(max_size=5)),
]
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


@st.composite
def signatures(draw: st.DrawFn) -> tuple[inspect.Signature, dict[str, Any]]:
    """A random signature and, for each parameter, a strategy for its values."""
    names = draw(st.lists(_NAMES, unique=True, max_size=6))
    positional = draw(st.integers(min_value=0, max_value=len(names)))
    params, values = [], {}
    for index, name in enumerate(names):
        tp, strategy = draw(st.sampled_from(_PARAM_TYPES))
        # Positional-only parameters stay required so defaults never precede them.
        optional = index >= positional and draw(st.booleans())
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if index < positional
            else inspect.Parameter.KEYWORD_ONLY
        )
        default = draw(strategy) if optional else inspect.Parameter.empty
        params.append(inspect.Parameter(name, kind, annotation=tp, default=default))
        values[name] = strategy
    return inspect.Signature(params), values


def _function_with(signature: inspect.Signature) -> Any:
    def fn(*args: Any, **kwargs: Any) -> dict[str, Any]:
        positional = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_ONLY]
        return {**dict(zip(positional, args, strict=False)), **kwargs}

    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


@given(signatures())
def test_random_signatures_give_valid_schemas(case: tuple[inspect.Signature, Any]) -> None:
    """Any signature of supported types yields a valid object schema listing its parameters."""
    signature, _ = case
    schema = Tool(_function_with(signature), name="f").parameters
    assert_valid_parameters_schema(schema)
    assert list(schema["properties"]) == list(signature.parameters)
    required = [p.name for p in signature.parameters.values() if p.default is p.empty]
    assert schema.get("required", []) == required


@given(signatures(), st.data())
def test_arguments_round_trip_through_json(
    case: tuple[inspect.Signature, dict[str, Any]], data: st.DataObject
) -> None:
    """Arguments sent as JSON arrive converted; omitted optional ones are not passed."""
    signature, strategies = case
    arguments = {}
    for param in signature.parameters.values():
        if param.default is param.empty or data.draw(st.booleans()):
            arguments[param.name] = data.draw(strategies[param.name])
    wire = json.loads(msgspec.json.encode(arguments))
    tool = Tool(_function_with(signature), name="f")
    received = trio.run(tool.invoke, wire)
    assert received == arguments
    assert list(received) == [name for name in signature.parameters if name in arguments]
