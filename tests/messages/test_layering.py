"""pride.messages is the bottom layer: it imports nothing else of pride."""

from __future__ import annotations

import ast
from pathlib import Path

import pride.messages

PACKAGE = Path(pride.messages.__file__).parent


def test_messages_import_nothing_else_of_pride() -> None:
    """No module of pride/messages imports another pride package (nor trio/httpx)."""
    offenders = []
    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
                if node.level > 1:
                    offenders.append(f"{path.name}: from {'.' * node.level}{node.module}")
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                if root in {"pride", "trio", "httpx"}:
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []
