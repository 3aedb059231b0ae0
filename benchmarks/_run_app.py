"""The application ``bench_run`` starts with ``pride run``: scripted branches ``b0``, ``b1``, ...

How many comes from ``PRIDE_BENCH_BRANCHES`` (default 100); every branch
shares one scripted model answering each call at once, as in ``bench_durable``.
"""

from __future__ import annotations

import os

from benchmarks._workloads import scripted
from pride import Branch, Session

BRANCHES_ENV = "PRIDE_BENCH_BRANCHES"


async def spawn(session: Session) -> None:
    """Spawn the branches into the process's root session."""
    model = scripted()
    for index in range(int(os.environ.get(BRANCHES_ENV, "100"))):
        await session.spawn(Branch(name=f"b{index}", chat_model=model))
