"""``pride run APP --cluster ADDRESS``: the demo team placed on a Ray cluster, as a real process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]


async def test_pride_run_places_the_demo_team_on_a_cluster(
    ray_address: str, tmp_path: Path
) -> None:
    """Requests by name reach branches in host processes; every request gets its answer.

    With ``--store`` the hosts keep their stores beside it (never in a shared
    temporary directory another run or pride version may have left files in).
    """
    requests = [
        {
            "id": "r1",
            "to": "critic",
            "command": {"type": "ChatAndRecord", "instruction": "a draft"},
        },
        {"id": "r2", "to": "planner", "command": {"type": "Chat", "instruction": "a plan?"}},
        {"id": "r3", "to": "nobody", "command": {"type": "Chat", "instruction": "?"}},
        {  # a request's budget would replace the host branch's, unseen here: refused
            "id": "r4",
            "to": "critic",
            "command": {"type": "Chat", "instruction": "?", "budget": {"max_model_calls": 9}},
        },
    ]
    stdin = "".join(json.dumps(request) + "\n" for request in requests).encode()
    command = [sys.executable, "-m", "pride.cli", "run", "examples/demo.py:spawn_team"]
    command += ["--cluster", ray_address, "--exit-on-eof", "--no-status"]
    # TMPDIR too, so that nothing of this run lands in the shared temporary directory.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command += ["--store", str(tmp_path / "run.db")]
    with trio.fail_after(120):
        done = await trio.run_process(
            command,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            cwd=ROOT,
            check=False,
            env=env,
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    answers = {line["id"]: line for line in map(json.loads, done.stdout.decode().splitlines())}
    assert answers["r1"]["ok"] is True and answers["r1"]["result"].startswith("Strong:")
    assert answers["r2"]["ok"] is True
    assert answers["r3"]["ok"] is False and answers["r3"]["error"]["type"] == "UnknownBranch"
    assert answers["r4"]["ok"] is False and answers["r4"]["error"]["type"] == "InvalidMessage"
    assert "Chat.budget" in answers["r4"]["error"]["message"]
    assert "placing branches on" in done.stderr.decode()
    host_stores = sorted((tmp_path / "run.db.hosts" / "pride-run").glob("*/branches.db"))
    assert host_stores, "the hosts' stores live beside --store"
