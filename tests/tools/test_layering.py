"""pride.tools sits low: it imports only pride.errors and pride.messages, and no asyncio."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pride.tools

PACKAGE = Path(pride.tools.__file__).parent
ALLOWED = {"pride.errors", "pride.messages"}


def _imports(path: Path) -> list[str]:
    """Absolute module names imported by one module of pride/tools."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.append(node.module or "")
            elif node.level == 1:
                names.append(f"pride.tools.{node.module}")
            else:
                names.append(f"pride.{node.module}")
    return names


def _allowed(name: str) -> bool:
    return any(name == ok or name.startswith(ok + ".") for ok in {*ALLOWED, "pride.tools"})


def test_tools_import_only_errors_and_messages_of_pride() -> None:
    """No module of pride/tools imports actors, operations, llm, supervisors, or asyncio."""
    offenders = []
    for path in PACKAGE.glob("*.py"):
        for name in _imports(path):
            root = name.split(".")[0]
            if root == "asyncio" or (root == "pride" and not _allowed(name)):
                offenders.append(f"{path.name}: {name}")
    assert offenders == []


def test_all_lists_the_public_names() -> None:
    """pride.tools.__all__ is sorted and names exactly its public non-module attributes."""
    public = {
        name
        for name, value in vars(pride.tools).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(pride.tools.__all__) == public
    assert sorted(pride.tools.__all__) == pride.tools.__all__


def test_public_classes_claim_the_package() -> None:
    """Public classes and functions say pride.tools in their __module__ (tracebacks, docs)."""
    for name in ("ActionManager", "ActionOutcome", "Tool", "tool"):
        assert getattr(pride.tools, name).__module__ == "pride.tools"
