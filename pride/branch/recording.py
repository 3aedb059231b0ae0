"""Telling whoever listens that a branch's history changed.

[`Branch.add_message`][pride.branch.branch.Branch.add_message] is the one
door into a branch's history from the runtime: it appends the message, then
tells the application's listeners (synchronous callbacks: a store writing
each message as it is recorded, a UI), then the attached observer and hooks
(``MessageAdded``, ``message_added``). A history changed other than by a
recorded message (cleared, its system message replaced) tells the rewrite
listeners, which read the history anew. This module calls the listeners: a
failing one is logged and the others still run, so a listener never fails
the turn that recorded the message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["notify"]

log = logging.getLogger("pride.branch")


def notify(branch: Any, listeners: Sequence[Callable[..., None]], kind: str, *args: Any) -> None:
    """Call each listener with ``branch`` (and ``args``); a failing one is logged
    and the others still run.

    ``listeners`` is iterated as it is: pass a tuple, or a copy of a list a
    listener might change. ``kind`` names the listeners in the log.
    """
    for listener in listeners:
        try:
            listener(branch, *args)
        except Exception:
            log.exception("%s listener of branch %r failed", kind, branch.name)
