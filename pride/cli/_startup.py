"""How every ``pride`` command says it cannot start: one plain line on stderr, exit 2.

A usage error (an unknown command or option, a missing argument, a value
out of range: click finds those while parsing) and a startup error (an app
that cannot be imported or fails while starting, a store that cannot be
opened, a name that is not a branch, an extra that is not installed) are
reported alike by every command, those to come included:

```text
pride mcp: --expose nobody: no branch 'nobody' in app.py:team (branches: critic, planner)
```

One line, ``pride COMMAND: what is wrong``, naming what exists when a name
was wrong, on standard error; exit status 2. Not a log record (``pride run``
logs JSON lines, but a process that never started has nothing to log), not
click's usage block, and not a traceback: the message is the whole story,
and where an app's own bug is the cause, its traceback is logged at DEBUG.

A command returns `cannot_start` from where it found the problem, or raises
`CannotStart` from deeper in its startup; `pride.cli.main` turns click's
usage errors and a `CannotStart` into the same line.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._logs import say
from ._terminal import shown

__all__ = ["EXIT_USAGE", "CannotStart", "cannot_start", "listed"]

EXIT_USAGE = 2
"""The exit status of every usage or startup error (the shell's convention for misuse)."""

LISTED = 12
"""How many names `listed` shows before it says how many more there are."""


class CannotStart(Exception):
    """A command cannot start: ``command`` (``"run"``) and one line saying why.

    Raised anywhere in a command's startup; `pride.cli.main` prints it with
    `cannot_start` and exits `EXIT_USAGE`.
    """

    def __init__(self, command: str, message: str) -> None:
        self.command = command
        self.message = message
        super().__init__(message)


def cannot_start(command: str | None, message: str) -> int:
    """Print ``pride COMMAND: message`` on standard error as one line; return `EXIT_USAGE`.

    Args:
        command: the command's name (``"run"``), or None for ``pride`` itself.
        message: what is wrong. Line breaks in it (an exception's text) are
            joined into the line, and control characters made visible: names
            and messages may come from a file or an app.
    """
    prefix = "pride" if not command else f"pride {command}"
    text = " ".join(shown(message).split())
    say(f"{prefix}: {text}")
    return EXIT_USAGE


def listed(names: Iterable[str]) -> str:
    """``a, b, c`` (at most `LISTED` names, then how many more), or ``none``."""
    every = list(names)
    if not every:
        return "none"
    shown_names = ", ".join(every[:LISTED])
    more = len(every) - LISTED
    return f"{shown_names} and {more} more" if more > 0 else shown_names
