"""Google-style docstrings: a tool's description and its parameters' descriptions.

Only what a tool schema needs is read: the text before the first section
(summary and body) becomes the tool's description, and each entry of an
``Args:`` section (also ``Arguments:``, ``Parameters:``, ``Keyword Args:``...)
becomes that parameter's description. Other sections (``Returns:``,
``Raises:``, ``Examples:``...) are dropped: the model needs to know what to
pass, not how the Python function reports its result.

A full docstring parser (``docstring_parser``, griffe) would be one more
dependency for these two fields; the Google layout is regular enough to read
in a few dozen lines.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping

import attrs

__all__ = ["Docstring", "parse_docstring"]

_PARAMETER_SECTIONS = frozenset(
    {
        "args",
        "arguments",
        "parameters",
        "params",
        "keyword args",
        "keyword arguments",
        "other parameters",
    }
)
_OTHER_SECTIONS = frozenset(
    {
        "returns",
        "return",
        "yields",
        "yield",
        "raises",
        "raise",
        "examples",
        "example",
        "notes",
        "note",
        "warnings",
        "warning",
        "warns",
        "see also",
        "attributes",
        "todo",
        "references",
        "methods",
    }
)
# A section header sits at the docstring's own indentation: "Args:" alone on its line.
_HEADER = re.compile(r"(?P<name>[A-Za-z][A-Za-z ]*?)\s*:\s*")
# An entry: "name: text", "name (int): text", "*args: text", "**kwargs (str): text".
_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")


@attrs.frozen
class Docstring:
    """What a tool schema takes from a docstring."""

    description: str
    """The summary and body, without sections; ``""`` when there is no docstring."""
    parameters: Mapping[str, str]
    """Parameter name → description, from the ``Args:``-like sections."""


def parse_docstring(doc: str | None) -> Docstring:
    """Read the description and the per-parameter descriptions of a Google docstring.

    Args:
        doc: The raw docstring (as in ``__doc__``), or None.

    Returns:
        The description (text before the first section, stripped) and a mapping
        of parameter names to their descriptions (continuation lines joined with
        spaces). Stars are stripped from ``*args``/``**kwargs`` entries.
    """
    if not doc:
        return Docstring("", {})
    description: list[str] = []
    parameters: dict[str, list[str]] = {}
    section: str | None = None  # None: still in the summary/body
    entry_indent: int | None = None
    current: list[str] | None = None

    for line in inspect.cleandoc(doc).splitlines():
        header = _HEADER.fullmatch(line)
        name = header["name"].lower() if header else ""
        if header and (name in _PARAMETER_SECTIONS or name in _OTHER_SECTIONS):
            section, entry_indent, current = name, None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _PARAMETER_SECTIONS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:  # unindented prose ends the section
            section, current = "", None
            continue
        if entry_indent is None:
            entry_indent = indent
        entry = _ENTRY.fullmatch(line.strip()) if indent <= entry_indent else None
        if entry is not None:
            current = parameters.setdefault(entry["name"], [])
            current.append(entry["text"].strip())
        elif current is not None:
            current.append(line.strip())

    return Docstring(
        "\n".join(description).strip(),
        {name: " ".join(part for part in parts if part) for name, parts in parameters.items()},
    )
