"""Every usage or startup error of every command: one plain line on stderr, exit status 2.

Issue 35, item 4: ``pride run`` and ``pride mcp`` reported theirs as JSON log
records (a process that never started has nothing to log), click printed three
lines of usage around its own, a bad ``--log-level`` ended in a traceback, and
``--expose nobody`` did not say which branches exist. Each case runs the real
``pride`` command as a subprocess; none of them reaches a model.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cli.driver import COMMAND, ROOT, TIMEOUT, cli_env

DEMO = "examples/demo.py:spawn_team"
APP = "tests.cli.app:build"


def startup_error(*args: str) -> str:
    """Run ``pride *args``; assert exit 2 and one line on stderr (and nothing on
    stdout); return that line."""
    done = subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
        cwd=ROOT,
        env=cli_env(PRIDE_TEST_BASE_URL="http://127.0.0.1:9"),
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert not done.stdout, done.stdout
    return lines[0]


CASES = {
    # click's own usage errors, as one line naming the command
    "no such command": (
        ("frobnicate",),
        "pride: ",
        ("'frobnicate'", "chat, run, mcp, serve, inspect"),
    ),
    "run: no APP": (("run",), "pride run: ", ("APP", "pride run --help")),
    "run: a bad value": (("run", APP, "--grace", "-1"), "pride run: ", ("--grace", "0")),
    "run: no such option": (("run", APP, "--stor", "x"), "pride run: ", ("--stor",)),
    "mcp: no --expose": (("mcp", DEMO), "pride mcp: ", ("--expose",)),
    # the commands' own startup errors
    "run: a malformed APP": (("run", "nosuch"), "pride run: ", ("module:function", "'nosuch'")),
    "run: no such module": (
        ("run", "no_such_module_here:build"),
        "pride run: ",
        ("cannot import 'no_such_module_here'",),
    ),
    "run: no such function": (
        ("run", "examples/demo.py:nothing"),
        "pride run: ",
        ("no function 'nothing'", "spawn_team"),
    ),
    "run: no such file": (("run", "nowhere/app.py:build"), "pride run: ", ("nowhere/app.py",)),
    "run: a bad log level": (
        ("run", APP, "--log-level", "LOUD"),
        "pride run: ",
        ("'LOUD'", "DEBUG, INFO, WARNING or ERROR"),
    ),
    "run: the app fails": (
        ("run", "tests/cli/app.py:broken"),
        "pride run: ",
        ("the app failed to start: RuntimeError: no configuration found", "--log-level DEBUG"),
    ),
    # A newcomer's first app function may take nothing; the TypeError of calling it with
    # the session read as a bug inside it (`takes 0 positional arguments but 1 was given`).
    "run: an app function that takes no session": (
        ("run", "tests/cli/app.py:takes_nothing"),
        "pride run: ",
        ("'takes_nothing'", "receives the root Session", "def takes_nothing(session)"),
    ),
    "serve: an app function that takes no session": (
        ("serve", "tests/cli/app.py:takes_nothing", "--port", "0"),
        "pride serve: ",
        ("'takes_nothing'", "receives the root Session"),
    ),
    "mcp: an app function that takes no session": (
        ("mcp", "tests/cli/app.py:takes_nothing", "--expose", "ada"),
        "pride mcp: ",
        ("'takes_nothing'", "receives the root Session"),
    ),
    "mcp: a malformed APP": (("mcp", "nosuch", "--expose", "a"), "pride mcp: ", ("'nosuch'",)),
    "mcp: not a branch": (
        ("mcp", DEMO, "--expose", "nobody"),
        "pride mcp: ",
        ("no branch 'nobody'", "researcher, critic, planner"),
    ),
    "serve: a malformed APP": (("serve", "nosuch"), "pride serve: ", ("'nosuch'",)),
    "serve: no such function": (
        ("serve", "examples/demo.py:nothing", "--port", "0"),
        "pride serve: ",
        ("no function 'nothing'", "spawn_team"),
    ),
    "serve: a bad log level": (
        ("serve", APP, "--log-level", "LOUD"),
        "pride serve: ",
        ("'LOUD'",),
    ),
    "serve: the app fails": (
        ("serve", "tests/cli/app.py:broken", "--port", "0"),
        "pride serve: ",
        ("the app failed to start: RuntimeError: no configuration found",),
    ),
    "chat: an unknown provider": (
        ("chat", "--model", "nosuch/model"),
        "pride chat: ",
        ("unknown provider 'nosuch'",),
    ),
    "chat: a malformed agent": (("chat", "--agent", "nosuch"), "pride chat: ", ("--agent",)),
    "inspect: no store": (("inspect", "no-such-store.db"), "pride inspect: ", ("no store at",)),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_a_startup_error_is_one_plain_line_and_exit_2(case: str) -> None:
    args, prefix, named = CASES[case]
    line = startup_error(*args)
    assert line.startswith(prefix), line
    assert not line.lstrip().startswith("{"), line  # not a log record
    for text in named:
        assert text in line, line


def test_a_store_that_cannot_be_used_is_one_line(tmp_path: Path) -> None:
    """A corrupt store: the line says which file and why; the file is left alone."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"not a database" * 200)
    line = startup_error("run", APP, "--store", str(path))
    assert line.startswith("pride run: cannot use the store") and "not a SQLite database" in line
    assert path.read_bytes() == b"not a database" * 200
    line = startup_error("serve", APP, "--store", str(path), "--port", "0")
    assert line.startswith("pride serve: cannot use the store") and "not a SQLite database" in line
