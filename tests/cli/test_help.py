"""``pride --help``: flags read ``--flag / --no-flag``, options show what value they take."""

from __future__ import annotations

import subprocess

import pytest

from tests.cli.driver import COMMAND, cli_env


def _help(*args: str) -> str:
    done = subprocess.run(
        [*COMMAND, *args, "--help"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=cli_env(COLUMNS="100"),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("command", ["", "chat", "run", "inspect"])
def test_help_shows_no_type_placeholders(command: str) -> None:
    """No ``<bool>`` placeholder: a flag takes no value, an option names its own."""
    text = _help(*command.split())
    assert "<bool>" not in text
    assert "--help" in text


def test_run_help_shows_flag_pairs_and_metavars() -> None:
    """A boolean option is shown as its on/off pair; value options name what they take."""
    text = _help("run")
    assert "--status / --no-status" in text
    assert "--exit-on-eof / --no-exit-on-eof" in text
    for option in ("--store FILE", "--grace SECONDS", "--log-level LEVEL"):
        assert option in text
    assert "[default: 5.0; x>=0]" in text


@pytest.mark.parametrize("command", ["run", "mcp", "inspect"])
def test_usage_lines_name_arguments_plainly(command: str) -> None:
    """``Usage: pride run [OPTIONS] APP``: an argument by its name, never ``{APP}``."""
    usage = _help(command).splitlines()[0]
    assert usage.startswith(f"Usage: pride {command} [OPTIONS] "), usage
    assert "{" not in usage and "}" not in usage, usage


def test_the_command_list_shows_every_summary_whole() -> None:
    """``pride --help`` lists each command with a summary that is not cut short."""
    text = _help()
    commands = text.split("Commands:", 1)[1].strip().splitlines()
    assert {line.split()[0] for line in commands} >= {"chat", "run", "mcp", "inspect"}
    cut = [line for line in commands if line.rstrip().endswith("...")]
    assert not cut, cut
