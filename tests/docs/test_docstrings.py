"""pride's docstrings are Markdown that mkdocstrings renders: no reStructuredText left in them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PRIDE = Path(__file__).resolve().parent.parent.parent / "pride"

#: A Sphinx role (``:class:`X```, ``:meth:``, ``:py:func:``...): shown as raw text on the site.
SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const|ref|doc):`")


def _docstrings(tree: ast.Module) -> list[ast.Constant]:
    """Module, class and function docstrings, and attribute docstrings after an assignment."""
    found = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for index, stmt in enumerate(body):
            is_string = (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            )
            after_assignment = index > 0 and isinstance(body[index - 1], ast.Assign | ast.AnnAssign)
            if is_string and (index == 0 or after_assignment):
                found.append(stmt.value)
    return found


def test_no_sphinx_roles_in_pride() -> None:
    """No Sphinx cross-reference role anywhere in pride/: write [`X`][pride.X] or `X` instead."""
    hits = [
        f"{path.relative_to(PRIDE.parent)}:{number}: {line.strip()}"
        for path in sorted(PRIDE.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if SPHINX_ROLE.search(line)
    ]
    assert not hits, "Sphinx roles (see docs/contributing.md):\n" + "\n".join(hits)


def test_no_rst_literal_blocks_in_docstrings() -> None:
    """An example in a docstring is a fenced block, not an indented block after ``::``."""
    hits = []
    for path in sorted(PRIDE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for doc in _docstrings(tree):
            for offset, line in enumerate(str(doc.value).splitlines()):
                if line.rstrip().endswith("::"):
                    hits.append(f"{path.relative_to(PRIDE.parent)}:{doc.lineno + offset}: {line}")
    assert not hits, "reStructuredText literal blocks (use ```python fences):\n" + "\n".join(hits)


def test_the_checks_see_what_they_look_for() -> None:
    """The role pattern matches each role form, and the docstring finder sees every kind."""
    for role in (":class:`X`", ":meth:`X.y`", ":py:func:`f`", ":exc:`E`", ":mod:`m`"):
        assert SPHINX_ROLE.search(role), role
    assert not SPHINX_ROLE.search("[`Branch`][pride.Branch] and `code`: text")
    tree = ast.parse(
        '"""m"""\nX = 1\n"""x"""\nclass C:\n    """c"""\n    def f(self):\n        """f"""\n'
    )
    assert sorted(str(doc.value) for doc in _docstrings(tree)) == ["c", "f", "m", "x"]
