"""Every source file compiles on every Python the project claims, and holds none of
the constructs that break or leak on one of them only (issue 35).

Python 3.13 cleans docstrings when it compiles them, through UTF-8, which has
no encoding for a lone UTF-16 surrogate: a docstring holding one (an escape
such as ``"\\ud800"`` written in a non-raw string) stops its module from
compiling there (``UnicodeEncodeError``), so ``import pride`` failed on 3.13
while 3.11 and 3.12 imported it fine. No string constant of any source file
holds one, docstring or not (a constant becomes a docstring when code moves,
and the check holds on every version, not only where it breaks): a test that
feeds pride a lone surrogate builds it (``chr(0xD800)``), and a pattern that
matches one writes the escape for ``re`` to read (``r"[\\ud800-\\udfff]"``).

``with sqlite3.connect(...) as db`` commits or rolls back at the block's end
but does not close the connection, which only the garbage collector frees (its
statement cache holds it in a cycle): Python 3.13 then reports the unclosed
database as a ResourceWarning, in whichever test the collector happens to run
(two such blocks in the tests failed test_store_files.py and test_run.py on 3.13
only, each passing alone). A connection is closed explicitly
(``contextlib.closing``, or ``try``/``finally``).

Which files are pride's is told by where the imported package lives
(``Path(pride.__file__).parent``), never by a ``/pride/`` in a path: every file
of a checkout named ``pride``, what ``git clone`` makes, has one too (a frame
check once counted the tests' own frames as pride's there, and failed only in
such a clone).
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("pride", "tests", "examples", "benchmarks")
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _sources() -> list[Path]:
    return sorted(path for folder in FOLDERS for path in (ROOT / folder).rglob("*.py"))


def _lone_surrogates(tree: ast.Module) -> list[str]:
    """Where a string constant (a docstring, an f-string's text too) holds a lone surrogate."""
    found = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and (match := LONE_SURROGATE.search(text)):
            at = match.start()
            found.append(f"line {node.lineno}: ...{text[max(at - 30, 0) : at + 10]!r}")
    return found


def test_the_sources_are_found() -> None:
    """The check below reads the whole tree, wherever the checkout lives."""
    names = {path.relative_to(ROOT).as_posix() for path in _sources()}
    assert {"pride/__init__.py", "tests/test_sources.py", "examples/demo.py"} <= names
    assert any(name.startswith("benchmarks/") for name in names)


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_string_constant_holds_a_lone_surrogate_and_every_file_compiles(folder: str) -> None:
    """Each file is UTF-8, compiles on this Python, and has no lone surrogate in a
    string constant (build one with ``chr``, or write the escape for ``re``)."""
    offenders = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        relative = path.relative_to(ROOT)
        text = path.read_bytes().decode("utf-8")  # strict: a source file is UTF-8
        offenders += [f"{relative}: {found}" for found in _lone_surrogates(ast.parse(text))]
        try:
            compile(text, str(relative), "exec", dont_inherit=True)
        except (SyntaxError, UnicodeError) as error:
            offenders.append(f"{relative}: does not compile: {type(error).__name__}: {error}")
    assert not offenders, "\n".join(offenders)


def test_the_check_finds_a_lone_surrogate_in_any_string_constant() -> None:
    """Docstrings (a module's, a class's, a function's), plain and f-string text: the
    escape written in a non-raw string; not the escape doubled, nor a ``chr`` call."""
    source = (
        '"""a \\ud800"""\nclass C:\n    """b \\udfff"""\nasync def f():\n    """\\udc80"""\n'
        'x = "\\ud800"\ny = f"{x} \\udbff"\n'
    )
    assert len(_lone_surrogates(ast.parse(source))) == 5
    clean = 'x = chr(0xD800)\ndef f():\n    """\\\\ud800, the escape written doubled"""\n'
    assert _lone_surrogates(ast.parse(clean)) == []


# Compiles each file named on stdin, without writing bytecode; prints what fails.
_COMPILE_ALL = """
import sys
for name in sys.stdin.read().split("\\0"):
    try:
        with open(name, "rb") as file:
            compile(file.read(), name, "exec", dont_inherit=True)
    except (SyntaxError, UnicodeError, ValueError) as error:
        print(f"{name}: {type(error).__name__}: {error}")
"""


def _other_pythons() -> list[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^OTHER_PYTHONS := (.+)$", makefile, re.MULTILINE)
    assert found is not None, "the Makefile names the other Pythons pride claims"
    return found.group(1).split()


@pytest.mark.parametrize("version", _other_pythons())
def test_every_file_compiles_on_every_other_python_claimed(version: str) -> None:
    """What the unit suite on each version (``make versions``, run by CI) proves at
    length, checked in seconds in every ``make test``: each file compiles there (the
    3.13 docstring failure was a compile error)."""
    lookup = subprocess.run(
        [ROOT / ".ci" / "python", version], capture_output=True, text=True, check=False
    )
    assert lookup.returncode == 0, lookup.stderr
    names = "\0".join(str(path) for path in _sources())
    result = subprocess.run(
        [lookup.stdout.strip(), "-I", "-c", _COMPILE_ALL],
        input=names,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard: about 2 s of CPU for the whole tree
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "", result.stdout


def _path_words(tree: ast.Module) -> list[int]:
    """Lines of a string constant holding ``/pride/`` (docstrings aside): a path test by name."""
    documented = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, documented)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and re.search(r"[/\\]pride[/\\]", node.value)
    ]


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_file_is_told_pride_s_by_its_path_s_words(folder: str) -> None:
    """No ``"/pride/" in path``: use ``tests.helpers.is_pride_source`` (see above)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in _path_words(ast.parse(path.read_bytes()))
    ]
    assert not offenders, "tell pride's files by is_pride_source: " + ", ".join(offenders)


def test_the_check_finds_a_path_told_by_its_words() -> None:
    word = "pride"  # not written between slashes here, or this file would hold one
    source = (
        f'"""files under /{word}/ are not all {word}\'s"""\n'
        f'mine = "/{word}/" in path\n'
        f"def f(p):\n    return p.find('\\\\{word}\\\\')\n"
        f'url = "/{word}s/x"\n'
    )
    assert _path_words(ast.parse(source)) == [2, 4]


def _sqlite_connect_as_context(tree: ast.Module) -> list[int]:
    """Lines of ``with sqlite3.connect(...)``: a block that commits but never closes."""
    return [
        item.context_expr.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.With | ast.AsyncWith)
        for item in node.items
        if isinstance(call := item.context_expr, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "connect"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "sqlite3"
    ]


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_sqlite_connection_is_left_to_the_garbage_collector(folder: str) -> None:
    """No ``with sqlite3.connect(...)``: it leaves the connection open (see above)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in _sqlite_connect_as_context(ast.parse(path.read_bytes()))
    ]
    assert not offenders, "use contextlib.closing(sqlite3.connect(...)): " + ", ".join(offenders)


def test_the_check_finds_a_sqlite_connection_used_as_its_own_context() -> None:
    source = (
        "import contextlib, sqlite3\n"
        "with sqlite3.connect('a') as db: pass\n"
        "async def f():\n    async with x, sqlite3.connect('b'): pass\n"
        "with contextlib.closing(sqlite3.connect('c')) as db: pass\n"
    )
    assert _sqlite_connect_as_context(ast.parse(source)) == [2, 4]
