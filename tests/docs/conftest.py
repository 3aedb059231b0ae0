"""The built documentation site, for the tests that read it as a reader would.

The site is built once per test run, with the project's own configuration
and ``--strict`` (a broken link or an unresolved reference fails the build,
and so the tests that need it). Under xdist the workers share one build: the
first to arrive builds it under a lock, the others wait and read it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of the site ``mkdocs build --strict`` made from this checkout."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's own directory, shared by its workers
    site = base / "docs-site"
    done = base / "docs-site.built"
    with (base / "docs-site.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build = subprocess.run(
                [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
                env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
            )
            assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stderr}"
            done.write_text("ok", encoding="utf-8")
    return site
