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

__all__ = ["READ_SIZE", "LineReader"]

READ_SIZE = 65536
"""Bytes asked of ``os.read`` at a time."""


class LineReader:
    """Read ``\\n``-terminated lines from a file descriptor (standard input by default).

    Args:
        fd: the descriptor to read.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._eof = False

    async def readline(self) -> str | None:
        """The next line without its line ending, or None at end of input.

        A last line without a newline is returned as a line. Bytes that are
        not UTF-8 are replaced (U+FFFD).

        Raises:
            OSError: the descriptor cannot be read.

        Cancellation: the blocked read is abandoned (its thread finishes on
        its own) and whatever it would have returned is lost, so cancel a
        reader only when you stop reading for good.
        """
        while True:
            index = self._buffer.find(b"\n")
            if index >= 0:
                raw = bytes(self._buffer[:index])
                del self._buffer[: index + 1]
                return _decode(raw)
            if self._eof:
                if not self._buffer:
                    return None
                raw = bytes(self._buffer)
                self._buffer.clear()
                return _decode(raw)
            data = await trio.to_thread.run_sync(
                os.read, self._fd, READ_SIZE, abandon_on_cancel=True
            )
            if data:
                self._buffer += data
            else:
                self._eof = True


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").removesuffix("\r")
