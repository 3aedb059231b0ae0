"""Running ``pride run`` on the durability app, and reading what it left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from pride.store import BranchStore
from tests.cli.driver import ROOT, cli_env
from tests.durable.app import COMMAND

TIMEOUT = 30.0
REQUEST = json.dumps({"id": "r1", "to": "agent", "command": COMMAND})


def _command(directory: Path, run: int, app: str, env: dict[str, str]) -> Any:
    environment = cli_env(PRIDE_TEST_DIR=str(directory), PRIDE_TEST_RUN=str(run), **env)
    command = [sys.executable, "-m", "pride.cli", "run", app, "--store"]
    command += [str(directory / "store.db"), "--exit-on-eof", "--no-status"]
    return command, environment


def pride_run_sync(directory: Path, run: int, lines: list[str], **env: str) -> list[Any]:
    """`pride_run` outside trio (for module-scoped fixtures); returns the answers."""
    command, environment = _command(directory, run, "tests.durable.app:build", env)
    done = subprocess.run(
        command,
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        check=True,
        cwd=ROOT,
        env=environment,
        timeout=TIMEOUT,
    )
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


def history_sync(path: Path, branch: str = "agent") -> list[tuple[str, str]]:
    """`history` outside trio."""
    return trio.run(history, path, branch)


async def pride_run(
    directory: Path, run: int, lines: list[str], *, app: str = "tests.durable.app:build", **env: str
) -> tuple[int, list[dict[str, Any]]]:
    """Run ``pride run APP --store DIR/store.db --exit-on-eof`` with ``lines`` on
    stdin; return its exit status and its answer lines."""
    command, environment = _command(directory, run, app, env)
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            command,
            stdin="".join(line + "\n" for line in lines).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=environment,
        )
    (directory / f"stderr-{run}.log").write_bytes(done.stderr)
    answers = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    return done.returncode, answers


def records(directory: Path, name: str) -> list[dict[str, Any]]:
    """The JSON lines the app wrote to ``name`` (none if it wrote nothing)."""
    path = directory / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def journal(path: Path) -> list[Any]:
    """The unfinished turns of a store, read as ``pride inspect`` would (read-only)."""
    async with BranchStore(path, read_only=True) as store:
        return await store.unfinished_turns()


async def history(path: Path, branch: str = "agent") -> list[tuple[str, str]]:
    """A stored conversation as (role, text) pairs: what two runs must agree on
    (ids and timestamps aside)."""
    async with BranchStore(path, read_only=True) as store:
        return [(message.role, message.text) for message in await store.load_messages(branch)]


def journaled_model_steps(turn: Any) -> int:
    """How many model replies a stored turn's journal holds."""
    return sum(json.loads(data)["kind"] == "model" for _, data in turn.steps)


def killed(status: int) -> bool:
    """True for an exit by SIGKILL (``kill -9``)."""
    return status == -9 or (os.name == "posix" and status == 128 + 9)
