"""Recording a message on a branch, and telling whoever listens.

``Branch.add_message`` is the one door into a branch's history from the
runtime: it appends the message, then tells the application's listeners
(synchronous callbacks: a store writing each message as it is recorded, a
UI), then the attached observer and hooks (``MessageAdded``,
``message_added``). A history changed other than by a recorded message
(cleared, its system message replaced) tells the rewrite listeners, which
read the history anew. A failing listener is logged and the others still
run: a listener never fails the turn that recorded the message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..messages import RoledMessage
from . import wiring

if TYPE_CHECKING:
    from .branch import Branch

__all__ = [
    "add_message",
    "add_message_listener",
    "add_rewrite_listener",
    "remove_message_listener",
    "remove_rewrite_listener",
]

log = logging.getLogger("pride.branch")


def add_message(branch: Branch, message: RoledMessage) -> RoledMessage:
    """Record ``message`` and tell observers, hooks and listeners.

    Returns the message. A system message replaces the current one.
    """
    branch._messages.append(message)
    if branch._message_listeners:
        _notify(branch, branch._message_listeners, "message", message)
    actor = branch._actor
    if actor.observer is not None or actor.hooks is not None:
        wiring.message_recorded(actor, message)
    return message


def add_message_listener(branch: Branch, listener: Callable[[Branch, RoledMessage], None]) -> None:
    """Call ``listener(branch, message)`` synchronously for every recorded message."""
    # Replaced, never mutated: a listener that adds or removes one mid-call
    # cannot disturb the round in progress, and no round copies the list.
    branch._message_listeners = (*branch._message_listeners, listener)


def remove_message_listener(
    branch: Branch, listener: Callable[[Branch, RoledMessage], None]
) -> None:
    """Stop calling ``listener``.

    Raises:
        ValueError: ``listener`` is not a message listener of the branch.
    """
    listeners = list(branch._message_listeners)
    listeners.remove(listener)
    branch._message_listeners = tuple(listeners)


def add_rewrite_listener(branch: Branch, listener: Callable[[Branch], None]) -> None:
    """Call ``listener(branch)`` synchronously after the history changes other
    than by a recorded message: cleared (``communicate(clear_messages=True)``,
    ``branch.messages.clear()``) or its system message replaced or removed
    (``branch.messages.set_system``). The listener reads ``branch.messages``
    anew."""
    if branch._rewrite_listeners is None:
        branch._rewrite_listeners = []
        branch._messages.on_rewrite = partial(_history_rewritten, branch)
    branch._rewrite_listeners.append(listener)


def remove_rewrite_listener(branch: Branch, listener: Callable[[Branch], None]) -> None:
    """Stop calling ``listener``.

    Raises:
        ValueError: ``listener`` is not a rewrite listener of the branch.
    """
    listeners = branch._rewrite_listeners
    if listeners is None or listener not in listeners:
        raise ValueError(f"{listener!r} is not a rewrite listener of branch {branch.name!r}")
    listeners.remove(listener)
    if not listeners:
        branch._rewrite_listeners = None
        branch._messages.on_rewrite = None


def _history_rewritten(branch: Branch) -> None:
    _notify(branch, tuple(branch._rewrite_listeners or ()), "history")


def _notify(
    branch: Branch, listeners: Sequence[Callable[..., None]], kind: str, *args: Any
) -> None:
    """Call each listener with the branch (and ``args``); a failing one is
    logged and the others still run. ``listeners`` is iterated as it is: pass a
    tuple, or a copy of a list a listener might change."""
    for listener in listeners:
        try:
            listener(branch, *args)
        except Exception:
            log.exception("%s listener of branch %r failed", kind, branch.name)
