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


def test_every_python_claimed_is_proven() -> None:
    """The versions the classifiers claim are those CI runs the suite on: `make test`'s
    interpreter (the lowest, requires-python's floor) and `make versions`' others, which
    `.ci/run` runs after it. A version claimed but not run is a claim nobody checks."""
    classifiers = PYPROJECT["project"]["classifiers"]
    claimed = [c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r".* :: 3\.\d+", c)]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    first = re.search(r"^PYTHON \?= \$\(shell command -v python(3\.\d+) ", makefile, re.M)
    others = re.search(r"^OTHER_PYTHONS := (.+)$", makefile, re.M)
    assert first is not None and others is not None
    assert claimed == [first.group(1), *others.group(1).split()]
    assert PYPROJECT["project"]["requires-python"] == f">={claimed[0]}"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-2:] == ["make test", "make versions"]
