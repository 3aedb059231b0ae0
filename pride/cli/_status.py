"""What ``pride run`` shows of the running tree: turns in flight, usage, a live status line."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import trio
from rich.console import Console
from rich.text import Text

from ..messages import BranchStopped, RunEnd, RunFailed, RunStart, Signal, Usage
from ..supervisors import Session

__all__ = ["REFRESH_INTERVAL", "StatusLine", "TurnsInFlight", "describe_usage", "turns_in_flight"]

REFRESH_INTERVAL = 0.5
"""Seconds between two redraws of the status line."""


def turns_in_flight(session: Session) -> list[str]:
    """The branches of the tree (this session and those below) running a turn now.

    It walks the whole tree (O(branches)); a process that observes the tree's
    signals keeps the same list at O(1) per turn with `TurnsInFlight`.
    """
    names = [branch.name for branch in session.branches if branch.active_turn_id is not None]
    for child in session.sessions:
        names.extend(turns_in_flight(child))
    return names


class TurnsInFlight:
    """The branches running a turn now, kept from the signals the turns emit.

    The problem: ``pride run`` logs, for every finished turn, the branches
    still running one, and walking the tree for that (`turns_in_flight`) costs
    O(branches) per turn: with 100 branches, a fifth of the process's time
    in a cProfile of it. The signals say when turns start and end, and the process
    observes them anyway, so this follows them: a turn is added at its
    ``RunStart`` and removed at its terminal (``RunEnd``, or ``RunFailed`` and
    its ``RunSuspended``), O(1) each, and `names` costs what it lists.

    With a store a turn's terminal waits for its commit, and a group commit
    ends a whole batch of turns at once: listing those (done running, waiting
    only for the disk) in each other's records would make every record
    O(batch), that is O(branches) again. So a turn is listed while its branch
    is still running it (``branch.active_turn_id``, the same test
    `turns_in_flight` makes); one seen done is dropped then. A turn's branch
    is looked up the first time the turn is listed, not at its start: most
    turns (all, on a fast model) end before anything lists them.

    A turn whose terminal never comes (a fault of the runtime itself crashed
    its actor mid-turn) is dropped when its branch's ``BranchStopped`` comes.

    Args:
        branch: the branch of a turn, by branch id (None when unknown: the
            turn is then listed until its terminal).

    Subscribe `observe` to `SIGNALS` on the root session: child sessions'
    signals come up the tree to it.
    """

    SIGNALS: tuple[type[Signal], ...] = (RunStart, RunEnd, RunFailed, BranchStopped)
    """The signal classes `observe` needs to see."""

    def __init__(self, branch: Callable[[UUID | None], Any] | None = None) -> None:
        self._branch = branch
        # turn id -> _Turn, in the order the turns started. A branch runs one
        # top-level turn at a time, but with a store its next one starts before
        # the last one's terminal (sent after the commit).
        self._turns: dict[UUID | None, _Turn] = {}

    def observe(self, signal: Signal) -> None:
        """Follow one signal (others than `SIGNALS` are ignored)."""
        if isinstance(signal, RunStart):
            name = signal.branch_name or str(signal.branch_id)
            self._turns[signal.turn_id] = _Turn(signal.branch_id, name)
        elif isinstance(signal, RunEnd | RunFailed):
            self._turns.pop(signal.turn_id, None)
        elif isinstance(signal, BranchStopped):
            for stale in [
                t for t, turn in self._turns.items() if turn.branch_id == signal.branch_id
            ]:
                del self._turns[stale]

    def names(self) -> list[str]:
        """The branches running a turn now, each once, in the order their turns started."""
        if not self._turns:
            return []
        running: dict[str, None] = {}
        done = []
        for turn_id, turn in self._turns.items():
            if turn.branch is None:
                found = self._branch(turn.branch_id) if self._branch is not None else None
                turn.branch = _UNKNOWN if found is None else found
            if turn.branch is not _UNKNOWN and turn.branch.active_turn_id != turn_id:
                done.append(turn_id)  # it has run; its terminal follows its commit
            else:
                running[turn.name] = None
        for turn_id in done:
            del self._turns[turn_id]
        return list(running)


class _Turn:
    """A turn in flight: its branch's id and name, and the branch once looked up."""

    __slots__ = ("branch", "branch_id", "name")

    def __init__(self, branch_id: UUID | None, name: str) -> None:
        self.branch_id = branch_id
        self.name = name
        self.branch: Any = None


_UNKNOWN = object()  # a branch looked up and not found: list its turn until its terminal


def describe_usage(usage: Usage) -> str:
    """``"1,234 tokens (1,000 in, 234 out), $0.0123"`` (the cost only when known)."""
    total = usage.input_tokens + usage.output_tokens
    text = f"{total:,} tokens ({usage.input_tokens:,} in, {usage.output_tokens:,} out)"
    if usage.cost_usd is not None:
        text += f", ${usage.cost_usd:.4f}"
    return text


class StatusLine:
    """A one-line summary of the tree on the terminal's bottom row, redrawn while shown.

    The problem: ``pride run`` on a terminal shares it with the person typing
    requests, with the log lines and with the answers. A redrawn line at the
    cursor (what rich's ``Live`` draws) catches the typed characters' echo,
    is erased with them on the next redraw, and leaves stale copies behind
    every answer line. The choice is what apt's progress bar does: reserve
    the bottom row with a scrolling region (DECSTBM), so typed input, logs and
    answers scroll in the rows above while the status row is drawn in place
    behind a saved cursor, untouched by the echo. Leaving restores the whole
    screen and clears the row.

    Args:
        session: the root session (``statistics()`` and ``usage`` cover the whole tree).
        console: a rich console on standard error (a terminal).
        running: the branches running a turn now (default: `turns_in_flight`
            of ``session``; ``pride run`` passes its `TurnsInFlight`'s ``names``).
    """

    def __init__(
        self,
        session: Session,
        console: Console,
        running: Callable[[], list[str]] | None = None,
    ) -> None:
        self.session = session
        self.console = console
        self._running = running or (lambda: turns_in_flight(session))
        self.state = "serving"
        self._started = time.monotonic()

    def render(self) -> Text:
        """The current line."""
        stats = self.session.statistics()
        usage = self.session.usage  # counted as calls happen: turns in flight included
        running = self._running()
        elapsed = int(time.monotonic() - self._started)
        hours, rest = divmod(elapsed, 3600)
        line = Text()
        line.append("pride run ", style="bold")
        line.append(self.state, style="green" if self.state == "serving" else "yellow")
        line.append(
            f"  branches {stats.running}/{stats.branches}"
            f"  queued {stats.queued}"
            f"  turns {stats.turns_done} done, {stats.turns_failed} failed"
        )
        if running:
            line.append(f", {len(running)} running ({', '.join(running)})", style="cyan")
        line.append(f"  tokens {usage.input_tokens + usage.output_tokens:,}")
        if usage.cost_usd is not None:
            line.append(f"  ${usage.cost_usd:.4f}")
        line.append(f"  up {hours:d}:{rest // 60:02d}:{rest % 60:02d}")
        return line

    async def run(self) -> None:
        """Show the line until cancelled; the rows above scroll as usual.

        Nothing is shown on a terminal that cannot move the cursor (``TERM=dumb``)
        or has fewer than two rows. Cancellation clears the row and gives the
        whole screen back to scrolling (synchronous writes, so no checkpoint
        can interrupt them).
        """
        if self.console.is_dumb_terminal:
            return
        reserved = 0
        try:
            while True:
                columns, rows = self._size()
                if rows < MIN_ROWS:
                    if reserved:
                        self._write(_release(reserved))
                        reserved = 0
                elif rows != reserved:
                    # First draw, or the terminal was resized: (re)reserve the bottom row.
                    self._write((_release(reserved) if reserved else "") + _reserve(rows))
                    reserved = rows
                if reserved:
                    self._write(_draw(reserved, self._ansi(columns)))
                await trio.sleep(REFRESH_INTERVAL)
        finally:
            if reserved:
                self._write(_release(reserved))

    def _size(self) -> tuple[int, int]:
        # rich's size: the terminal's, where ``COLUMNS``/``LINES`` do not say
        # otherwise, and 80x25 where the terminal reports none (a fresh pty).
        size = self.console.size
        return size.width, size.height

    def _ansi(self, columns: int) -> str:
        """The line rendered for the terminal: colours, and cut to fit one row."""
        line = self.render()
        line.truncate(max(columns - 1, 1), overflow="ellipsis")
        with self.console.capture() as captured:
            self.console.print(line, end="", soft_wrap=True, highlight=False)
        return captured.get()

    def _write(self, sequence: str) -> None:
        # One write per frame, so nothing else on the terminal lands inside a
        # half-written escape sequence.
        try:
            self.console.file.write(sequence)
            self.console.file.flush()
        except OSError:  # the terminal went away: nothing to show on
            pass


#: Rows a terminal needs for a status row below at least one scrolling row.
MIN_ROWS = 2

_SAVE, _RESTORE = "\x1b7", "\x1b8"  # DECSC / DECRC: cursor position and attributes


def _reserve(rows: int) -> str:
    """Keep the cursor off the bottom row, then let only the rows above it scroll.

    Index (ESC D) moves down a row, scrolling when at the bottom, and keeps
    the column, so a half-typed line is not broken; setting the margins homes
    the cursor, hence the save and restore around it.
    """
    return f"\x1bD\x1b[1A{_SAVE}\x1b[1;{rows - 1}r{_RESTORE}"


def _draw(rows: int, line: str) -> str:
    return f"{_SAVE}\x1b[{rows};1H\x1b[2K{line}\x1b[0m{_RESTORE}"


def _release(rows: int) -> str:
    """Clear the status row and let the whole screen scroll again."""
    return f"{_SAVE}\x1b[{rows};1H\x1b[2K\x1b[r{_RESTORE}"
