"""Memory: idle branch actors and recorded history, each measured in a fresh process.

Targets (issue 9): at most 8 KiB of resident memory per idle branch actor
beyond its messages; at most 1 MiB per 1,000 recorded short messages.
"""

from __future__ import annotations

import subprocess
import sys

from benchmarks._harness import figure_line


def probe(kind: str, count: int) -> float:
    """Bytes measured by ``benchmarks._memory_probe`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._memory_probe", kind, str(count)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return float(done.stdout.strip().splitlines()[-1])


def main(smoke: bool) -> None:
    for count in [200] if smoke else [10_000, 100_000]:
        per_branch = probe("idle", count)
        print(f"  idle branch actors: {count:>7}   {per_branch / 1024:8.2f} KiB each")
        if not smoke:
            ok = per_branch <= 8 * 1024
            print(figure_line(f"per idle branch ({count})", per_branch / 1024, "KiB", "<= 8", ok))
    messages = 200 if smoke else 10_000
    per_thousand = probe("history", messages)
    print(
        f"  recorded history: {per_thousand / 1024:8.1f} KiB per 1,000 messages "
        f"({messages} recorded by communicate turns)"
    )
    if not smoke:
        mib = per_thousand / 2**20
        print(figure_line("per 1,000 recorded messages", mib, "MiB", "<= 1", mib <= 1.0))
