"""Issue 30: the signal wake-up fd a team sets where the host set none, and gives back.

While a team is open, a signal wakes the loop even where the host set no wake-up
fd (ipykernel's interrupt depends on it: tests/aio/test_jupyter.py). A wake-up fd
the host set itself is the host's: the team neither takes it nor clears it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

import pride.aio
from pride import Chat

from .kit import DEADLINE, branch, run

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _wakeup_fd() -> int:
    """The signal wake-up fd now set (-1: none), leaving it set."""
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


def test_a_team_sets_a_wakeup_fd_where_there_was_none_and_clears_it_when_it_closes() -> None:
    seen: list[int] = []

    async def main() -> None:
        seen.append(_wakeup_fd())
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))
            seen.append(_wakeup_fd())
            assert await team.ask("echo", Chat("hi")) == "HI"
        seen.append(_wakeup_fd())

    run(main)
    assert seen[0] == -1 and seen[2] == -1, seen
    assert seen[1] != -1, seen


def test_the_hosts_own_wakeup_fd_stays_the_hosts_and_its_signals_still_come() -> None:
    fds: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        fired = asyncio.Event()
        # asyncio's own signal handling sets the wake-up fd to the loop's self-pipe.
        loop.add_signal_handler(signal.SIGUSR1, fired.set)
        try:
            fds.append(_wakeup_fd())
            async with pride.aio.open_session() as team:
                await team.spawn(branch("echo"))
                fds.append(_wakeup_fd())
                assert await team.ask("echo", Chat("hi")) == "HI"
            fds.append(_wakeup_fd())
            os.kill(os.getpid(), signal.SIGUSR1)  # asyncio reads it from its fd, or never
            await asyncio.wait_for(fired.wait(), DEADLINE)
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)

    run(main)
    assert fds[0] != -1 and fds == [fds[0]] * 3, fds


def test_under_uvloop_its_own_wakeup_fd_stays() -> None:
    uvloop = pytest.importorskip("uvloop")  # where it installs (CPython, not Windows)
    fds: list[int] = []

    async def main() -> str:
        fds.append(_wakeup_fd())
        async with pride.aio.open_session() as team:
            await team.spawn(branch("echo"))
            fds.append(_wakeup_fd())
            answer: str = await team.ask("echo", Chat("uv"))
        fds.append(_wakeup_fd())
        return answer

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(asyncio.wait_for(main(), DEADLINE)) == "UV"
    assert fds[0] != -1 and fds == [fds[0]] * 3, fds
