"""``pride run`` on a terminal: the live status line keeps to the bottom row.

The process runs on a real pseudo-terminal and pyte (a VT100 emulator) keeps
the screen a person would see, so the test reads what is on each row.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import termios
from collections.abc import Callable

import pyte
import pytest
import trio

from tests.cli.driver import COMMAND, ROOT, TIMEOUT, cli_env

ROWS, COLUMNS = 12, 100
STATUS = "pride run serving"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")


class Terminal:
    """The master side of a pty, rendered into a pyte screen."""

    def __init__(self, master: int) -> None:
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self._parser = pyte.ByteStream(self.screen)
        self._stream = trio.lowlevel.FdStream(master)
        self.raw = b""

    @property
    def rows(self) -> list[str]:
        return [row.rstrip() for row in self.screen.display]

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Read output until ``condition()`` holds (bounded by the driver's timeout)."""
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

    async def _read(self) -> bool:
        """Feed the next output to the screen; False once the other side has closed."""
        try:
            data = await self._stream.receive_some()
        except (OSError, trio.BrokenResourceError):  # EIO: the process closed its side
            return False
        self.raw += data
        self._parser.feed(data)
        return bool(data)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def type(self, text: str) -> None:
        await self._stream.send_all(text.encode())

    def redraws(self) -> int:
        return self.raw.count(f"\x1b[{ROWS};1H".encode())


async def test_typed_input_and_answers_stay_off_the_status_line() -> None:
    """Typing, logs and answers scroll above; the bottom row holds the status line alone."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = cli_env(TERM="xterm-256color", PRIDE_TEST_BASE_URL="http://127.0.0.1:9/v1")
    process = await trio.lowlevel.open_process(
        [*COMMAND, "run", "tests/cli/app.py:build"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=ROOT,
        env=env,
        start_new_session=True,  # the pty becomes its controlling terminal
    )
    os.close(slave)
    term = Terminal(master)  # owns the master fd from here on
    try:
        await term.until(lambda: term.rows[-1].startswith(STATUS), "the status line")
        bottom = term.screen.buffer[ROWS - 1]
        assert bottom[0].bold and bottom[len("pride run ")].fg == "green"  # in colour
        assert "reading requests on stdin" in "".join(term.rows[:-1])

        await term.type('{"id": 1, "to": "nobody", ')
        typed = '{"id": 1, "to": "nobody",'
        await term.until(lambda: any(typed in row for row in term.rows[:-1]), "the echo")
        drawn = term.redraws()
        await term.until(lambda: term.redraws() >= drawn + 2, "two redraws")
        # The half-typed line survives the redraws, on its own row.
        assert any(row.startswith(typed) for row in term.rows[:-1]), term.rows
        assert term.rows[-1].startswith(STATUS) and typed not in term.rows[-1]

        await term.type('"command": {"type": "Chat", "instruction": "hi"}}\n')
        await term.until(lambda: any('"ok":false' in row for row in term.rows), "the answer")
        assert term.rows[-1].startswith(STATUS)
        # No stale copies of the status line are left in the scrolling rows.
        assert not any(STATUS in row for row in term.rows[:-1]), term.rows

        os.killpg(process.pid, signal.SIGINT)
        await term.drain()
        with trio.fail_after(TIMEOUT):
            assert await process.wait() == 0
        assert not term.rows[-1], "the status line is cleared on exit"
        # The scrolling region is given back: the whole screen scrolls again.
        assert term.screen.margins is None or term.screen.margins == (0, ROWS - 1)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
            await term.aclose()
