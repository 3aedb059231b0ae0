"""pride beside the reference system (lionagi), on the same workloads, in one run.

The reference runs in its own environment (``.bench-venv``, which ``make
bench`` creates with lionagi from PyPI; it is never a dependency of pride),
as a subprocess of this benchmark; its model call is replaced by an
immediate canned reply at the endpoint, as pride's scripted model replaces
HTTP. Workloads: turn overhead (empty history), history scaling, fan-out.
Printed as ratios: reference seconds per turn / pride seconds per turn.

Set ``PRIDE_REFERENCE_PYTHON`` to another interpreter with lionagi installed
to point elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from benchmarks._harness import measure, ratio_line
from benchmarks._workloads import branch_with_history, fan_out, scripted, turns_on
from pride import Branch

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).with_name("reference") / "lionagi_workloads.py"


def _reference_python() -> Path | None:
    configured = os.environ.get("PRIDE_REFERENCE_PYTHON")
    candidate = Path(configured) if configured else ROOT / ".bench-venv" / "bin" / "python"
    return candidate if candidate.exists() else None


def _run_reference(python: Path, smoke: bool) -> dict[str, object]:
    command = [str(python), str(SCRIPT), *(["--smoke"] if smoke else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"reference benchmark failed:\n{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


async def _pride(smoke: bool) -> dict[str, object]:
    repeats = 2 if smoke else 5
    ops = 50 if smoke else 1000
    figures: dict[str, object] = {}
    turn = await measure("turn", turns_on(Branch(chat_model=scripted())), ops=ops, repeats=repeats)
    figures["turn"] = turn.median
    history = {}
    for size in [10, 100] if smoke else [10, 100, 1000, 10000]:
        n = max(10, ops // (10 if size >= 1000 else 1))
        stats = await measure(
            "history", turns_on(branch_with_history(size)), ops=n, repeats=repeats
        )
        history[str(size)] = stats.median
    figures["history"] = history
    fans = {}
    for size in [50] if smoke else [1000]:
        stats = await measure(
            "fan", fan_out(size), ops=size * (2 if smoke else 5), repeats=2 if smoke else 3
        )
        fans[str(size)] = stats.median
    figures["fan_out"] = fans
    return figures


def main(smoke: bool) -> None:
    python = _reference_python()
    if python is None:
        print(
            "  reference system not installed here: `make bench` creates .bench-venv with "
            "lionagi (set PRIDE_REFERENCE_PYTHON to use another); skipped"
        )
        return
    reference = _run_reference(python, smoke)
    pride_figures = trio.run(_pride, smoke)
    print(f"  reference: lionagi {reference['version']} (canned model reply), via {python}")
    rows = [("turn, empty history", reference["turn"], pride_figures["turn"])]
    for size, seconds in reference["history"].items():  # type: ignore[attr-defined]
        rows.append((f"turn over {size} messages", seconds, pride_figures["history"][size]))  # type: ignore[index]
    for size, seconds in reference["fan_out"].items():  # type: ignore[attr-defined]
        rows.append((f"{size} branches concurrently", seconds, pride_figures["fan_out"][size]))  # type: ignore[index]
    for label, theirs, ours in rows:
        print(f"  {label:<32} lionagi {theirs * 1e6:10.1f} us   pride {ours * 1e6:8.1f} us")  # type: ignore[operator]
        print(ratio_line(f"lionagi / pride: {label}", theirs / ours, "(info)", True))  # type: ignore[operator]
    from benchmarks.bench_memory import probe

    theirs = reference["history_memory"]
    ours = probe("history", 200 if smoke else 4000)
    mib = 2**20
    print(
        f"  {'memory per 1,000 recorded msgs':<32} lionagi {theirs / mib:7.2f} MiB"  # type: ignore[operator]
        f"   pride {ours / mib:6.2f} MiB"  # type: ignore[operator]
    )
    if smoke or ours <= 0:
        print("  (too few messages, or no measurable growth, for a memory ratio)")
    else:
        print(ratio_line("lionagi / pride: history memory", theirs / ours, "(info)", True))  # type: ignore[operator]
    sys.stdout.flush()
