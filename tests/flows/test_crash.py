"""Issue 21, done-when: a flow killed (``kill -9``) mid-way resumes in a new process
without rerunning its finished nodes, counted in a file (`tests.flows.crash_app`).

Killed mid-turn (in the writer's tool hook), the resumed process runs no
model call again that finished before: ``research`` comes from the flow
journal, ``draft``'s first model call from the turn journal (its turn is
resumed with its branch, and the flow waits for that turn instead of sending
the node again), and only the work after the kill point runs, once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.cli.driver import ROOT, cli_env

TIMEOUT = 30.0


async def _run(directory: Path, run: int, **env: str) -> tuple[int, dict[str, Any] | None]:
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            [sys.executable, "-m", "tests.flows.crash_app", str(directory), str(run)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=cli_env(**env),
        )
    lines = [line for line in done.stdout.decode().splitlines() if line.strip()]
    return done.returncode, json.loads(lines[-1]) if lines else None


def _calls(directory: Path) -> list[tuple[int, str]]:
    text = (directory / "calls.jsonl").read_text()
    return [(int(r["run"]), r["call"]) for r in map(json.loads, text.splitlines())]


DONE = {"research": "completed", "draft": "completed", "review": "completed"}


@pytest.mark.parametrize(
    ("kill", "first", "second"),
    [
        (
            "hook",
            ["researcher", "writer:plan"],
            ["tool:lookup", "writer:analyse", "writer:answer", "critic"],
        ),
        (
            "critic",
            ["researcher", "writer:plan", "tool:lookup", "writer:analyse", "writer:answer"],
            ["critic"],
        ),
        (
            # Between the node's turn commit and the flow's own record of the outcome.
            "committed",
            ["researcher"],
            ["writer:plan", "tool:lookup", "writer:analyse", "writer:answer", "critic"],
        ),
    ],
    ids=["mid-turn", "between-nodes", "after-the-turn-s-commit"],
)
async def test_issue21_a_killed_flow_resumes_without_rerunning_finished_nodes(
    tmp_path: Path, kill: str, first: list[str], second: list[str]
) -> None:
    status, printed = await _run(tmp_path, 1, PRIDE_TEST_KILL=kill)
    assert status == -9 and printed is None
    assert _calls(tmp_path) == [(1, call) for call in first]

    status, printed = await _run(tmp_path, 2)
    assert status == 0 and printed is not None
    assert printed["resumed"] is True and printed["left"] == 0
    assert printed["outcomes"] == DONE
    assert printed["results"]["draft"] == "a draft on the facts"
    # every call exactly once over both processes: none repeated after the restart
    assert _calls(tmp_path) == [(1, call) for call in first] + [(2, call) for call in second]
