"""The README's ``pride run`` example, run as the README gives it: the team answers.

Issue 35, item 2: the README's request to the demo's planner was a
``ChatAndRecord``, which runs no tools; the scripted planner answers with a
tool call, and the answer was ``{"id":1,"ok":true,"result":""}``. The
command line and the request are read from README.md itself, so the README
cannot drift from what works; a real ``pride run`` subprocess serves them.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.cli.driver import COMMAND, ROOT, TIMEOUT, cli_env

README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_run_command() -> list[str]:
    """The arguments after ``pride`` of the README's ``pride run`` line (its comment cut)."""
    [line] = [line for line in README.splitlines() if line.startswith("pride run ")]
    return shlex.split(line, comments=True)[1:]


def readme_request() -> dict[str, Any]:
    """The request line the README tells a reader to type into ``pride run``."""
    [request] = re.findall(r"`(\{\"id\".*?\})`", README)
    decoded: dict[str, Any] = json.loads(request)
    return decoded


def test_the_readme_s_pride_run_request_is_answered_by_the_team(tmp_path: Path) -> None:
    """The answer is not empty, and it shows the planner asking the researcher and the
    critic before its brief."""
    args = readme_run_command()
    if "--store" in args:  # the README's store file, in a place of the test's own
        args[args.index("--store") + 1] = str(tmp_path / "team.db")
    request = readme_request()
    done = subprocess.run(
        [*COMMAND, *args, "--exit-on-eof", "--no-status"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
        cwd=ROOT,
        env=cli_env(),
    )
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    answer = json.loads(line)
    assert answer["id"] == request["id"] and answer["ok"] is True, answer
    result = answer["result"]
    assert result and isinstance(result, list), answer  # the turn's messages, in order
    calls = [item["function"] for item in result if item["type"] == "ActionRequest"]
    assert calls == ["ask_researcher", "ask_critic"], calls
    outputs = [item["output"] for item in result if item["type"] == "ActionResponse"]
    assert outputs[0].startswith("The notes say: ") and outputs[1].startswith("Strong: ")
    assert result[-1]["type"] == "AssistantResponse"
    assert result[-1]["assistant_response"].startswith("Brief: "), result[-1]
