"""pride.tools' public face: __all__ and the home its classes claim.

(What it may import is checked with every other package's rules in
tests/test_layering.py.)"""

from __future__ import annotations

import types

import pride.tools


def test_all_lists_the_public_names() -> None:
    """pride.tools.__all__ is sorted and names exactly its public non-module attributes."""
    public = {
        name
        for name, value in vars(pride.tools).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(pride.tools.__all__) == public
    assert sorted(pride.tools.__all__) == pride.tools.__all__


def test_public_classes_claim_the_package() -> None:
    """Public classes and functions say pride.tools in their __module__ (tracebacks, docs),
    or pride for those pride exports too (``pride.Tool``)."""
    for name in ("ActionManager", "ActionOutcome", "report_progress"):
        assert getattr(pride.tools, name).__module__ == "pride.tools"
    for name in ("Tool", "tool"):
        assert getattr(pride.tools, name).__module__ == "pride"
