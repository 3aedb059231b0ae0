"""Server-sent events from the bytes of an event stream, within a size bound.

Sans-I/O: `SseParser.feed` takes decoded body bytes and returns the
data of every event they complete, following the WHATWG "event stream"
interpretation rules: lines end in CRLF, LF or CR; a line starting with ``:``
is a comment; ``data`` lines accumulate (joined by newlines) until a blank
line dispatches the event; an event with no data is not dispatched; an event
left unfinished at the end of the stream is dropped.

Why not httpx-sse: it reads lines with httpx's line iterator, which keeps any
line in memory however long it grows (an endless line of a broken provider
took a process past 2 GiB); a bounded parser must own its line splitting, and
the format is four field names. Only ``data`` is kept: both wire formats pride
speaks carry the event's type inside its JSON data too.
"""

from __future__ import annotations

import re

from ._reading import LimitExceeded

__all__ = ["SseParser"]

_LINE_END = re.compile(rb"\r\n|\r|\n")


class SseParser:
    """Splits an event stream into events, bounding each line and each event.

    Args:
        max_event_bytes: the most bytes one line, or one event's data, may
            hold (``ResponseLimits.max_event_bytes``).
    """

    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self._buffer = bytearray()
        # How much of the buffer was searched and holds no line end: the next
        # search starts there, so a line trickled in small chunks is scanned
        # once (rescanned from its start per chunk, 200 KB a byte at a time took
        # 94 s of the event loop).
        self._searched = 0
        self._data: list[str] = []
        self._size = 0

    def feed(self, chunk: bytes) -> list[str]:
        """Take the next bytes of the stream; return the data of each event they complete.

        Raises:
            LimitExceeded: a line or an event is larger than ``max_event_bytes``.
        """
        buffer = self._buffer
        buffer += chunk
        events: list[str] = []
        start = 0
        search = self._searched
        end = len(buffer)
        while start < end:
            found = _LINE_END.search(buffer, search)
            if found is None:
                break
            if found.group() == b"\r" and found.end() == end:
                break  # a CR at the end may be the first half of a CRLF: wait for more
            self._line(bytes(buffer[start : found.start()]), events)
            start = search = found.end()
        if start:
            del buffer[:start]
        # All of what is left was searched, but for a CR held back at its end.
        self._searched = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
        if len(buffer) > self.max_event_bytes:
            raise LimitExceeded(
                "max_event_bytes", self.max_event_bytes, "a line of the event stream"
            )
        return events

    def close(self) -> list[str]:
        """At the end of the stream: the event a final CR-terminated blank line completes.

        (A CR at the very end was held back in case an LF followed it.)
        Anything else left over is an unfinished event, dropped as the format says.
        """
        events: list[str] = []
        if self._buffer.endswith(b"\r"):
            self._line(bytes(self._buffer[:-1]), events)
        self._buffer.clear()
        self._searched = 0
        self._data = []
        return events

    def _line(self, raw: bytes, events: list[str]) -> None:
        if not raw:
            if self._data:
                events.append("\n".join(self._data))
            self._data = []
            self._size = 0
            return
        if raw[:1] == b":":
            return  # a comment (providers send them as keep-alives)
        line = raw.decode("utf-8", errors="replace")
        field, colon, value = line.partition(":")
        if field != "data":
            return  # event, id, retry and unknown fields carry nothing pride reads
        if colon and value[:1] == " ":
            value = value[1:]
        self._size += len(value) + 1
        if self._size > self.max_event_bytes:
            raise LimitExceeded("max_event_bytes", self.max_event_bytes, "an event of the stream")
        self._data.append(value)
