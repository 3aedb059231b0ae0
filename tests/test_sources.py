"""Every source file compiles on every Python the project claims (issue 35).

Python 3.13 cleans docstrings when it compiles them, through UTF-8, which has
no encoding for a lone UTF-16 surrogate: a docstring holding one (an escape
such as ``"\\ud800"`` written in a non-raw string) stops its module from
compiling there (``UnicodeEncodeError``), so ``import pride`` failed on 3.13
while 3.11 and 3.12 imported it fine. A lone surrogate anywhere else in a
string constant compiles on every version (the tests feed them to pride on
purpose, and ``pride.messages`` matches them with a pattern); only docstrings
are checked for one, and they are checked on every version, not only where
they break.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pride", "tests", "examples", "benchmarks")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_DOCUMENTED = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _sources() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _surrogate_docstrings(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED):
            doc = ast.get_docstring(node, clean=False)
            if doc is not None and (match := LONE_SURROGATE.search(doc)):
                where, at = getattr(node, "lineno", 1), match.start()
                found.append(f"docstring at line {where}: ...{doc[max(at - 30, 0) : at + 10]!r}")
    return found


def test_the_sources_are_found() -> None:
    """The check below reads the whole tree, wherever the checkout lives."""
    names = {path.relative_to(ROOT).as_posix() for path in _sources()}
    assert {"pride/__init__.py", "tests/test_sources.py", "examples/demo.py"} <= names
    assert any(name.startswith("benchmarks/") for name in names)


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_docstring_holds_a_lone_surrogate_and_every_file_compiles(folder: str) -> None:
    """Each file is UTF-8, compiles on this Python, and has no lone surrogate in a
    docstring (write the escape doubled, ``"\\\\ud800"``, or in a raw string)."""
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        relative = path.relative_to(ROOT)
        text = path.read_bytes().decode("utf-8")  # strict: a source file is UTF-8
        tree = ast.parse(text, filename=str(relative))
        offenders += [f"{relative}: {found}" for found in _surrogate_docstrings(tree)]
        try:
            compile(tree, str(relative), "exec", dont_inherit=True)
        except (SyntaxError, UnicodeError) as error:
            offenders.append(f"{relative}: does not compile: {type(error).__name__}: {error}")
    assert not offenders, "\n".join(offenders)


def test_the_check_finds_a_lone_surrogate_in_any_docstring() -> None:
    """A module's, a class's and a function's docstring, written as a non-raw escape."""
    source = '"""a \\ud800"""\nclass C:\n    """b \\udfff"""\nasync def f():\n    """\\udc80"""\n'
    assert len(_surrogate_docstrings(ast.parse(source))) == 3
    plain = 'x = "\\ud800"\ndef f():\n    """\\\\ud800, the escape written doubled"""\n'
    assert _surrogate_docstrings(ast.parse(plain)) == []
