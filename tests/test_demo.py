"""``make demo``: colour and rich layout on a terminal, plain lines through a pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.terminal import TIMEOUT, Terminal

ROOT = Path(__file__).resolve().parent.parent
DEMO = [sys.executable, str(ROOT / "examples" / "demo.py")]

# A real model, a forced or refused colour mode or a fixed size from the
# developer's shell (or pytest-xdist's COLUMNS/LINES) would change the output.
ENV = {
    k: v
    for k, v in os.environ.items()
    if k not in {"PRIDE_CHAT_MODEL", "COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TERM"}
}


@pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
async def test_on_a_terminal_the_demo_uses_colour_and_panels() -> None:
    """The team is drawn as a tree in a panel, each agent in its colour, the answer in a panel."""
    async with Terminal.run(DEMO, rows=60, columns=100, env=ENV, cwd=ROOT) as term:
        await term.drain()
        with trio.fail_after(TIMEOUT):
            assert await term.process.wait() == 0
    rows = term.rows
    text = "\n".join(rows)
    assert rows[0].startswith("╭") and "pride demo" in rows[0]
    assert "└── planner" in text
    assert any(row.startswith("╭─ planner") for row in rows), text  # the answer's panel
    assert "What you gain" in text
    # Each agent's name in its own colour.
    for name, colour in (("researcher", "green"), ("critic", "magenta")):
        (y,) = [y for y, row in enumerate(rows) if row.lstrip().startswith(f"{name}: ")]
        x = rows[y].index(name)
        assert term.screen.buffer[y][x].fg == colour, (name, term.screen.buffer[y][x])


def test_through_a_pipe_the_demo_prints_plain_lines() -> None:
    """No escape sequences and no box drawing when standard output is not a terminal."""
    done = subprocess.run(DEMO, capture_output=True, text=True, timeout=60, check=False, env=ENV)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    assert "╭" not in done.stdout
    assert "\nplanner: Brief:" in done.stdout
    assert "researcher calls search_notes(" in done.stdout


def test_a_model_pride_cannot_use_is_one_line() -> None:
    """``PRIDE_CHAT_MODEL=nosuch/model make demo``: the reason in one line, no traceback."""
    env = {**ENV, "PRIDE_CHAT_MODEL": "nosuch/model"}
    done = subprocess.run(DEMO, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 1
    assert not done.stdout, done.stdout
    (line,) = done.stderr.splitlines()
    assert line.startswith("demo: PRIDE_CHAT_MODEL=nosuch/model: unknown provider 'nosuch'"), line
