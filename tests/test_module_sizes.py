"""Modules are split at seams, never to fit a line count (issue 32 item 6).

The review rule (docs/contributing.md, "Modules"): one idea per module. Length
alone is no reason to split, but a long module makes its reader ask whether
it has grown a second idea; so a module over about 600 lines answers in its
docstring, in a paragraph that says why it is one idea. This test checks that
the paragraph is there (the reviewer judges the reason); no module has an
allowance of its own.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pride

ROOT = Path(pride.__file__).parent

LONG = 600
_ONE_IDEA = re.compile(r"\bone idea\b", re.IGNORECASE)


def says_why_it_is_one_idea(source: str) -> bool:
    """True when a module of ``source`` is short, or its docstring has a paragraph
    saying why it is one idea."""
    if len(source.splitlines()) <= LONG:
        return True
    docstring = ast.get_docstring(ast.parse(source)) or ""
    return any(_ONE_IDEA.search(paragraph) for paragraph in docstring.split("\n\n"))


def test_every_long_module_says_why_it_is_one_idea() -> None:
    unexplained = [
        f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines"
        for path in sorted(ROOT.rglob("*.py"))
        if not says_why_it_is_one_idea(text := path.read_text(encoding="utf-8"))
    ]
    assert not unexplained, (
        "over ~600 lines: say in the module docstring why it is one idea, "
        "or split it along its seam: " + "; ".join(unexplained)
    )


def test_the_rule_reads_length_and_the_docstring() -> None:
    body = "x = 1\n" * LONG
    assert says_why_it_is_one_idea('"""Short."""\n' + "x = 1\n" * 10)
    assert not says_why_it_is_one_idea('"""Long, with no reason."""\n' + body)
    assert not says_why_it_is_one_idea("# one idea, but in a comment\n" + body)
    assert says_why_it_is_one_idea(
        '"""The Branch.\n\nOne idea: the aggregate, written in one place."""\n' + body
    )
