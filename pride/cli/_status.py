"""What ``pride run`` shows of the running tree: a token counter and a live status line."""

from __future__ import annotations

import time

import trio
from rich.console import Console
from rich.live import Live
from rich.text import Text

from ..messages import RunEnd, Signal
from ..supervisors import Session

__all__ = ["REFRESH_INTERVAL", "StatusLine", "TokenCounter"]

REFRESH_INTERVAL = 0.5
"""Seconds between two redraws of the status line."""


class TokenCounter:
    """An observer handler summing the tokens of every finished turn (``RunEnd``)."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0

    def __call__(self, signal: Signal) -> None:
        """Add a ``RunEnd``'s usage (other signals are ignored)."""
        if isinstance(signal, RunEnd):
            self.input_tokens += signal.input_tokens
            self.output_tokens += signal.output_tokens

    @property
    def total(self) -> int:
        """Input plus output tokens so far."""
        return self.input_tokens + self.output_tokens


class StatusLine:
    """A one-line summary of the tree, redrawn on standard error while shown.

    Args:
        session: the root session (``statistics()`` covers the whole tree).
        tokens: the token counter observing it.
        console: a rich console on standard error (a terminal).
    """

    def __init__(self, session: Session, tokens: TokenCounter, console: Console) -> None:
        self.session = session
        self.tokens = tokens
        self.console = console
        self.state = "serving"
        self._started = time.monotonic()

    def render(self) -> Text:
        """The current line."""
        stats = self.session.statistics()
        elapsed = int(time.monotonic() - self._started)
        hours, rest = divmod(elapsed, 3600)
        line = Text()
        line.append("pride run ", style="bold")
        line.append(self.state, style="green" if self.state == "serving" else "yellow")
        line.append(
            f"  branches {stats.running}/{stats.branches}"
            f"  queued {stats.queued}"
            f"  turns {stats.turns_done} done, {stats.turns_failed} failed"
            f"  tokens {self.tokens.total:,}"
            f"  up {hours:d}:{rest // 60:02d}:{rest % 60:02d}",
        )
        return line

    async def run(self) -> None:
        """Show the line until cancelled (log lines written to stderr print above it)."""
        live = Live(
            self.render(),
            console=self.console,
            auto_refresh=False,  # no refresh thread: this task redraws
            transient=True,
            redirect_stdout=False,  # stdout carries the JSON answers
            redirect_stderr=True,
        )
        with live:
            while True:
                await trio.sleep(REFRESH_INTERVAL)
                live.update(self.render(), refresh=True)
