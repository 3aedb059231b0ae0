"""Creating a store is atomic: a crash at any statement leaves no store or a whole one.

Each creation runs in a real process that dies (``os._exit``, as ``kill -9``
would) just before one SQL statement, for every statement in turn;
then the file must open as a pride store and take writes, in this process
and in a real ``pride run``.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from pride import Instruction
from pride.store import BranchStore
from tests.cli.driver import CLI, ROOT, TIMEOUT, cli_env, request


async def _crash_at_every_statement(directory: Path) -> dict[str, Any]:
    # One process per statement of the creation (20 of them since the flow journal):
    # a bound for a loaded machine, not a speed claim.
    with trio.fail_after(3 * TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "tests.store.crashing", str(directory)],
            cwd=ROOT,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def _usable(path: Path) -> None:
    """The file opens as a pride store, takes a branch and a message, and keeps them."""
    async with BranchStore(path) as store:
        await store.save_branch("ada", "id", {"name": "ada"}, [])
        store.append("ada", Instruction(instruction="after the crash"))
        await store.flush()
    async with BranchStore(path) as store:
        assert [m.text for m in await store.load_messages("ada")] == ["after the crash"]


async def test_issue14_a_crash_at_any_statement_of_creation_leaves_a_usable_store(
    tmp_path: Path,
) -> None:
    """Crashing before each SQL statement of a store's creation, then opening it again,
    always gives a working pride store (never "a database of another application")."""
    result = await _crash_at_every_statement(tmp_path)
    assert result["statements"] >= 3
    assert set(result["exits"].values()) == {9}  # each creation died where it was told to
    for at in result["exits"]:
        await _usable(tmp_path / f"crash-{at}.db")


async def test_issue14_kill_9_of_pride_run_while_it_creates_its_store(tmp_path: Path) -> None:
    """``pride run`` killed with SIGKILL in the middle of creating its store: the next
    ``pride run`` on that store starts, serves and persists."""
    store = tmp_path / "agents.db"
    args = ("run", "tests.store.crashing_app:build", "--store", str(store), "--no-status")
    env = cli_env(PRIDE_TEST_HOLD_SQL="INSERT INTO pride_meta")
    async with CLI.start(*args, env=env) as cli:
        await cli.until(lambda: any("holding" in line for line in cli.stderr), "the hold")
        cli.process.send_signal(signal.SIGKILL)
        assert await cli.exit_code() == -signal.SIGKILL
    async with CLI.start(*args, "--exit-on-eof", env=cli_env()) as cli:
        await cli.send(request("r1", "ada", "hello"))
        assert (await cli.answer("r1"))["ok"], cli.transcript()
        await cli.close_stdin()
        assert await cli.exit_code() == 0
    async with BranchStore(store) as opened:
        assert [m.text for m in await opened.load_messages("ada")] == ["hello", "re: hello"]
