"""Every ``pride`` subcommand and option the pages name is one the command has.

A newcomer copies a command line from a page; one naming a subcommand that
does not exist (``pride approve``, named by docs/serve.md and
docs/reliability.md) is a dead end. The
command's own parser is the reference: its subcommands and their options.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import typer.main

from pride.cli import app

from .snippets import DOCUMENTS, ROOT, extract

#: ``pride WORD`` at the start of an inline code span: a command, as prose names it.
_INLINE = re.compile(r"`pride ([a-z][a-z-]*)")
#: Shell blocks whose lines are commands a reader types.
_SHELLS = {"sh", "bash", "console", "shell"}


def _commands() -> dict[str, set[str]]:
    """Each subcommand of ``pride`` and the options it takes (both spellings of a flag)."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    return {
        name: {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        for name, command in group.commands.items()
    }


def _shell_lines(path: Path) -> list[tuple[int, list[str]]]:
    """The ``pride ...`` command lines of a page's shell blocks, as words (a ``$ `` prompt,
    a comment and a continued line's backslash cut), with the line they start on."""
    found = []
    for block in extract(path):
        if block.lang not in _SHELLS:
            continue
        for offset, raw in enumerate(block.code.replace("\\\n", " ").splitlines()):
            # The command may follow a pipe (`printf ... | pride chat ...`).
            for part in raw.strip().removeprefix("$ ").split("|"):
                command = part.strip()
                if command.startswith("pride "):
                    found.append((block.line + offset, shlex.split(command, comments=True)))
    return found


def _where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_every_subcommand_a_page_names_exists() -> None:
    """`pride WORD` in prose and `pride WORD ...` in a shell block name a real subcommand."""
    commands = _commands()
    wrong = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in _INLINE.finditer(text):
            if match[1] not in commands:
                line = text.count("\n", 0, match.start()) + 1
                wrong.append(f"{_where(path, line)}: {match[0]}`")
        for line, words in _shell_lines(path):
            if len(words) > 1 and not words[1].startswith("-") and words[1] not in commands:
                wrong.append(f"{_where(path, line)}: pride {words[1]}")
    known = sorted(commands)
    assert not wrong, f"no such pride subcommand (pride has {known}):\n" + "\n".join(wrong)


def test_every_option_of_a_command_line_on_a_page_exists() -> None:
    """Each ``--option`` of a ``pride SUB ...`` line in a shell block is one SUB takes."""
    commands = _commands()
    wrong = []
    for path in DOCUMENTS:
        for line, words in _shell_lines(path):
            if len(words) < 2 or words[1] not in commands:
                continue
            for word in words[2:]:
                option = word.split("=", 1)[0]
                if option.startswith("--") and option not in commands[words[1]]:
                    wrong.append(f"{_where(path, line)}: pride {words[1]} {option}")
    assert not wrong, "no such option:\n" + "\n".join(wrong)
