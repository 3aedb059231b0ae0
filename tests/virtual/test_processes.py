"""Virtual branches across processes: request lines of a real ``pride run``, and a
conversation that outlives a ``kill -9`` between turns."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from pride import BranchActivated, ChatAndRecord, Session
from pride.store import BranchStore
from tests.cli.driver import ROOT, cli_env
from tests.helpers import Recorder
from tests.serve.conftest import start_server
from tests.virtual.app import for_user

TIMEOUT = 60.0


async def _line(child: subprocess.Popen[str]) -> str:
    """The child's next stdout line (bounded: a hung child fails the test, then is killed)."""
    assert child.stdout is not None
    with trio.fail_after(TIMEOUT):
        return await trio.to_thread.run_sync(child.stdout.readline, abandon_on_cancel=True)


async def test_request_lines_of_pride_run_activate_virtual_branches(tmp_path: Path) -> None:
    """`pride run` answers request lines to kind/key names it never spawned, in order."""
    store = tmp_path / "store.db"
    lines = [
        json.dumps(
            {"id": f"r{i}", "to": name, "command": {"type": "ChatAndRecord", "instruction": text}}
        )
        for i, (name, text) in enumerate(
            [("user/ada", "one"), ("user/bo", "hi"), ("user/ada", "two"), ("user/", "bad")]
        )
    ]
    command = [sys.executable, "-m", "pride.cli", "run", "tests.virtual.app:build"]
    command += ["--store", str(store), "--exit-on-eof", "--no-status"]
    with trio.fail_after(TIMEOUT):
        done = await trio.run_process(
            command,
            stdin="".join(line + "\n" for line in lines).encode(),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=cli_env(),
        )
    assert done.returncode == 0, done.stderr.decode()
    answers = {a["id"]: a for a in map(json.loads, done.stdout.decode().splitlines())}
    assert answers["r0"] == {"id": "r0", "ok": True, "result": "answer 1 to one"}
    assert answers["r1"] == {"id": "r1", "ok": True, "result": "answer 1 to hi"}
    assert answers["r2"] == {"id": "r2", "ok": True, "result": "answer 2 to two"}
    assert answers["r3"]["ok"] is False and answers["r3"]["error"]["type"] == "UnknownBranch"
    async with BranchStore(store, read_only=True) as read:
        assert [m.text for m in await read.load_messages("user/ada")] == [
            "You help ada.",
            "one",
            "answer 1 to one",
            "two",
            "answer 2 to two",
        ]


async def test_history_survives_a_kill_9_between_turns(tmp_path: Path) -> None:
    """A process killed with SIGKILL after a turn leaves that turn in the store; a new
    process activates the name with it."""
    store = tmp_path / "store.db"
    with subprocess.Popen(
        [sys.executable, "-m", "tests.virtual.app", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env=cli_env(),
        text=True,
    ) as child:
        try:
            assert child.stdin is not None
            assert (await _line(child)).strip() == "ready"
            for text in ("first", "second"):
                child.stdin.write(text + "\n")
                child.stdin.flush()
                answered = await _line(child)
                assert answered.startswith("answer"), answered
            child.send_signal(signal.SIGKILL)  # between turns: no shutdown, no passivation
            status = await trio.to_thread.run_sync(child.wait, abandon_on_cancel=True)
            assert status == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    async with Session(store=store) as session:
        seen = Recorder()
        session.observe(BranchActivated, handler=seen.dispatch)
        await session.virtual("user", for_user)
        assert await session.ask("user/ada", ChatAndRecord("third")) == "answer 3 to third"
        assert seen.of(BranchActivated)[0].restored is True
        texts = [m.text for m in session.get_branch("user/ada").messages]
        assert texts[1::2] == ["first", "second", "third"]


async def test_requests_of_pride_serve_activate_virtual_branches(tmp_path: Path) -> None:
    """`pride serve` answers an ask to a kind/key name (its slash URL-encoded) by
    activating it, and the OpenAI endpoint takes it as a model name."""
    store = tmp_path / "store.db"
    with start_server(tmp_path, "--store", str(store), app="tests/virtual/app.py:build") as served:
        async with httpx.AsyncClient(base_url=served.url, headers=served.headers()) as http:
            command = {"type": "ChatAndRecord", "instruction": "one"}
            asked = await http.post("/v1/branches/user%2Fada/ask", json={"command": command})
            assert asked.status_code == 200, asked.text
            assert asked.json()["result"] == "answer 1 to one"
            page = await http.get("/v1/branches/user%2Fada/messages")
            assert page.status_code == 200 and len(page.json()["messages"]) == 3
            missing = await http.post("/v1/branches/user%2F/ask", json={"command": command})
            assert missing.status_code == 404
    async with BranchStore(store, read_only=True) as read:
        assert [m.text for m in await read.load_messages("user/ada")][1:] == [
            "one",
            "answer 1 to one",
        ]
