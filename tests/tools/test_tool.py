"""Tests for ``pride.tools.Tool``: names, validation before the call, and invocation."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import threading
from typing import Any, Literal

import pytest
import trio

from pride.errors import ToolArgumentError, ToolError
from pride.tools import Tool, tool


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0


def _awkward_names(
    copy: int, __secret: int = 0, __struct_fields__: int = 0, p0: int = 0
) -> tuple[int, ...]:
    return (copy, __secret, __struct_fields__, p0)


class TestNames:
    """Tool names follow the providers' rule ^[a-zA-Z0-9_-]{1,64}$."""

    def test_default_name_is_the_function_name(self) -> None:
        """A function's tool is named after the function."""

        def get_weather() -> None: ...

        assert Tool(get_weather).name == "get_weather"

    def test_explicit_name(self) -> None:
        """name= overrides the function name and may use '-' and digits."""
        assert Tool(lambda: None, name="web-search-2").name == "web-search-2"

    def test_lambda_needs_a_name(self) -> None:
        """A lambda's '<lambda>' is not a valid name and the error says how to fix it."""
        with pytest.raises(ValueError, match=r"invalid tool name '<lambda>'.*pass name="):
            Tool(lambda: None)

    @pytest.mark.parametrize("name", ["", "has space", "dot.ted", "ünïcode", "x" * 65])
    def test_invalid_names(self, name: str) -> None:
        """Empty, too long, or with characters outside [a-zA-Z0-9_-]: ValueError."""
        with pytest.raises(ValueError, match=r"\^\[a-zA-Z0-9_-\]\{1,64\}\$"):
            Tool(lambda: None, name=name)

    def test_sixty_four_characters_is_fine(self) -> None:
        """The longest allowed name is 64 characters."""
        assert Tool(lambda: None, name="x" * 64).name == "x" * 64

    def test_not_callable(self) -> None:
        """Wrapping a non-callable is a TypeError."""
        with pytest.raises(TypeError, match="needs a callable"):
            Tool(42, name="n")  # type: ignore[arg-type]


class TestValidation:
    """Arguments are checked against the signature before the function runs."""

    @staticmethod
    def _spy() -> tuple[Tool, list[Any]]:
        calls: list[Any] = []

        def book(city: str, nights: int, *, breakfast: bool = False) -> str:
            calls.append((city, nights, breakfast))
            return "booked"

        return Tool(book), calls

    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            ({"city": "Oslo"}, r"tool 'book' is missing required argument 'nights'"),
            (
                {"city": "Oslo", "nights": 2, "pets": 1},
                r"tool 'book' got an unexpected argument 'pets' "
                r"\(parameters: city, nights, breakfast\)",
            ),
            (
                {"city": "Oslo", "nights": "two"},
                r"tool 'book': invalid value for argument 'nights': Expected `int`, got `str`",
            ),
            (
                {"city": "Oslo", "nights": 2, "breakfast": "yes"},
                r"invalid value for argument 'breakfast': Expected `bool`, got `str`",
            ),
            ({"city": "Oslo", "nights": 2.5}, r"argument 'nights': Expected `int`, got `float`"),
            (["Oslo", 2], r"tool 'book': arguments must be a JSON object, got list"),
            ({1: "Oslo"}, r"tool 'book': argument names must be strings"),
        ],
    )
    async def test_bad_arguments_are_rejected_before_the_call(
        self, arguments: Any, message: str
    ) -> None:
        """Missing, unknown or mistyped arguments raise ToolArgumentError; nothing runs."""
        book, calls = self._spy()
        with pytest.raises(ToolArgumentError, match=message) as info:
            await book.invoke(arguments)
        assert isinstance(info.value, ValueError)
        assert isinstance(info.value, ToolError)
        assert calls == []

    @pytest.mark.parametrize("keyword", [False, True], ids=["parameter", "kwargs"])
    async def test_a_value_quoted_in_the_error_is_read_in_linear_time(self, keyword: bool) -> None:
        """Model output is hostile: msgspec quotes a wrong enum value in its message,
        and the message was split from its path by a pattern that backtracked through
        every `` - at `$`` in it (320 KB of them took 37 s of the event loop). Two
        megabytes of them are one ToolArgumentError at once (a timeout if not)."""

        def paint(color: Literal["red", "blue"] = "red", **more: Literal["red"]) -> None: ...

        name = "shade" if keyword else "color"
        with pytest.raises(
            ToolArgumentError,
            match=rf"tool 'paint': invalid value for argument '{name}': Invalid enum value",
        ):
            await Tool(paint).invoke({name: " - at `$" * 250_000})

    async def test_nested_errors_name_the_path(self) -> None:
        """An error inside a structured argument names the argument and the path in it."""

        def move(to: list[Point]) -> None: ...

        with pytest.raises(
            ToolArgumentError,
            match=r"tool 'move': invalid value for argument 'to' \(at `to\[1\]\.x`\): "
            r"Expected `int`, got `str`",
        ):
            await Tool(move).invoke({"to": [{"x": 1}, {"x": "a"}]})

    async def test_arguments_are_converted_the_json_way(self) -> None:
        """Objects become dataclasses, ISO strings datetimes, ints floats."""
        received: dict[str, Any] = {}

        def f(point: Point, when: datetime.date, ratio: float) -> None:
            received.update(point=point, when=when, ratio=ratio)

        await Tool(f).invoke({"point": {"x": 1}, "when": "2024-05-01", "ratio": 1})
        assert received == {"point": Point(1, 0), "when": datetime.date(2024, 5, 1), "ratio": 1.0}
        assert isinstance(received["ratio"], float)

    async def test_omitted_optional_arguments_use_the_function_default(self) -> None:
        """An omitted optional argument is not passed: the function's own default applies."""
        default: list[int] = []

        def f(items: list[int] = default) -> list[int]:
            return items

        assert await Tool(f).invoke({}) is default
        assert await Tool(f).invoke(None) is default

    async def test_explicit_null_is_checked(self) -> None:
        """Passing null for a non-optional type is a type error, not "use the default"."""

        def f(n: int = 3) -> int:
            return n

        with pytest.raises(ToolArgumentError, match="Expected `int`, got `null`"):
            await Tool(f).invoke({"n": None})

    async def test_positional_only_parameters(self) -> None:
        """Positional-only parameters are passed by position, skipped defaults filled in."""

        def f(a: int, b: int = 10, c: int = 20, /, *, d: int = 0) -> tuple[int, ...]:
            return (a, b, c, d)

        tool = Tool(f)
        assert await tool.invoke({"a": 1}) == (1, 10, 20, 0)
        assert await tool.invoke({"a": 1, "c": 3, "d": 4}) == (1, 10, 3, 4)

    async def test_var_keyword_extras_are_validated(self) -> None:
        """Extra arguments go to **kwargs, checked against its annotation."""

        def f(q: str, **filters: int) -> dict[str, int]:
            return filters

        tool = Tool(f)
        assert await tool.invoke({"q": "x", "year": 2020}) == {"year": 2020}
        with pytest.raises(ToolArgumentError, match=r"invalid value for argument 'year'"):
            await tool.invoke({"q": "x", "year": "2020"})

    async def test_any_identifier_is_a_parameter_name(self) -> None:
        """Names msgspec could not store as attributes (dunders, Struct internals) still work."""

        # Defined at module level: inside a class body `__secret` would be name-mangled.
        tool = Tool(_awkward_names)
        assert list(tool.parameters["properties"]) == [
            "copy",
            "__secret",
            "__struct_fields__",
            "p0",
        ]
        arguments = {"copy": 1, "__secret": 2, "__struct_fields__": 3, "p0": 4}
        assert await tool.invoke(arguments) == (1, 2, 3, 4)
        with pytest.raises(ToolArgumentError, match="argument '__secret'"):
            await tool.invoke({"copy": 1, "__secret": "x"})

    def test_validate_converts_without_calling(self) -> None:
        """validate() returns the converted arguments and does not call the function."""
        calls = []

        def f(point: Point, n: int = 1) -> None:
            calls.append(point)

        assert Tool(f).validate({"point": {"x": 2}}) == {"point": Point(2, 0)}
        assert calls == []


class TestInvoke:
    """How a tool's function is called."""

    async def test_async_function_runs_in_the_calling_task(self) -> None:
        """An async tool is awaited in the caller's task."""
        caller = trio.lowlevel.current_task()

        async def where() -> bool:
            return trio.lowlevel.current_task() is caller

        tool = Tool(where)
        assert tool.is_async
        assert await tool.invoke({}) is True

    async def test_sync_function_runs_in_a_worker_thread(self) -> None:
        """A sync tool runs in a trio worker thread, not on the event loop's thread."""
        loop_thread = threading.get_ident()

        def where() -> int:
            return threading.get_ident()

        tool = Tool(where)
        assert not tool.is_async
        assert await tool.invoke({}) != loop_thread

    async def test_errors_propagate_unchanged(self) -> None:
        """invoke re-raises the function's own exception as is."""

        async def fail() -> None:
            raise LookupError("nope")

        with pytest.raises(LookupError, match="nope"):
            await Tool(fail).invoke({})

    async def test_partial_and_bound_method(self) -> None:
        """Partials and bound methods are invoked with their bound arguments."""

        class Scale:
            def __init__(self, k: int) -> None:
                self.k = k

            def apply(self, x: int, offset: int) -> int:
                return self.k * x + offset

        tool = Tool(functools.partial(Scale(3).apply, offset=1))
        assert await tool.invoke({"x": 2}) == 7

    @pytest.mark.parametrize("depth", [1, 2], ids=["partial", "partial of a partial"])
    async def test_issue14_bound_arguments_are_never_overridden_by_the_model(
        self, depth: int
    ) -> None:
        """A keyword bound with functools.partial stays bound even when the tool takes
        ``**kwargs``: a model argument of that name is refused, not passed on."""

        def transfer(amount: int, account: str, **notes: str) -> str:
            return f"{amount} to {account} {notes}"

        bound: Any = functools.partial(transfer, account="savings")
        if depth == 2:
            bound = functools.partial(bound, amount=5)
        tool = Tool(bound, name="transfer")
        assert "account" not in tool.parameters["properties"]
        given: dict[str, Any] = {"amount": 5} if depth == 1 else {}
        with pytest.raises(ToolArgumentError, match="'account' is bound by the application"):
            await tool.invoke({**given, "account": "attacker", "memo": "x"})
        result = await tool.invoke({**given, "memo": "x"})
        assert result == "5 to savings {'memo': 'x'}"

    async def test_issue14_positionally_bound_arguments_are_refused_by_name(self) -> None:
        """A parameter bound by position can't be named by the model through ``**kwargs``."""

        def send(to: str, body: str, **extra: str) -> str:
            return f"{to}: {body}"

        tool = Tool(functools.partial(send, "ops@example.org"), name="send")
        with pytest.raises(ToolArgumentError, match="'to' is bound by the application"):
            await tool.invoke({"body": "hi", "to": "attacker@example.org"})
        assert await tool.invoke({"body": "hi"}) == "ops@example.org: hi"


class TestDecorator:
    """@tool makes a Tool, with or without options."""

    async def test_bare_decorator(self) -> None:
        """@tool wraps the function; the result is still directly callable."""

        @tool
        def double(x: int) -> int:
            """Double x."""
            return 2 * x

        assert isinstance(double, Tool)
        assert double.name == "double"
        assert double(4) == 8
        assert await double.invoke({"x": 4}) == 8

    def test_decorator_with_options(self) -> None:
        """@tool(name=..., description=...) sets both."""

        @tool(name="twice", description="Two times x.")
        def double(x: int) -> int:
            return 2 * x

        assert double.schema()["name"] == "twice"
        assert double.description == "Two times x."

    def test_from_function_and_rewrapping(self) -> None:
        """Tool.from_function is Tool(); wrapping a Tool keeps its name unless overridden."""

        def f(a: int) -> None:
            """F."""

        original = Tool.from_function(f, name="first")
        assert original.name == "first"
        assert original.function is f
        again = Tool(original, description="Other.")
        assert (again.name, again.description, again.function) == ("first", "Other.", f)
        assert repr(original) == "Tool(name='first', is_async=False)"
