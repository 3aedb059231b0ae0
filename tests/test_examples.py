"""Every example in examples/ runs: each program to completion as a real subprocess,
and each test file as tests that pytest collects and runs (not a script that
only imports them)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLE_TESTS = sorted((ROOT / "examples").glob("test_*.py"))
EXAMPLES = sorted(set((ROOT / "examples").glob("*.py")) - set(EXAMPLE_TESTS))
# A hang guard, not a speed claim: an example's cost in wall-clock time is its CPU
# time multiplied by the machine's load. examples/cluster.py starts a Ray cluster and
# two host processes (about 20 s on a quiet 2-core machine) and ran past a 120 s
# bound during a landing at load 10+; ten minutes is far from any example's real cost.
HANG = 600


@pytest.mark.timeout(HANG + 60)  # past the subprocess's own bound, which names the example
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0, prints something, and prints no traceback: a crash or a
    fault it causes on purpose is handled, and said in a line (issue 35, item 3)."""
    # Examples must run on the embedded scripted model, whatever the developer's
    # environment configures (a real model here would make calls and cost money).
    env = {k: v for k, v in os.environ.items() if k != "PRIDE_CHAT_MODEL"}
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    assert "Traceback" not in result.stderr, result.stderr


def _test_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    ]


def test_the_example_tests_are_collected_with_the_suite() -> None:
    """examples/ is a test path, so `make test` runs every test of examples/test_*.py."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "examples" in config["tool"]["pytest"]["ini_options"]["testpaths"]
    assert EXAMPLE_TESTS, "docs/testing.md's tests live in examples/test_*.py"
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "--collect-only", "examples"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    found = set(re.findall(r"^examples/(test_\w+\.py)::(\w+)$", collected.stdout, re.M))
    for path in EXAMPLE_TESTS:
        for name in _test_names(path):
            assert (path.name, name) in found, f"{path.name}::{name} is not collected"


def test_the_testing_page_shows_the_example_tests_as_they_are() -> None:
    """Each code block docs/testing.md takes from an example test file is in that file."""
    page = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    blocks = re.findall(r'```python title="fragment: from (examples/[\w.]+)"\n(.*?)```', page, re.S)
    assert blocks, "docs/testing.md quotes its examples"
    for source, code in blocks:
        assert code in (ROOT / source).read_text(encoding="utf-8"), (source, code[:200])
