"""Items a link could not send: each fails its envelope with a typed error, logged.

A delivery that cannot leave the caller's process (an item whose text has no
UTF-8 form, such as a command holding a lone surrogate; a call Ray refuses
at once) must neither reach the sender as a foreign exception nor crash the
link's flusher, and the other items of its batch must still go:
`Link._send` hands such items here and serves on.
"""

from __future__ import annotations

import json
import logging

from ...errors import HostLost, InvalidMessage
from .answers import AnsweredLink

__all__ = ["encodable", "refuse"]

log = logging.getLogger("pride.cluster")


def encodable(link: AnsweredLink, text: str) -> bool:
    """True if the item ``text`` has a UTF-8 form; else it is refused with
    `InvalidMessage` (and logged)."""
    try:
        text.encode()
        return True
    except UnicodeEncodeError as exc:
        log.error("host %r: an item could not be sent: %s", link.host, exc)
        refuse(link, text, InvalidMessage([("command", f"has no UTF-8 form to send: {exc}")]))
        return False


def refuse(link: AnsweredLink, text: str, error: BaseException | str) -> None:
    """The item ``text`` never left: fail its envelope (if it is a send) with
    ``error``, or with `HostLost` when ``error`` is its detail text."""
    item = json.loads(text)  # this side's own text
    envelope = link.envelopes.pop(str(item.get("id")), None)
    if envelope is None or item.get("k") != "send":
        return
    link.mailboxes.heard(envelope.branch, None, True, finished=True)  # it never left
    if isinstance(error, str):
        error = HostLost(envelope.branch, link.host, error)
    envelope.refused(error)
