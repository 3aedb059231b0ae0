"""Issue 30: Ctrl-C (SIGINT) in an asyncio program with a pride team behaves as asyncio's own.

Each program is a real subprocess (`interrupted.py`) interrupted while a turn runs. The
test waits on what the child prints (``ready`` once its turn runs), never on time; the
only clock is a hang guard.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("interrupted.py")

# A hang guard, not a speed claim: the child takes about 1 s on a quiet machine, and its
# wall-clock time is its CPU time multiplied by the machine's load (a landing runs at
# load 10+). Past the guard the child is killed and the test fails with what it printed.
HANG = 300

# Started as a terminal starts a program: SIGINT at its default disposition. A process
# started as a background job of a shell without job control (how `make test` may run)
# inherits SIGINT *ignored*, and passes that on to its children: Python then installs no
# KeyboardInterrupt handler, asyncio.run none of its own, and Ctrl-C does nothing. That
# was the "timeout under load" of a landing (issue 30): the children never saw the signal.
AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    pytest.mark.timeout(HANG + 60),  # past the guard below, which says what the child printed
]


def _interrupt(mode: str) -> tuple[int, str, str]:
    """Run ``interrupted.py mode``, send SIGINT once it prints ``ready``; its code and output."""
    with subprocess.Popen(
        [sys.executable, "-c", AS_FROM_A_TERMINAL, str(PROGRAM), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as child:
        assert child.stdout is not None
        guard = threading.Timer(HANG, child.kill)  # a hung child: readline returns at EOF
        guard.start()
        try:
            line = child.stdout.readline()
            if line == "ready\n":
                child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=HANG)
        finally:
            guard.cancel()
            child.kill()
    assert line == "ready\n", (line, out, err)
    assert child.returncode != -signal.SIGKILL, f"no exit within {HANG} s: {out!r} {err!r}"
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


def test_a_child_started_with_sigint_ignored_says_so_at_once() -> None:
    """The program refuses to run with SIGINT ignored (it could never be interrupted):
    it exits 1 with the reason instead of leaving the test to wait for its guard."""
    ignoring = AS_FROM_A_TERMINAL.replace("signal.SIG_DFL", "signal.SIG_IGN")
    result = subprocess.run(
        [sys.executable, "-c", ignoring, str(PROGRAM), "run"],
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    assert result.returncode == 1, result
    assert "SIG_IGN" in result.stderr, result.stderr
    assert "ready" not in result.stdout
