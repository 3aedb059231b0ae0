"""Where the envelope of a turn resumed after a restart goes: the session's
``on_resume`` handlers, or the flow whose node it is.

The store's wiring (`pride.durable.persistence.Persistence.recover`) sends
each interrupted turn a ``Resume`` once its branch runs; the session's
membership hands each envelope here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..actors import Reply
from ..flows.journal import parse_node_tag

__all__ = ["hand_over"]

log = logging.getLogger("pride.session")


def hand_over(
    reply: Reply, handlers: list[Callable[[Any], Any]], flow_turns: dict[str, Any]
) -> None:
    """Hand the envelope of a resumed turn to the session's ``on_resume``
    ``handlers``, or, a flow node's (its tag says so), to ``flow_turns``, where
    the session's ``resume_flow`` takes it."""
    if parse_node_tag(reply.tag) is not None:  # the flow's, not an application's
        flow_turns[reply.tag] = reply  # type: ignore[index]
        log.info(
            "branch %r: resumed the turn of flow node %s; session.resume_flow waits for it",
            reply.branch.name,
            reply.tag,
        )
        return
    if not handlers:
        log.info(
            "branch %r: turn resumed with no on_resume handler; its result goes to observers only",
            reply.branch.name,
        )
    for handler in list(handlers):
        try:
            handler(reply)
        except Exception:
            log.exception("on_resume handler %r failed", handler)
