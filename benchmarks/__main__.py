"""Run every ``benchmarks/bench_*.py``: ``python -m benchmarks [--smoke] [names...]``.

Each module exposes ``main(smoke: bool) -> None``, which runs its own
``trio.run`` and prints its figures. ``--smoke`` uses tiny sizes so ``make
test`` keeps the harness from rotting; it asserts nothing about speed, and
its targets print as not judged.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import io
import os
import pkgutil
import platform
import sys
import time
from pathlib import Path

import trio

from benchmarks import _harness


class _Tee(io.TextIOBase):
    """Write to the terminal and keep a copy (for RESULTS.md)."""

    def __init__(self, terminal: io.TextIOBase) -> None:
        self.terminal = terminal
        self.copy = io.StringIO()

    def write(self, text: str) -> int:
        self.terminal.write(text)
        self.terminal.flush()
        return self.copy.write(text)


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            names = [
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}, trio {trio.__version__}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for make test")
    parser.add_argument("names", nargs="*", help="run only these (e.g. turns http)")
    parser.add_argument("--write-results", metavar="PATH", help="also write the output there")
    args = parser.parse_args()
    _harness.JUDGE_TARGETS = not args.smoke
    here = Path(__file__).parent
    modules = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    if args.names:
        known = [m.removeprefix("bench_") for m in modules]
        # A misspelt name would otherwise measure nothing and exit 0, silently.
        unknown = [name for name in args.names if name not in known]
        if unknown:
            named = ", ".join(map(repr, unknown))
            parser.error(f"no benchmark {named}; there are: {', '.join(known)}")
        modules = [m for m in modules if m.removeprefix("bench_") in args.names]
    tee = _Tee(sys.stdout)  # type: ignore[arg-type]
    with contextlib.redirect_stdout(tee):
        print(f"machine: {_machine()}")
        for name in modules:
            module = importlib.import_module(f"benchmarks.{name}")
            print(f"== {name} {'(smoke)' if args.smoke else ''}", flush=True)
            started = time.perf_counter()
            module.main(smoke=args.smoke)
            print(f"   ({time.perf_counter() - started:.1f} s)\n", flush=True)
    if args.write_results:
        command = " ".join(["python -m benchmarks", *sys.argv[1:]])
        Path(args.write_results).write_text(
            "# Benchmark results\n\n"
            f"Written by `make bench` ({command}) on "
            f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC.\n\n"
            f"Machine: {_machine()}.\n\n"
            "Every ratio compares figures measured in the same run; absolute times\n"
            "are for context only.\n\n```\n" + tee.copy.getvalue() + "```\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
