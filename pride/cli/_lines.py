"""Lines from standard input, read without blocking the event loop.

Standard input may be a pipe, a pseudo-terminal, a regular file or
``/dev/null``; trio's ``FdStream`` cannot wait on regular files, so every
read runs in a worker thread (``trio.to_thread``), the one place pride uses a
thread for blocking I/O. The thread calls ``os.read`` on the raw descriptor
rather than ``sys.stdin.readline``: an abandoned read then holds no
interpreter-level buffer lock, so the process can exit while it is blocked.
"""

from __future__ import annotations

import os

import trio

__all__ = ["MAX_LINE", "READ_SIZE", "LineReader", "LineTooLong"]

READ_SIZE = 65536
"""Bytes asked of ``os.read`` at a time."""

MAX_LINE = 16 * 1024 * 1024
"""The longest line read (16 MiB: an instruction with a few images as data URLs).
Without a bound, one line with no newline would grow the buffer until memory ran out."""


class LineTooLong(Exception):
    """A line longer than the reader's limit; its bytes were (or are being) discarded."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"line longer than {limit} bytes; ignored up to its end")
        self.limit = limit


class LineReader:
    """Read ``\\n``-terminated lines from a file descriptor (standard input by default).

    Args:
        fd: the descriptor to read.
        max_line: the longest line, in bytes (without its newline).
    """

    def __init__(self, fd: int = 0, max_line: int = MAX_LINE) -> None:
        self._fd = fd
        self._max_line = max_line
        self._buffer = bytearray()
        # Bytes before this offset are consumed lines: a read of 64 KiB holds
        # hundreds of request lines, and deleting each from the front would
        # move the rest of the buffer once per line.
        self._start = 0
        # Where the search for the line's end goes on: what is before it (from
        # _start) holds no newline, so a line trickled in small reads is searched
        # once (searched anew per read, 15 MB in reads of 100 bytes took 14 s of
        # the event loop).
        self._searched = 0
        self._eof = False
        self._skipping = False  # inside a line already reported too long

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
        buffer = self._buffer
        while True:
            start = self._start
            index = buffer.find(b"\n", self._searched)
            if self._skipping:
                if index < 0:
                    buffer.clear()
                    self._start = self._searched = 0
                else:
                    self._start = self._searched = index + 1
                    self._skipping = False
                    continue
            elif (index if index >= 0 else len(buffer)) - start > self._max_line:
                self._skipping = True
                raise LineTooLong(self._max_line)
            elif index >= 0:
                self._start = self._searched = index + 1
                return _decode(buffer[start:index])
            if self._eof:
                rest = buffer[start:]
                buffer.clear()
                self._start = self._searched = 0
                if not rest or self._skipping:
                    return None
                return _decode(rest)
            if start:  # only a partial line is left: keep it at the front
                del buffer[:start]
                self._start = 0
            self._searched = len(buffer)
            data = await self._read()
            if data:
                buffer += data
            else:
                self._eof = True

    async def _read(self) -> bytes:
        """The next bytes the descriptor has (``b""`` at its end), read in a worker thread."""
        return await trio.to_thread.run_sync(os.read, self._fd, READ_SIZE, abandon_on_cancel=True)


def _decode(raw: bytes | bytearray) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")
