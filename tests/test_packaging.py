"""The package metadata is in the current standard form, so building prints no deprecation."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_is_a_pep_639_expression_with_its_file() -> None:
    """``license`` is an SPDX string and ``license-files`` names files that exist (PEP 639)."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    assert project["license-files"]
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), pattern
    assert not any("License ::" in c for c in project.get("classifiers", ())), (
        "PEP 639 forbids license classifiers beside a license expression"
    )


def test_build_backend_supports_pep_639() -> None:
    """setuptools reads a license expression from 77.0 on; an older floor would accept a backend
    that rejects (or warns about) the metadata."""
    (setuptools,) = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    floor = re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", setuptools.replace(" ", ""))
    assert floor is not None, setuptools
    assert int(floor.group(1)) >= 77
