"""Lines from standard input, read without blocking the event loop.

Standard input may be a pipe, a pseudo-terminal, a regular file or
``/dev/null``; trio's ``FdStream`` cannot wait on regular files, so every
read runs in a worker thread (``trio.to_thread``), the one place pride uses a
thread for blocking I/O. The thread calls ``os.read`` on the raw descriptor
rather than ``sys.stdin.readline``: an abandoned read then holds no
interpreter-level buffer lock, so the process can exit while it is blocked.
The lines are cut by pride's one bounded splitter (`pride._lines.LineSplitter`),
at LF: a CR before it is dropped with it, a lone CR stays in its line.
"""

from __future__ import annotations

import os

import trio

from .._lines import LineSplitter, LineTooLong

__all__ = ["MAX_LINE", "READ_SIZE", "LineReader", "LineTooLong"]

READ_SIZE = 65536
"""Bytes asked of ``os.read`` at a time."""

MAX_LINE = 16 * 1024 * 1024
"""The longest line read (16 MiB: an instruction with a few images as data URLs).
Without a bound, one line with no newline would grow the buffer until memory ran out."""


class LineReader:
    """Read ``\\n``-terminated lines from a file descriptor (standard input by default).

    Args:
        fd: the descriptor to read.
        max_line: the longest line, in bytes (without its newline; the CR of a
            CRLF counts).
    """

    def __init__(self, fd: int = 0, max_line: int = MAX_LINE) -> None:
        self._fd = fd
        self._lines = LineSplitter(max_line, ends="lf")
        self._eof = False

    async def readline(self) -> str | None:
        """The next line without its line ending, or None at end of input.

        A last line without a newline is returned as a line. Bytes that are
        not UTF-8 are replaced (U+FFFD).

        Raises:
            OSError: the descriptor cannot be read.
            LineTooLong: the line is longer than ``max_line``. It is raised as
                soon as that is known, and the rest of the line is discarded as
                it arrives (never buffered); the next call reads the next line.

        Cancellation: the blocked read is abandoned (its thread finishes on
        its own) and whatever it would have returned is lost, so cancel a
        reader only when you stop reading for good.
        """
        while True:
            line = self._lines.next_line()
            if line is not None:
                return _decode(line)
            if self._eof:
                rest = self._lines.end()
                return None if rest is None else _decode(rest)
            data = await self._read()
            if data:
                self._lines.feed(data)
            else:
                self._eof = True

    async def _read(self) -> bytes:
        """The next bytes the descriptor has (``b""`` at its end), read in a worker thread."""
        return await trio.to_thread.run_sync(os.read, self._fd, READ_SIZE, abandon_on_cancel=True)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")
