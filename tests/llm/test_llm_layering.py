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
