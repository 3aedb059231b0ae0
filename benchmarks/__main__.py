"""Run every ``benchmarks/bench_*.py``: ``python -m benchmarks [--smoke] [names...]``.

Each module exposes ``main(smoke: bool) -> None``, which runs its own
``trio.run`` and prints its figures. ``--smoke`` uses tiny sizes so ``make
test`` keeps the harness from rotting; it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for make test")
    parser.add_argument("names", nargs="*", help="run only these (e.g. turn http)")
    args = parser.parse_args()
    here = Path(__file__).parent
    modules = sorted(
        m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    if args.names:
        modules = [m for m in modules if m.removeprefix("bench_") in args.names]
    for name in modules:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"== {name} {'(smoke)' if args.smoke else ''}", flush=True)
        started = time.perf_counter()
        module.main(smoke=args.smoke)
        print(f"   ({time.perf_counter() - started:.1f} s)\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
