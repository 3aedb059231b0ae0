"""What a host returns to a caller: its answers cut to a byte limit, in order.

A host numbers what it owes a connection when a delivery or poll returns it
(`pride.cluster.host.actor.HostActor`); one return carries at most
``max_message_bytes``. `cut` takes the answers that fit and leaves the rest for
the next return; an answer that cannot go at all is refused in its place (or
dropped and logged, if nobody waits on it), so a caller's numbering never has
a gap and the answers around it still arrive.
"""

from __future__ import annotations

import logging
from typing import Any

from ...errors import InvalidMessage
from ...messages.codec import scrub
from ..wire.encoding import dumps, encode_error

__all__ = ["FRAME_BYTES", "cut"]

log = logging.getLogger("pride.cluster")

FRAME_BYTES = 64
"""Room a return keeps for what frames its items (``{"out":[{"s":N,"items":[...]}]}``)."""


def cut(
    host: str, items: list[dict[str, Any]], limit: int
) -> tuple[list[bytes], list[dict[str, Any]]]:
    """The JSON of the first ``items`` that fit in ``limit`` bytes together, and the
    items left for a later return.

    A lone surrogate in an item's strings becomes U+FFFD and a non-finite number
    null, as a local branch records them (`pride.cluster.wire.encoding.dumps_scrubbed`).
    An item that cannot go at all (JSON has no form for a value in it, or it is
    larger than ``limit`` by itself) is dropped and logged, or, if its caller
    waits on it (an outcome, a stream item), replaced by a refusal naming the
    problem: failing the whole return instead would lose every answer riding with
    it and leave a gap in the caller's numbering that stalls its connection. At
    least one item is always taken, so what is owed always moves.
    """
    texts: list[bytes] = []
    size = 0
    for index, item in enumerate(items):
        try:
            text = dumps(item)
        except (ValueError, TypeError):
            try:
                text = dumps(scrub(item))
            except (ValueError, TypeError) as exc:
                text = _refused(host, item, f"cannot be sent: {exc}")
        if len(text) > limit:
            text = _refused(host, item, f"{len(text)} bytes is over the {limit}-byte limit")
        if not text:
            continue
        if texts and size + len(text) + 1 > limit:
            return texts, items[index:]
        texts.append(text)
        size += len(text) + 1
    return texts, []


def _refused(host: str, item: dict[str, Any], problem: str) -> bytes:
    """What goes in the place of an item that cannot be sent: a refusal of its envelope
    if its caller waits on it, else nothing (b""); logged either way."""
    what = f"{str(item.get('k'))[:20]!r} item of {str(item.get('id'))[:80]!r}"
    log.error("host %r: cannot send a %s to its caller: %s", host, what, problem)
    if item.get("k") in _AWAITED and isinstance(item.get("id"), str):
        refusal = InvalidMessage([(str(item["k"]), problem)])
        return dumps({"k": "refused", "id": item["id"], "error": encode_error(refusal)})
    return b""


_AWAITED = frozenset({"done", "item"})
"""Item kinds a caller waits on: one that cannot be sent is refused, never just dropped."""
