"""Create a branch store in processes that die before SQL statement 1, 2, 3, ...

Run as ``python -m tests.store.crashing DIR``: it opens (so creates) a store
once to count the SQL statements that takes, through ``sqlite3``'s trace
callback; then, for each statement N, it forks a child that creates
``DIR/crash-N.db`` and exits at once (``os._exit``: no cleanup, no rollback,
as ``kill -9`` would) just before the N-th statement runs. It prints one JSON
object: ``{"statements": count, "exits": {N: exit status}}``. Forking here is
safe: this process has one thread (no event loop runs in it).

Imported by an app instead (:func:`install` with ``hold``), it makes the
process print ``holding`` to stderr and block just before the first
statement that starts with the given text, for a test to ``kill -9`` a real
``pride run`` in that window.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from typing import Any

_real_connect = sqlite3.connect
_count = 0
_crash_at = 0


def install(hold: str | None = None) -> None:
    """Trace every connection opened from now on."""

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = _real_connect(*args, **kwargs)

        def trace(statement: str) -> None:
            global _count
            _count += 1
            if _crash_at and _count == _crash_at:
                os._exit(9)
            if hold is not None and statement.lstrip().upper().startswith(hold.upper()):
                print("holding", statement, file=sys.stderr, flush=True)
                time.sleep(600)

        db.set_trace_callback(trace)
        return db

    sqlite3.connect = connect  # type: ignore[assignment]


def main() -> None:
    import json
    from pathlib import Path

    from pride.store import _file

    directory = Path(sys.argv[1])
    install()
    _file.open_writer(directory / "clean.db").close()
    statements = _count
    exits = {}
    for crash_at in range(1, statements + 1):
        child = os.fork()
        if child == 0:
            global _crash_at
            _crash_at, globals()["_count"] = crash_at, 0
            _file.open_writer(directory / f"crash-{crash_at}.db").close()
            os._exit(0)
        _, status = os.waitpid(child, 0)
        exits[crash_at] = os.waitstatus_to_exitcode(status)
    print(json.dumps({"statements": statements, "exits": exits}))


if __name__ == "__main__":
    main()
