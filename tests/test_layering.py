"""Imports point one way (DESIGN.md, "Layout"): a lower layer never imports a higher one.

cli -> cluster -> supervisors -> actors -> operations -> llm, tools, context, memory -> messages;
store and testing sit beside them; cluster (the ray extra) builds on supervisors;
mcp (the optional extra) sits beside tools
and supervisors: it builds on actors, tools and messages and never imports
supervisors at run time, while ``Session.spawn_mcp`` is the one door from
supervisors into it (a lazy import, so ``import pride`` never loads the SDK).
Imports under ``if TYPE_CHECKING:`` count too: a type-only import is still a
dependency a reader has to follow (and a cycle through one is a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pride

ROOT = Path(pride.__file__).parent

BASE = {"errors", "messages", "_version"}
ALLOWED: dict[str, set[str]] = {
    "messages": set(),
    "errors": {"messages"},
    "llm": BASE,
    "tools": BASE,
    "memory": BASE,
    "context": BASE | {"llm"},
    "operations": BASE | {"llm", "tools", "context", "memory"},
    "actors": BASE | {"llm", "tools", "context", "memory", "operations"},
    "supervisors": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "store", "mcp"},
    "mcp": BASE | {"llm", "tools", "context", "memory", "operations", "actors"},
    "store": BASE,
    "testing": BASE | {"llm"},
    "cluster": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "supervisors", "store"},
    "cli": BASE
    | {
        "llm",
        "tools",
        "context",
        "memory",
        "operations",
        "actors",
        "supervisors",
        "store",
        "testing",
        "mcp",
        "cluster",
    },
}


def _layer(path: Path) -> str:
    relative = path.relative_to(ROOT)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else path.stem


def _runtime_imports(path: Path) -> list[str]:
    """Pride packages imported by ``path``, TYPE_CHECKING blocks included."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(ROOT.parent).with_suffix("").parts
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level])
                parts = base + (node.module.split(".") if node.module else [])
                if not node.module:
                    parts = [*base, node.names[0].name]
            else:
                parts = (node.module or "").split(".")
        elif isinstance(node, ast.Import):
            parts = node.names[0].name.split(".")
        else:
            continue
        if parts and parts[0] == "pride" and len(parts) > 1:
            found.append(parts[1])
    return found


def test_imports_point_one_way() -> None:
    """Every runtime import of a pride package goes to an allowed (lower) layer."""
    violations = []
    for path in sorted(ROOT.rglob("*.py")):
        layer = _layer(path)
        if layer in {"__init__", "__main__", "_version"}:
            continue
        allowed = ALLOWED.get(layer)
        assert allowed is not None, f"{path}: layer {layer!r} has no rule in this test"
        for target in _runtime_imports(path):
            if target != layer and target not in allowed:
                violations.append(f"{path.relative_to(ROOT)} imports pride.{target}")
    assert violations == []


def test_no_asyncio_in_pride() -> None:
    """pride is trio-only, except the Ray host glue in pride/cluster/ (Ray's loop is asyncio)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if _layer(path) != "cluster"
        and any(
            isinstance(node, ast.Import | ast.ImportFrom)
            and "asyncio" in ast.unparse(node).split()[1].split(".")
            for node in ast.walk(ast.parse(path.read_text()))
        )
    ]
    assert offenders == []


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_optional_extras_stay_in_their_folder() -> None:
    """ray is imported only inside pride/cluster/ (and asyncio too, for its host glue)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if _layer(path) != "cluster" and "ray" in _imported_modules(path)
    ]
    assert offenders == []


def test_import_pride_does_not_import_ray() -> None:
    """`import pride` (and `import pride.cluster`) leave ray unimported: it is an optional extra."""
    import subprocess
    import sys

    code = "import sys, pride, pride.cluster; assert 'ray' not in sys.modules, 'ray imported'"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
