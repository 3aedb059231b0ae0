"""How often one stored ask hands control back and forth between pride's modules.

``python -m benchmarks.crossings [-v]`` runs one ``ask(branch, ChatAndRecord(...))``
on a member of a Session with a SQLite store and an observer subscribed to
``RunEnd`` (after one ask to warm it up), traced with ``sys.setprofile``.
Every Python call that enters a frame of a pride module (a coroutine resumed
counts as a call) names that module; consecutive calls into one module are
one visit. It prints:

* ``modules``: how many of pride's modules the ask crosses;
* ``returns``: how many visits go to a module the ask had already left, the
  measure of a module handing the turn back and forth (issue 32 asks for at
  most 55, from 107);
* with ``-v``, the whole walk, one module a line (docs/architecture.md walks it).

These are counts, not times: they do not move with the machine's load, so
tests/test_crossings.py holds them as a ratchet.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
import trio

from benchmarks._workloads import scripted
from pride import Branch, ChatAndRecord, RunEnd, Session, ask


@attrs.frozen
class Walk:
    """The pride modules one ask visited, in order (consecutive calls into one module
    are one visit)."""

    visits: tuple[str, ...]

    @property
    def modules(self) -> int:
        """How many distinct pride modules were visited."""
        return len(set(self.visits))

    @property
    def returns(self) -> int:
        """Visits to a module visited (and left) before."""
        seen: set[str] = set()
        returns = 0
        for module in self.visits:
            returns += module in seen
            seen.add(module)
        return returns


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if name == "pride" or name.startswith("pride.") else None


async def traced_ask() -> Walk:
    """One stored ask (see the module's docstring), traced."""
    visits: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = _module(frame)
        if module is not None and (not visits or visits[-1] != module):
            visits.append(module)

    with tempfile.TemporaryDirectory() as directory:
        async with Session(store=Path(directory, "store.db")) as session:
            ended: list[RunEnd] = []
            session.observe(RunEnd, handler=ended.append)
            branch = await session.spawn(Branch(name="traced", chat_model=scripted()))
            await ask(branch, ChatAndRecord("warm up"))
            sys.setprofile(profile)
            try:
                await ask(branch, ChatAndRecord("hello"))
            finally:
                sys.setprofile(None)
            assert len(ended) == 2, ended
    return Walk(tuple(visits))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.crossings")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the whole walk")
    args = parser.parse_args(argv)
    walk = trio.run(traced_ask)
    print(f"one stored ask: {walk.modules} modules, {walk.returns} returns to a module it had left")
    if args.verbose:
        for module in walk.visits:
            print(f"  {module}")


if __name__ == "__main__":
    main()
