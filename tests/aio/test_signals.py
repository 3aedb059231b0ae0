"""Issue 30: Ctrl-C (SIGINT) in an asyncio program with a pride team behaves as asyncio's own.

Each program is a real subprocess (`interrupted.py`) interrupted while a turn runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("interrupted.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _interrupt(mode: str) -> tuple[int, str, str]:
    with subprocess.Popen(
        [sys.executable, str(PROGRAM), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as child:
        assert child.stdout is not None
        try:
            line = child.stdout.readline()
            assert line == "ready\n", (line, child.stderr.read() if child.stderr else "")
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=30)
        finally:
            child.kill()
    return child.returncode, line + out, err


def test_under_asyncio_run_ctrl_c_cancels_the_block_and_the_team_shuts_down() -> None:
    """asyncio.run's SIGINT handler cancels the main task: the block leaves through the
    team's shutdown (the turn gets its terminal), then asyncio.run raises KeyboardInterrupt."""
    code, out, err = _interrupt("run")
    assert "terminal TurnCancelled" in out
    assert "block left; branch running: False" in out
    assert "KeyboardInterrupt" in err
    assert code == -signal.SIGINT  # Python exits by the signal after an uncaught KeyboardInterrupt


def test_with_the_default_handler_ctrl_c_stops_trio_then_raises_keyboardinterrupt() -> None:
    """Without a handler of the host's, trio takes SIGINT (its documented guest-mode default):
    the trio side is cancelled and shut down, then KeyboardInterrupt leaves the loop."""
    code, out, err = _interrupt("plain")
    assert "loop left; branch running: False" in out
    assert "KeyboardInterrupt" in err
    assert code == -signal.SIGINT
