"""Where the signals of remote branches go, in the order their hosts emitted them.

A host sends the signals of its branches to every connection that watches
(`pride.cluster.caller.link`); the caller's `SignalRoute` hands each to the
cluster's own observer, to the observer of the session given to the Cluster,
and to the observer of the session supervising that branch, if any. A
supervised child's lifecycle signals (``BranchStarted``, ``BranchStopped``,
``BranchRestarted``) are announced by its local supervisor, so the host's
copies are not given to that supervisor's observer.

Synchronous subscribers run as the signal arrives, so they have seen a
turn's terminal before its caller gets the outcome (as with a local branch);
asynchronous ones are awaited one after another, in order, by `run`.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import trio

from ...messages import BranchRestarted, BranchStarted, BranchStopped, Signal
from ...supervisors import Observer

__all__ = ["SignalRoute"]

# A supervised child's lifecycle is announced by its local supervisor, not its host's.
_LIFECYCLE = (BranchStarted, BranchStopped, BranchRestarted)


class SignalRoute:
    """Dispatches remote signals to observers (see the module docstring).

    Args:
        also: the observer of a session that sees every remote signal, if any.
    """

    def __init__(self, also: Observer | None) -> None:
        self.observer = Observer()
        self._also = also
        self._pending: trio.MemorySendChannel[Any] | None = None

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Await asynchronous subscribers in order, until `close`."""
        send, receive = trio.open_memory_channel[Any](math.inf)
        self._pending = send
        task_status.started()
        async with receive:
            async for pending in receive:
                await pending

    def close(self) -> None:
        if self._pending is not None:
            self._pending.close()

    def dispatch(self, signal: Signal, supervisor: Observer | None) -> None:
        """Hand ``signal`` to every observer that should see it.

        ``supervisor`` is the observer of the session supervising the
        signal's branch in this process, if one does.
        """
        observers = [self.observer]
        if self._also is not None:
            observers.append(self._also)
        if supervisor is not None:
            if isinstance(signal, _LIFECYCLE):
                observers = [o for o in observers if o is not supervisor]  # it announces its own
            elif supervisor not in observers:
                observers.append(supervisor)
        for observer in observers:
            pending = observer.dispatch(signal)
            if pending is not None and self._pending is not None:
                with contextlib.suppress(trio.ClosedResourceError):
                    self._pending.send_nowait(pending)
