"""A first run without an API key says so in one line and leaves no trace in the store.

Issue 20, point 5: the README's example without a key failed after a 40-frame
traceback and left empty branches in the store. Real subprocesses, a real
store file; no request leaves the machine (a missing key fails before any).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pride.store import BranchStore
from tests.cli.driver import CLI, ROOT, TIMEOUT, cli_env

NO_KEY = "no API key for"


async def test_pride_run_an_app_failing_for_want_of_a_key_prints_one_line(tmp_path: Path) -> None:
    """Exit 2 with one plain line naming the variable to set (after the log records
    of the branch that started), no traceback; the store the failed turn ran against
    holds no branch."""
    store = tmp_path / "agents.db"
    args = ("run", "tests/cli/app.py:warm_up", "--store", str(store), "--no-status")
    async with CLI.start(*args, env=cli_env()) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    [line] = [line for line in cli.stderr if not line.startswith("{")]
    assert line == cli.stderr[-1]
    assert line.startswith("pride run: the app failed to start: AuthenticationFailed: openai: ")
    assert NO_KEY in line and "set the OPENAI_API_KEY environment variable" in line
    # The person reading this runs a command: a Python keyword is not theirs to pass.
    assert "api_key=" not in line
    assert not [line for line in cli.stderr if "Traceback" in line]
    async with BranchStore(store) as opened:
        assert await opened.branches() == []


async def test_pride_chat_without_a_key_prints_one_line_and_goes_on() -> None:
    """The REPL answers the turn with one ``error:`` line and keeps reading."""
    async with CLI.start("chat", "--model", "openai/gpt-4.1-mini", env=cli_env()) as cli:
        await cli.send("hello")
        await cli.send("/quit")
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()
    errors = [line for line in cli.stderr if NO_KEY in line]
    assert len(errors) == 1 and errors[0].startswith("error: AuthenticationFailed: openai:")
    assert errors[0].endswith("set the OPENAI_API_KEY environment variable"), errors[0]
    assert "Traceback" not in cli.transcript()
    # Nothing reached the provider, so no usage line follows the error ("[0 tokens ...]").
    assert not [line for line in cli.stdout if "tokens (" in line], cli.transcript()


def test_an_example_on_a_real_model_without_its_key_prints_one_line() -> None:
    """``PRIDE_CHAT_MODEL=openai/...`` and no key: the demo exits 1 with one stderr line."""
    env = cli_env(PRIDE_CHAT_MODEL="openai/gpt-4.1-mini")
    result = subprocess.run(
        [sys.executable, "examples/demo.py"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"demo: openai: {NO_KEY}") and "OPENAI_API_KEY" in lines[0]
