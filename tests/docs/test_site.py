"""The documentation site: titles that agree, and a strict build that catches dead references."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
CONFIG = ROOT / "mkdocs.yml"

_LINK = re.compile(r"\[([^\]]+)\]\(([\w/.-]+\.md)\)")


def _nav_entries(nav: Any) -> list[Any]:
    """The leaves of a mkdocs nav, as written (a path, or a {title: path} mapping)."""
    if isinstance(nav, list):
        return [leaf for item in nav for leaf in _nav_entries(item)]
    if isinstance(nav, dict):
        (_title, value), *_ = nav.items()
        if isinstance(value, list):  # a section: its title is not a page title
            return _nav_entries(value)
        return [nav]
    return [nav]


def _title(page: Path) -> str:
    first = page.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# "), f"{page.relative_to(ROOT)} does not open with an H1"
    return first[2:].replace("`", "").strip()


def test_nav_titles_are_the_page_titles() -> None:
    """Nav entries name files only, so the nav shows each page's own H1."""
    nav = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["nav"]
    titled = [entry for entry in _nav_entries(nav) if not isinstance(entry, str)]
    assert not titled, f"give these pages no nav title (their H1 is the title): {titled}"


def test_index_links_use_the_page_titles() -> None:
    """A link from an index page to another page reads as that page's H1."""
    wrong = []
    for index in (DOCS / "index.md", DOCS / "reference" / "index.md"):
        for text, target in _LINK.findall(index.read_text(encoding="utf-8")):
            page = (index.parent / target).resolve()
            if text.replace("`", "") != _title(page):
                wrong.append(f"{index.relative_to(ROOT)}: [{text}]({target}) -> {_title(page)!r}")
    assert not wrong, "\n".join(wrong)


def test_index_links_every_page_of_the_nav() -> None:
    """The home page's list of pages is complete."""
    nav = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))["nav"]
    pages = {entry for entry in _nav_entries(nav) if not entry.startswith("reference/")}
    pages |= {"reference/index.md"}
    linked = {target for _, target in _LINK.findall((DOCS / "index.md").read_text("utf-8"))}
    assert pages - {"index.md"} <= linked, sorted(pages - {"index.md"} - linked)


def test_strict_build_fails_on_an_unresolved_reference(tmp_path: Path) -> None:
    """Under pride's mkdocs configuration a docstring cross-reference to nothing fails."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Index\n\n::: sample\n", encoding="utf-8")
    (tmp_path / "sample.py").write_text(
        '"""A module."""\n\n\ndef f() -> None:\n'
        '    """Calls [`g`][sample.g], which exists, and [`h`][sample.h], which does not."""\n\n\n'
        'def g() -> None:\n    """Exists."""\n',
        encoding="utf-8",
    )
    config = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    config.update(nav=["index.md"], extra_css=[], site_dir=str(tmp_path / "site"))
    plugins = config["plugins"]
    handler = next(p for p in plugins if isinstance(p, dict) and "mkdocstrings" in p)
    python = handler["mkdocstrings"]["handlers"]["python"]
    python["paths"] = [str(tmp_path)]
    # Griffe extensions given by path are found beside the config: point at pride's.
    options = python["options"]
    options["extensions"] = [str(ROOT / ext) for ext in options.get("extensions", ())]
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""},
    )
    assert build.returncode != 0, build.stderr
    assert "sample.h" in build.stderr
    assert "sample.g" not in build.stderr


def test_the_cli_manual_says_what_a_user_does_not_what_was_measured() -> None:
    """Issue 35, item 6: docs/cli.md is a manual; figures with the commit they were
    measured on, and profiling notes, belong in docs/benchmarks.md."""
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    measured = re.findall(r"\bmain [0-9a-f]{7,}\b|\d\s*µs|requests/s|cProfile", text)
    assert not measured, measured


def test_the_readme_leads_with_what_a_user_gets_then_the_two_commands() -> None:
    """Issue 35, item 8: the first paragraph says what pride is for (a team that runs
    concurrently, never corrupts a conversation, survives crashes, is served to other
    programs); ``make demo`` and ``make test`` come next, before how it is built."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first, commands, *_ = text.split("\n\n")[1:]
    for promise in ("team", "concurrently", "corrupts", "restarted", "served"):
        assert promise in first, first
    assert "actor" not in first and "trio" not in first, first
    assert "make demo" in commands and "make test" in commands, commands
