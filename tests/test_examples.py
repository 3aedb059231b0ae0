"""Every example in examples/ runs to completion as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: Path) -> None:
    """The example exits 0 and prints something."""
    # Examples must run on the embedded scripted model, whatever the developer's
    # environment configures (a real model here would make calls and cost money).
    env = {k: v for k, v in os.environ.items() if k != "PRIDE_CHAT_MODEL"}
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
