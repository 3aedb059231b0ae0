"""SIGINT and SIGTERM while ``pride run`` or ``pride serve`` is still starting.

The signal receiver is open from the process's first instant, but nothing
answered it until serving began: a start that hung (the app's function waiting
on a dependency) swallowed every signal, three SIGINTs included, and only
SIGKILL ended the process. The first signal now cancels the start; the
branches spawned so far are stopped and the process exits ``128 + signum``.
"""

from __future__ import annotations

import signal

import pytest

from tests.cli.driver import CLI, cli_env

STARTING = "stuck: starting, and waiting forever"


@pytest.mark.parametrize(
    ("command", "signum"),
    [
        (("run", "tests.cli.app:stuck", "--no-status"), signal.SIGTERM),
        (("run", "tests.cli.app:stuck", "--no-status"), signal.SIGINT),
        (("serve", "tests.cli.app:stuck", "--port", "0"), signal.SIGTERM),
    ],
)
async def test_a_signal_while_the_app_starts_stops_the_process(
    command: tuple[str, ...], signum: signal.Signals
) -> None:
    async with CLI.start(*command, env=cli_env(PRIDE_SERVE_TOKEN="t" * 32)) as cli:
        await cli.until(lambda: STARTING in cli.stderr, "the app to start")
        cli.process.send_signal(signum)
        assert await cli.exit_code() == 128 + signum, cli.transcript()
    record = await cli.logged("while starting")
    assert record["message"].startswith(f"{signum.name} while starting: pride {command[0]} stops")
    if command[0] == "run":  # its log names each branch's stop
        assert any(r["message"] == "branch bob stopped (shutdown)" for r in cli.logs())
