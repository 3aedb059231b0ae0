"""pride.llm and pride.testing keep to their layer and never touch asyncio."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

import pride.llm
import pride.testing

LLM = Path(pride.llm.__file__).parent
TESTING = Path(pride.testing.__file__).parent


def _imports(folder: Path) -> set[str]:
    names: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return names


def _package_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> modules of the same package it imports, counting every import:
    module level, inside functions, and under ``if TYPE_CHECKING:``."""
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    module = node.module
                elif node.level == 0 and node.module and node.module.startswith(package):
                    module = node.module.removeprefix(package).lstrip(".")
                else:
                    continue
                if module:
                    targets.add(module.split(".")[0])
                else:  # from . import _tokens
                    targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        rest = alias.name.removeprefix(package).lstrip(".")
                        targets.add(rest.split(".")[0] or "__init__")
        graph[path.stem] = targets - {path.stem}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle found by a depth-first walk (each reported once, from its start)."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                found.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


@pytest.mark.parametrize(("folder", "package"), [(LLM, "pride.llm"), (TESTING, "pride.testing")])
def test_no_import_circle_inside_the_package(folder, package):
    """No module of the package imports, even only for type checking, one that imports it back.

    The package face (``__init__``) imports the private modules, so a private
    module importing the face counts as a circle too.
    """
    assert _cycles(_package_graph(folder, package)) == []


def test_the_circle_check_sees_type_only_and_local_imports(tmp_path):
    """A circle closed only by a TYPE_CHECKING import and a function-local one is found."""
    (tmp_path / "__init__.py").write_text("from ._a import A as A\n")
    (tmp_path / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\nA = 1\n"
    )
    (tmp_path / "_b.py").write_text("def make():\n    from pride.fake._a import A\n")
    (tmp_path / "_c.py").write_text("import pride.fake\n")
    graph = _package_graph(tmp_path, "pride.fake")
    assert graph == {"__init__": {"_a"}, "_a": {"_b"}, "_b": {"_a"}, "_c": {"__init__"}}
    assert _cycles(graph) == [["_a", "_b", "_a"]]


def test_no_private_module_of_another_package_is_imported():
    """pride.llm and pride.testing use other pride packages through their faces only."""
    offenders = []
    for folder in (LLM, TESTING):
        for name in _imports(folder):
            parts = name.split(".")
            if parts[0] == "pride" and any(part.startswith("_") for part in parts[1:]):
                offenders.append(f"{folder.name} imports {name}")
    assert offenders == []


def test_llm_imports_only_pride_errors_from_pride():
    """pride.llm depends on no pride package but pride.errors."""
    assert {n for n in _imports(LLM) if n.split(".")[0] == "pride"} == {"pride.errors"}


def test_testing_imports_only_llm_and_errors_from_pride():
    """pride.testing uses pride.llm (and pride.errors) only."""
    allowed = ("pride.llm", "pride.errors")
    imported = {n for n in _imports(TESTING) if n.split(".")[0] == "pride"}
    assert all(n in allowed or n.startswith(tuple(a + "." for a in allowed)) for n in imported)


@pytest.mark.parametrize("folder", [LLM, TESTING])
def test_no_asyncio(folder):
    """Nothing in these packages imports asyncio."""
    assert not {n for n in _imports(folder) if n.split(".")[0] == "asyncio"}


@pytest.mark.parametrize("module", [pride.llm, pride.testing])
def test_exports_are_sorted_complete_and_rehomed(module):
    """__all__ is sorted, names exactly the public attributes, and classes name their module."""
    assert module.__all__ == sorted(module.__all__)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(module.__all__) == public
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, type):
            assert obj.__module__ == module.__name__, name


def test_the_interface_the_runtime_relies_on_is_exported():
    """The names other pride layers import from pride.llm are all there."""
    expected = {
        "iModel",
        "ScriptedModel",
        "ScriptedReply",
        "ModelRequest",
        "ModelResponse",
        "ModelStream",
        "ToolCall",
        "Usage",
        "RateLimiter",
        "RetryPolicy",
        "default_chat_model",
        "DEFAULT_CHAT_MODEL",
    }
    assert expected <= set(pride.llm.__all__)
    assert {"openai_server", "Fault", "LoopbackServer", "RecordedRequest"} <= set(
        pride.testing.__all__
    )
