"""pride.context and pride.memory sit low: only pride.errors and pride.messages below them
(context also counts tokens with pride.llm's counter)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

import pride.context
import pride.memory

ALLOWED = ("pride.errors", "pride.messages")
EXTRA = {"pride.context": ("pride.llm",)}
PACKAGES = [pride.context, pride.memory]


def _imports(package: types.ModuleType) -> set[str]:
    folder = Path(package.__file__).parent  # type: ignore[arg-type]
    names: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    names.add(node.module or "")
                elif node.level == 1:
                    names.add(f"{package.__name__}.{node.module or ''}")
                else:
                    names.add(f"pride.{node.module or ''}")
    return names


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_imports_only_errors_and_messages_of_pride(package: types.ModuleType) -> None:
    """No actors, operations, tools or supervisors (context may count tokens with llm)."""
    offenders = set()
    permitted = ALLOWED + EXTRA.get(package.__name__, ())
    for name in _imports(package):
        root = name.split(".")[0]
        inside = name.startswith(package.__name__)
        allowed = any(name == ok or name.startswith(ok + ".") for ok in permitted)
        if root == "asyncio" or (root == "pride" and not inside and not allowed):
            offenders.add(name)
    assert offenders == set()


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_all_names_the_public_attributes(package: types.ModuleType) -> None:
    """__all__ lists exactly the public non-module names (ruff's RUF022 keeps it sorted)."""
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(package.__all__) == public
    assert len(set(package.__all__)) == len(package.__all__)
