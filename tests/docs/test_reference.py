"""The API reference shows every public verb as a method with its real signature,
and no page cites what a reader cannot open (issue 35).

Read from the built site (the HTML mkdocstrings made), so what is checked is
what a reader sees: a verb bound as a class attribute renders as
``attr ... class-attribute`` with no signature, a docstring griffe could not
parse shows its ``Args:`` as a paragraph, and a design record or a private
module named in prose is a dead end for the reader.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pride
from pride.supervisors.session import Session

_HEADING = re.compile(
    r'<h\d id="(?P<id>[\w.]+)" class="doc doc-heading">\s*'
    r'<code class="doc-symbol doc-symbol-heading doc-symbol-(?P<kind>\w+)">'
)
_PARAMETER_ROW = re.compile(r'<tr class="doc-section-item">\s*<td>\s*<code>([^<]+)</code>')
_UNPARSED_SECTION = re.compile(r"<p>(Args|Arguments|Returns|Raises|Yields|Attributes):")
_ADR = re.compile(r"\bADR[- ]?\d+")
_PRIVATE_PATH = re.compile(r"\bpride(?:\.\w+)*\._[a-z]\w*")
_PRIVATE_FILE = re.compile(r"(?<![\w/.])(?:pride/[\w/]*)?_[a-z]\w*\.py\b")
# Pages about the source itself, where each file named can be opened in the repository.
_SOURCE_PAGES = {"architecture/index.html", "contributing/index.html"}

# The classes whose every method is a verb a user calls.
_FACADES: tuple[type, ...] = (pride.Branch, Session)


def _pages(site: Path) -> dict[str, str]:
    return {
        str(page.relative_to(site)): page.read_text(encoding="utf-8")
        for page in sorted(site.rglob("*.html"))
    }


def _text(page: str) -> str:
    """What a reader reads: no scripts, no markup (titles and tooltips aside)."""
    page = re.sub(r"<script.*?</script>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _resolve(path: str) -> Any:
    """The object a reference heading documents (``pride.x.y.Class.name``)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            try:
                found = inspect.getattr_static(found, name)
            except AttributeError:  # an attribute each instance sets: data, not a routine
                return None
        return found
    raise LookupError(path)


def _headings(pages: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """Each documented object's heading: id -> (page, kind, its section of the page)."""
    found = {}
    for name, page in pages.items():
        matches = list(_HEADING.finditer(page))
        for match, following in zip(matches, [*matches[1:], None], strict=False):
            end = following.start() if following is not None else len(page)
            found[match["id"]] = (name, match["kind"], page[match.start() : end])
    return found


def _methods(cls: type) -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(value)
    }


def test_every_facade_method_is_written_in_its_class() -> None:
    """No public method of Branch or Session is a function bound from another module."""
    bound = [
        f"{cls.__name__}.{name} is {method.__module__}.{method.__qualname__}"
        for cls in _FACADES
        for name, method in _methods(cls).items()
        if method.__qualname__ != f"{cls.__qualname__}.{name}"
    ]
    assert not bound, bound


def test_no_routine_renders_as_an_attribute(built_site: Path) -> None:
    """Every Python function and method the reference shows is shown as one, with a
    signature."""
    wrong = []
    for identifier, (page, kind, _section) in _headings(_pages(built_site)).items():
        if kind != "attribute":
            continue
        value = _resolve(identifier)
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        # A Python function or method shown as an attribute has lost its signature
        # and parameters. (A builtin's bound method kept as a typed attribute, as
        # ``pride.actors.turn.binding`` is, shows its type: it is one on purpose.)
        if inspect.isfunction(value) or inspect.ismethod(value):
            wrong.append(f"{page}: {identifier}")
    assert not wrong, "shown as attributes, but they are routines:\n" + "\n".join(wrong)


def test_every_facade_verb_shows_its_signature_and_parameters(built_site: Path) -> None:
    """Branch's and Session's methods are methods in the reference, each parameter of
    the signature documented in its table, and none that the signature lacks."""
    headings = _headings(_pages(built_site))
    wrong = []
    for cls in _FACADES:
        for name, method in _methods(cls).items():
            identifier = f"{cls.__module__}.{cls.__qualname__}.{name}"
            if identifier not in headings:
                wrong.append(f"{identifier}: not in the reference")
                continue
            _page, kind, section = headings[identifier]
            if kind != "method":
                wrong.append(f"{identifier}: shown as {kind}")
                continue
            parameters = [
                p.name
                for p in list(inspect.signature(method).parameters.values())[1:]
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            ]
            table = section.split('doc-section-title">Parameters:', 1)
            rows = _PARAMETER_ROW.findall(table[1].split("</table>", 1)[0]) if table[1:] else []
            documented = [row.lstrip("*") for row in rows]
            extra = set(documented) - set(inspect.signature(method).parameters)
            missing = [p for p in parameters if p not in documented]
            if missing or extra:
                wrong.append(f"{identifier}: undocumented {missing}, not in the signature {extra}")
    assert not wrong, "\n".join(wrong)


def test_every_docstring_section_is_parsed(built_site: Path) -> None:
    """No ``Args:``/``Returns:``/``Raises:`` shows as a paragraph: griffe read them all."""
    wrong = [
        f"{name}: {', '.join(sorted(set(found)))}"
        for name, page in _pages(built_site).items()
        if (found := _UNPARSED_SECTION.findall(page))
    ]
    assert not wrong, "\n".join(wrong)


def test_no_page_cites_a_design_record_or_a_private_module(built_site: Path) -> None:
    """The design records are not in this repository, and private modules have no page:
    pages describe instead of citing them."""
    wrong = []
    for name, page in _pages(built_site).items():
        text = _text(page)
        cited = set(_ADR.findall(text)) | set(_PRIVATE_PATH.findall(text))
        if name not in _SOURCE_PAGES:  # code blocks aside: an example may name its own file
            prose = _text(re.sub(r"<pre.*?</pre>", " ", page, flags=re.S))
            cited |= set(_PRIVATE_FILE.findall(prose))
        if cited:
            wrong.append(f"{name}: {', '.join(sorted(cited))}")
    assert not wrong, "\n".join(wrong)
