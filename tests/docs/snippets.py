"""Python code blocks of the documentation: find them, and run the complete ones.

The convention (docs/contributing.md): a fenced ``python`` block is a complete
program, run by ``make test`` as it is; a block whose title starts with
"fragment" (```` ```python title="fragment: inside a turn" ````) is part of a
larger program and is only compiled, top-level ``await`` allowed. Blocks in
other languages are not Python and are left alone.

Imported by the tests for extraction; run as a script (by path, with a JSON
list of snippets on stdin) it executes the programs one after another in this
one process, each in a fresh namespace and a fresh working directory, and
prints one JSON result per snippet on stdout. Before the first snippet it
points every provider that has a default address at the loopback server named
by ``PRIDE_SNIPPET_BASE_URL``, so ``chat_model="openai/..."`` in a snippet
talks to a real HTTP server on 127.0.0.1 instead of the network.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

#: The files whose Python blocks must be programs or marked fragments.
DOCUMENTS = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

#: The environment variable carrying the loopback server's base URL.
BASE_URL_ENV = "PRIDE_SNIPPET_BASE_URL"

FRAGMENT_MARK = "fragment"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_OPTION = re.compile(r'(\w+)="([^"]*)"')


@dataclass(frozen=True)
class Snippet:
    """One fenced code block."""

    path: str  # relative to the repository root
    line: int  # 1-based line of the first line of code
    lang: str
    title: str
    code: str

    @property
    def is_python(self) -> bool:
        return self.lang in {"python", "py"}

    @property
    def is_fragment(self) -> bool:
        return self.title.lower().startswith(FRAGMENT_MARK)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def extract(path: Path) -> list[Snippet]:
    """Every fenced code block of a Markdown file, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        lang = info.split(maxsplit=1)[0].lstrip("{.") if info else ""
        title = dict(_OPTION.findall(info)).get("title", "")
        body: list[str] = []
        index += 1
        start = index + 1
        while index < len(lines):
            closing = lines[index].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            line = lines[index]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            index += 1
        index += 1
        found.append(Snippet(rel, start, lang, title, "\n".join(body) + "\n"))
    return found


def python_snippets() -> list[Snippet]:
    """Every Python block of README.md and docs/."""
    return [s for path in DOCUMENTS for s in extract(path) if s.is_python]


def compile_snippet(snippet: Snippet) -> object:
    """Compile a snippet so that errors carry the document's own line numbers."""
    source = "\n" * (snippet.line - 1) + snippet.code
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if snippet.is_fragment else 0
    return compile(source, snippet.where, "exec", flags=flags, dont_inherit=True)


def _route_providers(base_url: str) -> None:
    """Send every provider that has a default address to ``base_url``.

    The provider table is private to ``pride.llm``; this runner is test code
    and the only thing that rewrites it, so a rename there fails here loudly.
    """
    import attrs

    from pride.llm import _providers

    for name, info in list(_providers.PROVIDERS.items()):
        if info.base_url is not None:
            _providers.PROVIDERS[name] = attrs.evolve(info, base_url=base_url)


def _run_one(snippet: Snippet) -> dict[str, object]:
    out = io.StringIO()
    error = ""
    with tempfile.TemporaryDirectory(prefix="pride-snippet-") as workdir:
        previous = os.getcwd()
        os.chdir(workdir)
        try:
            code = compile_snippet(snippet)
            with contextlib.redirect_stdout(out):
                exec(code, {"__name__": "__main__", "__file__": snippet.where})
        except BaseException:
            error = traceback.format_exc()
        finally:
            os.chdir(previous)
    return {"where": snippet.where, "stdout": out.getvalue(), "error": error}


def main() -> None:
    """Run the snippets given as JSON on stdin; one JSON result line each on stdout."""
    snippets = [Snippet(**item) for item in json.load(sys.stdin)]
    base_url = os.environ.get(BASE_URL_ENV)
    if base_url:
        _route_providers(base_url)
    for snippet in snippets:
        print(f"running {snippet.where}", file=sys.stderr, flush=True)
        print(json.dumps(_run_one(snippet)), flush=True)


def as_json(snippets: list[Snippet]) -> str:
    return json.dumps([asdict(s) for s in snippets])


if __name__ == "__main__":
    main()
