"""MCP is an optional extra: ``import pride`` never loads the SDK, and its absence is explained."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pride

ROOT = Path(pride.__file__).parent


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_import_pride_does_not_import_mcp() -> None:
    """Neither the SDK nor pride.mcp is loaded by ``import pride`` (or pride.tools, pride.cli)."""
    result = _python(
        "import sys, pride, pride.tools, pride.supervisors, pride.cli\n"
        "loaded = sorted(m for m in sys.modules\n"
        "                if m == 'mcp' or m.startswith(('mcp.', 'pride.mcp')))\n"
        "print(loaded)\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_the_extra_spawn_mcp_says_what_to_install() -> None:
    """With the SDK missing, pride works and spawn_mcp raises ImportError naming the extra."""
    result = _python(
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the extra were not installed\n"
        "import trio, pride\n"
        "async def main():\n"
        "    async with pride.Session() as session:\n"
        "        try:\n"
        "            await session.spawn_mcp('x', command=['true'])\n"
        "        except ImportError as exc:\n"
        "            print(exc)\n"
        "trio.run(main)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "pip install 'pride[mcp]'" in result.stdout


def test_only_pride_mcp_imports_the_sdk() -> None:
    """Every ``import mcp`` in pride lives under pride/mcp/."""
    offenders = []
    for path in ROOT.rglob("*.py"):
        if path.is_relative_to(ROOT / "mcp"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(name == "mcp" or name.startswith("mcp.") for name in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
