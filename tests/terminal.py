"""A pseudo-terminal for tests: run a process on it and read the screen a person would see.

pyte (a VT100 emulator) interprets everything the process writes, cursor
movement and scrolling regions included, so a test asserts on rows and on
each character's colour rather than on escape sequences.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pyte
import trio

TIMEOUT = 20.0
"""Seconds any single wait on the terminal may take before the test fails."""


class Terminal:
    """The controlling side of a pty, rendered into a pyte screen."""

    def __init__(self, master: int, process: trio.Process, rows: int, columns: int) -> None:
        self.process = process
        self.screen = pyte.Screen(columns, rows)
        self._parser = pyte.ByteStream(self.screen)
        self._stream = trio.lowlevel.FdStream(master)  # owns the fd from here on
        self.raw = b""

    @classmethod
    @asynccontextmanager
    async def run(
        cls,
        command: Sequence[str],
        *,
        rows: int,
        columns: int,
        env: dict[str, str],
        cwd: Path,
    ) -> AsyncIterator[Terminal]:
        """Run ``command`` with a terminal of this size as stdin, stdout and stderr."""
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        try:
            process = await trio.lowlevel.open_process(
                list(command),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env={**env, "TERM": "xterm-256color"},
                start_new_session=True,  # the pty becomes its controlling terminal
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        terminal = cls(master, process, rows, columns)
        try:
            yield terminal
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    with trio.move_on_after(TIMEOUT):
                        await process.wait()
                await terminal._stream.aclose()

    @property
    def rows(self) -> list[str]:
        """The screen's rows, trailing blanks removed."""
        return [row.rstrip() for row in self.screen.display]

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Read output until ``condition()`` holds; fail showing the screen after TIMEOUT."""
        with trio.move_on_after(TIMEOUT):
            while not condition():
                if not await self._read():
                    assert condition(), f"output ended before {what}:\n" + "\n".join(self.rows)
            return
        raise AssertionError(f"no {what} after {TIMEOUT}s; the screen:\n" + "\n".join(self.rows))

    async def drain(self) -> None:
        """Read until the process closes its side of the terminal."""
        with trio.fail_after(TIMEOUT):
            while await self._read():
                pass

    async def type(self, text: str) -> None:
        """Type ``text`` as a person would (the terminal echoes it)."""
        await self._stream.send_all(text.encode())

    async def _read(self) -> bool:
        try:
            data = await self._stream.receive_some()
        except (OSError, trio.BrokenResourceError):  # EIO: the process closed its side
            return False
        self.raw += data
        self._parser.feed(data)
        return bool(data)


__all__ = ["TIMEOUT", "Terminal"]
