"""Writing a whole buffer to a file descriptor, from a worker thread.

`pride run`'s answers (stdout) and the log records (stderr) are written this
way, off the event loop, so a reader that stops reading blocks a thread, never
the process.
"""

from __future__ import annotations

import os
import select

__all__ = ["write_all"]


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write part of it); blocking,
    so call it in a worker thread.

    The descriptor may be non-blocking: ``pride mcp`` over stdio makes its stdout
    so, and a terminal (or ``2>&1``) shares that open file with stderr. Then a full
    pipe is waited for here, never taken for a broken reader.

    Raises:
        OSError: the descriptor cannot be written (the reader went away).
    """
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])
