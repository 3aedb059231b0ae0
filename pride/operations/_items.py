"""What a streaming verb produces: sent to the turn's consumer, or collected.

``ReActStream`` and ``Run`` produce items as they go. Under
[`pride.stream`][pride.stream] each item goes to the consumer at once (the turn
advances as it is consumed); under ``ask`` nobody streams, so the items are
collected and the verb returns them as a list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .view import TurnView

__all__ = ["Items"]


class Items:
    """A streaming verb's items: emitted while ``streaming``, else collected.

    With ``check_control``, each `put` honours a loop directive that arrived
    meanwhile (``turn.check_control()``: BREAK, CANCEL) once the item is out.
    """

    __slots__ = ("_check_control", "_collected", "_turn", "streaming")

    def __init__(self, turn: TurnView, *, check_control: bool = False) -> None:
        self._turn = turn
        self._check_control = check_control
        self.streaming = turn.streaming
        self._collected: list[Any] = []

    async def put(self, item: Any) -> None:
        """Send ``item`` to the consumer, or keep it for `result`.

        Raises:
            StopStream: the consumer left (or a CANCEL directive).
            LoopBreak: a BREAK directive (with ``check_control``).
        """
        if self.streaming:
            await self._turn.emit(item)
        else:
            self._collected.append(item)
        if self._check_control:
            self._turn.check_control()

    def result(self) -> list[Any] | None:
        """What the verb returns: the items collected, or None when they were streamed."""
        return None if self.streaming else self._collected
