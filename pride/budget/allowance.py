"""The allowance work carries with it: a flow's budget, across the branches it reaches.

A flow's budget bounds every node of the graph, wherever it runs
(`pride.budget.accounts` has the accounts). Such an account is on no branch's
chain, so it travels with the work instead: work sent inside
`drawing_on(account)` carries it in its envelope (``Reply.allowance``), the
turn's meter adds it to its chain, and whatever that turn sends on carries it
too, through a context variable of the task serving the envelope.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from .accounts import Account

__all__ = ["carried_allowance", "carry", "drawing_on", "uncarry"]

# The allowance work sent from the current task also draws on (a flow's), if any.
_carried: contextvars.ContextVar[Account | None] = contextvars.ContextVar(
    "pride_carried_allowance", default=None
)


@contextlib.contextmanager
def drawing_on(account: Account | None) -> Iterator[None]:
    """Work sent from the block also draws on ``account`` (None: nothing more).

    Every envelope made inside the block carries ``account``; the turn (or
    ``Act``) serving it counts its calls there too and is stopped when it is
    spent, and so is the work that turn sends on. Accounts the work already
    draws on are not counted twice.
    """
    token = carry(account)
    try:
        yield
    finally:
        uncarry(token)


carried_allowance: Callable[[], Account | None] = _carried.get
"""The account `drawing_on` set for the calling task, if any (the context
variable's own ``get``: asked for every envelope made, so no Python call around it)."""


def carry(account: Account | None) -> contextvars.Token[Account | None] | None:
    """For the actor: the task serving an envelope carries its ``allowance`` on.

    Returns the token for `uncarry`, or None when there was nothing to change
    (the common case, which costs one context-variable read). A plain pair, not
    a context manager: it is on the path of every turn and ``Act``.
    """
    if account is None and _carried.get() is None:
        return None
    return _carried.set(account)


def uncarry(token: contextvars.Token[Account | None] | None) -> None:
    """Undo `carry`."""
    if token is not None:
        _carried.reset(token)
