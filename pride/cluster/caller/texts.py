"""The JSON text of a send item, written out once, as a link queues it.

A link sends an envelope as one item's text (`pride.cluster.caller.link.Link.submit`);
every part of it is JSON already (the id is hex, the mode a fixed word), so
the text is joined from parts, not encoded whole. The command's text is kept
for the same command object sent again (a caller repeating one command
encodes it once), and the branch names' texts are kept (a caller sends to
few names). The host decodes a batch once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...messages import unstructure
from ..wire.encoding import dumps_scrubbed, dumps_text

if TYPE_CHECKING:
    from .envelope import Envelope

__all__ = ["Texts"]

_MAX_BRANCH_TEXTS = 1024
"""Branch names whose JSON text a link keeps (more are encoded again)."""


class Texts:
    """One link's writer of send items (its caches are the link's own)."""

    def __init__(self) -> None:
        self._last_command: tuple[Any, str] | None = None
        self._branch_texts: dict[str, str] = {}

    def send(self, envelope: Envelope, mode: str, *, ack: bool) -> str:
        """The JSON text of the item that sends ``envelope`` in ``mode``
        (``"wait"``, ``"nowait"`` or ``"stream"``); ``ack``: its caller waits for room.

        Raises:
            InvalidMessage: its command has no wire form.
        """
        reply = envelope.reply
        text = (
            f'{{"k":"send","id":"{envelope.id}","b":{self.branch(envelope.branch)},'
            f'"mode":"{mode}","cmd":{self.command(reply.command)}'
        )
        if reply.trace:  # the sender's trace context: the remote turn continues it
            text += ',"trace":' + dumps_text(dict(reply.trace))
        if ack:
            text += ',"ack":true'
        if mode == "stream":
            text += f',"window":{envelope.window:d}'
        return text + "}"

    def command(self, command: Any) -> str:
        """The JSON string of the command's codec text (surrogates as U+FFFD).

        Raises:
            InvalidMessage: the command has no wire form.
        """
        last = self._last_command
        if last is not None and last[0] is command:
            return last[1]
        text = dumps_text(dumps_scrubbed(unstructure(command)))
        self._last_command = (command, text)
        return text

    def branch(self, branch: str) -> str:
        """The JSON string of a branch name."""
        text = self._branch_texts.get(branch)
        if text is None:
            if len(self._branch_texts) >= _MAX_BRANCH_TEXTS:
                self._branch_texts.clear()
            text = self._branch_texts[branch] = dumps_text(branch)
        return text
