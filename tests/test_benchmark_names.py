"""``python -m benchmarks NAME...`` runs the benchmarks named, and refuses a name it has none for.

Its help offered ``turn http`` as the example, and ``turn`` names no benchmark
(``bench_turns.py`` is ``turns``): the run printed the machine line and
exited 0, having measured nothing and said nothing. A real subprocess runs
the command as a reader types it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
KNOWN = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))


def _benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )


def test_a_name_no_benchmark_has_is_refused_naming_the_ones_there_are() -> None:
    """An unknown benchmark name exits 2 naming the known ones, and runs nothing."""
    done = _benchmarks("--smoke", "turn")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "'turn'" in done.stderr, done.stderr
    for name in KNOWN:
        assert name in done.stderr, done.stderr
    assert "==" not in done.stdout  # nothing ran


def test_the_help_s_example_names_benchmarks_that_exist() -> None:
    """The benchmarks' ``--help`` example names only benchmarks there are."""
    done = _benchmarks("--help")
    assert done.returncode == 0, done.stderr
    [example] = [line for line in done.stdout.splitlines() if "e.g." in line]
    named = example.split("e.g.", 1)[1].strip(" )").split()
    assert named and set(named) <= set(KNOWN), example
