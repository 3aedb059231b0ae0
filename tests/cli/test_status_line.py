"""``pride run`` on a terminal: the live status line keeps to the bottom row.

The process runs on a real pseudo-terminal and pyte keeps the screen a person
would see (tests/terminal.py), so the test reads what is on each row.
"""

from __future__ import annotations

import os
import signal

import pytest
import trio

from tests.cli.driver import COMMAND, ROOT, cli_env
from tests.terminal import TIMEOUT, Terminal

ROWS, COLUMNS = 12, 100
STATUS = "pride run serving"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")


async def test_typed_input_and_answers_stay_off_the_status_line() -> None:
    """Typing, logs and answers scroll above; the bottom row holds the status line alone."""
    env = cli_env(PRIDE_TEST_BASE_URL="http://127.0.0.1:9/v1")
    command = [*COMMAND, "run", "tests/cli/app.py:build"]
    async with Terminal.run(command, rows=ROWS, columns=COLUMNS, env=env, cwd=ROOT) as term:
        await term.until(lambda: term.rows[-1].startswith(STATUS), "the status line")
        bottom = term.screen.buffer[ROWS - 1]
        assert bottom[0].bold and bottom[len("pride run ")].fg == "green"  # in colour
        assert "reading requests on stdin" in "".join(term.rows[:-1])

        await term.type('{"id": 1, "to": "nobody", ')
        typed = '{"id": 1, "to": "nobody",'
        await term.until(lambda: any(typed in row for row in term.rows[:-1]), "the echo")
        drawn = term.raw.count(f"\x1b[{ROWS};1H".encode())
        await term.until(
            lambda: term.raw.count(f"\x1b[{ROWS};1H".encode()) >= drawn + 2, "two redraws"
        )
        # The half-typed line survives the redraws, on its own row.
        assert any(row.startswith(typed) for row in term.rows[:-1]), term.rows
        assert term.rows[-1].startswith(STATUS) and typed not in term.rows[-1]

        await term.type('"command": {"type": "Chat", "instruction": "hi"}}\n')
        await term.until(lambda: any('"ok":false' in row for row in term.rows), "the answer")
        assert term.rows[-1].startswith(STATUS)
        # No stale copies of the status line are left in the scrolling rows.
        assert not any(STATUS in row for row in term.rows[:-1]), term.rows

        os.killpg(term.process.pid, signal.SIGINT)
        await term.drain()
        with trio.fail_after(TIMEOUT):
            assert await term.process.wait() == 0
        assert not term.rows[-1], "the status line is cleared on exit"
        # The scrolling region is given back: the whole screen scrolls again.
        assert term.screen.margins is None or term.screen.margins == (0, ROWS - 1)
