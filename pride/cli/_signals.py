"""SIGINT and SIGTERM, as a long-running ``pride`` process answers them.

``pride run`` and ``pride serve`` answer the same way: the first signal
stops gracefully (running turns get the grace period, what is queued is
refused or drained), the second forces (running turns are cancelled now) and
sets the exit status to ``128 + signum``, a third exits at once
(``os._exit``, after flushing what stdout holds): a process that is stuck
even in its forced stop still ends when asked three times.

While the process starts (the app's function, the branches it restores from
the store, the turns they resume), `interruptible` answers instead: the first
signal cancels the start, and the process leaves with ``128 + signum``. The
signal receiver is open from the first instant, so without this a start that
hung (an MCP server that never answers, a model warm-up) swallowed every
SIGINT and SIGTERM, and only SIGKILL ended it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import trio

__all__ = ["Stoppable", "answer_signals", "interruptible"]

log = logging.getLogger("pride.cli")


class Stoppable(Protocol):
    """A process that answers signals (`pride run`'s and `pride serve`'s)."""

    stopping: bool
    exit_code: int

    def begin_stop(self, grace: float) -> None:
        """Stop gracefully, giving running turns ``grace`` seconds."""
        ...

    def force_stop(self) -> None:
        """Stop now: running turns are cancelled."""
        ...


async def answer_signals(
    signals: AsyncIterator[int], process: Stoppable, *, grace: float, draining: str
) -> None:
    """Answer each signal from ``signals`` as the module docstring says (the first
    stops with ``grace``); ``draining`` is what the first one's log line says
    happens meanwhile (``"stopping; running turns have 5.0s to finish"``)."""
    async for signum in signals:
        name = signal.Signals(signum).name
        if not process.stopping:
            log.warning("%s: %s (send it again to force)", name, draining)
            process.begin_stop(grace)
        elif process.exit_code < 128:
            process.exit_code = 128 + signum
            log.warning("%s again: forcing; running turns are cancelled now", name)
            process.force_stop()
        else:
            log.error("%s a third time: exiting at once", name)
            with contextlib.suppress(OSError):
                sys.stdout.flush()
            os._exit(process.exit_code)


async def interruptible(
    signals: AsyncIterator[int], start: Callable[[], Awaitable[None]], *, command: str
) -> int | None:
    """Run ``start()`` (a process's start) while answering ``signals``: the first one
    cancels it and its number is returned; None when ``start`` finished first.
    ``command`` names the process in the log line (``"run"``)."""
    received: list[int] = []

    async def watch(cancel: trio.CancelScope) -> None:
        async for signum in signals:
            received.append(signum)
            name = signal.Signals(signum).name
            log.warning("%s while starting: pride %s stops without serving", name, command)
            cancel.cancel()
            return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        await start()
        nursery.cancel_scope.cancel()
    return received[0] if received else None
