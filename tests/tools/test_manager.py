"""Tests for ``ActionManager`` as a registry: registration, lookup and schemas."""

from __future__ import annotations

import pytest

from pride.tools import ActionManager, Tool


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def echo(text: str) -> str:
    """Echo the text."""
    return text


class TestRegister:
    """register() accepts tools, callables and iterables, and guards names."""

    def test_callables_tools_and_iterables(self) -> None:
        """Callables are wrapped, Tools kept, iterables unpacked, in registration order."""
        manager = ActionManager()
        echo_tool = Tool(echo)
        manager.register(add)
        manager.register([echo_tool, mul])
        assert manager.names == ("add", "echo", "mul")
        assert manager.get("echo") is echo_tool
        assert isinstance(manager.get("add"), Tool)

    def test_constructor_registers(self) -> None:
        """ActionManager(tools) registers them at once."""
        assert ActionManager([add, mul]).names == ("add", "mul")
        assert ActionManager(add).names == ("add",)

    def test_duplicate_name_is_an_error(self) -> None:
        """Registering a taken name raises ValueError naming it and suggesting update=True."""
        manager = ActionManager([add])
        with pytest.raises(ValueError, match=r"'add' is already registered.*update=True"):
            manager.register(Tool(mul, name="add"))
        assert manager.get("add").function is add  # type: ignore[union-attr]

    def test_duplicate_within_one_batch(self) -> None:
        """Two tools of the same name in one call conflict too."""
        with pytest.raises(ValueError, match="'add'"):
            ActionManager([add, Tool(mul, name="add")])

    def test_update_replaces_in_place(self) -> None:
        """update=True replaces the tool and keeps its position."""
        manager = ActionManager([add, echo])
        replacement = Tool(mul, name="add")
        manager.register(replacement, update=True)
        assert manager.names == ("add", "echo")
        assert manager.get("add") is replacement

    def test_registration_is_all_or_nothing(self) -> None:
        """When one item of a batch fails, none of the batch is registered."""
        manager = ActionManager([add])
        with pytest.raises(ValueError, match="invalid tool name"):
            manager.register([mul, lambda: None])
        with pytest.raises(ValueError, match="already registered"):
            manager.register([echo, add])
        assert manager.names == ("add",)

    def test_not_a_tool(self) -> None:
        """Registering something that is neither callable nor iterable is a TypeError."""
        with pytest.raises(TypeError, match="cannot register 42"):
            ActionManager().register(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="cannot register 42"):
            ActionManager().register([add, 42])  # type: ignore[list-item]


class _Counted(Tool):
    """A tool that counts how often its ``requires_approval`` flag is read."""

    reads = 0

    @property
    def requires_approval(self) -> bool:
        _Counted.reads += 1
        return self.name.endswith("_approved")


class TestRegistrationCost:
    """Registering N tools one at a time is O(N): no step recounts every tool (issue 36)."""

    def test_issue36_one_at_a_time_reads_each_tool_s_flag_a_bounded_number_of_times(
        self,
    ) -> None:
        count = 2_000
        tools = [
            _Counted(add, name=f"t{n}" + ("_approved" if n % 7 == 0 else "")) for n in range(count)
        ]
        manager = ActionManager()
        _Counted.reads = 0
        for tool in tools:
            manager.register(tool)
        for tool in tools[::2]:
            manager.register(_Counted(mul, name=tool.name), update=True)
        for tool in tools[1::2]:
            manager.unregister(tool.name)
        assert _Counted.reads <= 4 * count  # O(N**2) was millions
        approved = sum(1 for tool in manager if tool.name.endswith("_approved"))
        assert approved > 0 and manager.needs_approval
        for tool in list(manager):
            manager.unregister(tool.name)
        assert not manager.needs_approval


class TestLookup:
    """The registry reads like a small, ordered collection of tools."""

    def test_membership_length_iteration(self) -> None:
        """in works with names and Tools; len counts; iteration yields Tools in order."""
        manager = ActionManager([add, echo])
        assert "add" in manager
        assert "mul" not in manager
        assert manager.get("add") in manager
        assert Tool(add) not in manager  # another Tool of the same name
        assert 3 not in manager
        assert len(manager) == 2
        assert [tool.name for tool in manager] == ["add", "echo"]

    def test_empty_manager_is_falsy(self) -> None:
        """A manager without tools is falsy."""
        assert not ActionManager()
        assert ActionManager([add])

    def test_tools_is_a_read_only_live_view(self) -> None:
        """tools maps names to Tools, follows registrations, and cannot be written."""
        manager = ActionManager([add])
        view = manager.tools
        manager.register(mul)
        assert list(view) == ["add", "mul"]
        with pytest.raises(TypeError):
            view["x"] = Tool(echo)  # type: ignore[index]

    def test_get_unknown_is_none(self) -> None:
        """get() of an unknown name returns None."""
        assert ActionManager().get("nope") is None

    def test_unregister(self) -> None:
        """unregister() removes and returns the tool; an unknown name is a KeyError naming it."""
        manager = ActionManager([add, mul])
        removed = manager.unregister("add")
        assert removed.function is add
        assert manager.names == ("mul",)
        with pytest.raises(
            KeyError, match=r"no tool named 'add' is registered \(registered: mul\)"
        ):
            manager.unregister("add")

    def test_repr(self) -> None:
        """The repr lists the names."""
        assert repr(ActionManager([add])) == "ActionManager(names=('add',))"


class TestSchemas:
    """schemas() follows a ToolSelection."""

    def test_true_means_all_in_order(self) -> None:
        """True selects every tool, in registration order."""
        manager = ActionManager([add, echo, mul])
        assert [s["name"] for s in manager.schemas()] == ["add", "echo", "mul"]
        assert manager.schemas(True) == manager.schemas()
        assert manager.schemas()[0] == Tool(add).schema()

    def test_false_means_none(self) -> None:
        """False selects nothing."""
        assert ActionManager([add]).schemas(False) == ()

    def test_names_in_the_given_order(self) -> None:
        """A tuple of names selects those tools, in the order given; a str is one name."""
        manager = ActionManager([add, echo, mul])
        assert [s["name"] for s in manager.schemas(("mul", "add"))] == ["mul", "add"]
        assert [s["name"] for s in manager.schemas("echo")] == ["echo"]
        assert manager.schemas(()) == ()

    def test_unknown_name(self) -> None:
        """Selecting an unregistered name is a KeyError naming it and the registered ones."""
        with pytest.raises(
            KeyError, match=r"no tool named 'div' is registered \(registered: add\)"
        ):
            ActionManager([add]).schemas(("add", "div"))

    def test_select_returns_tools(self) -> None:
        """select() gives the Tool objects a selection picks."""
        manager = ActionManager([add, mul])
        assert manager.select(("mul",)) == (manager.get("mul"),)
