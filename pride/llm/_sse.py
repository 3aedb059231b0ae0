"""Server-sent events from the bytes of an event stream, within a size bound.

Sans-I/O: `SseParser.feed` takes decoded body bytes and returns the
data of every event they complete, following the WHATWG "event stream"
interpretation rules: one UTF-8 byte order mark at the start of the stream is
stripped; lines end in CRLF, LF or CR; a line starting with ``:``
is a comment; ``data`` lines accumulate (joined by newlines) until a blank
line dispatches the event; an event with no data is not dispatched; an event
left unfinished at the end of the stream is dropped.

Why not httpx-sse: it reads lines with httpx's line iterator, which keeps any
line in memory however long it grows (an endless line of a broken provider
took a process past 2 GiB); a bounded parser must own its line splitting, and
the format is four field names. The lines are cut by pride's one bounded
splitter (`pride._lines.LineSplitter`, with the format's CR, LF and CRLF
endings); this module is the events made of them. Only ``data`` is kept: both
wire formats pride speaks carry the event's type inside its JSON data too.
"""

from __future__ import annotations

from .._lines import LineSplitter, LineTooLong
from ._reading import LimitExceeded

__all__ = ["SseParser"]

#: The UTF-8 byte order mark, stripped once from the start of a stream.
BOM = b"\xef\xbb\xbf"


class SseParser:
    """Splits an event stream into events, bounding each line and each event.

    Args:
        max_event_bytes: the most bytes one line, or one event's data, may
            hold (``ResponseLimits.max_event_bytes``).
    """

    def __init__(self, max_event_bytes: int) -> None:
        self.max_event_bytes = max_event_bytes
        self._lines = LineSplitter(max_event_bytes, ends="any")
        self._data: list[str] = []
        self._size = 0
        self._first = True  # the next line is the stream's first (it may open with a BOM)

    def feed(self, chunk: bytes) -> list[str]:
        """Take the next bytes of the stream; return the data of each event they complete.

        An event is complete at the blank line after it, as soon as that line's
        ending arrives (a CR ending it is not held back for an LF).

        Raises:
            LimitExceeded: a line or an event is larger than ``max_event_bytes``
                (the stream is then unusable: its caller drops it).
        """
        self._lines.feed(chunk)
        events: list[str] = []
        try:
            while (line := self._lines.next_line()) is not None:
                self._line(line, events)
        except LineTooLong as exc:
            raise LimitExceeded(
                "max_event_bytes", self.max_event_bytes, "a line of the event stream"
            ) from exc
        return events

    def close(self) -> list[str]:
        """At the end of the stream: the events its end completes, which is none.

        Every line leaves `feed` as soon as its ending arrives, so the blank line
        that completes an event has been seen by then; an event left unfinished
        (and a last line without an ending) is dropped, as the format says. The
        parser starts afresh for another stream.
        """
        self._lines.end()
        self._data = []
        self._size = 0
        self._first = True
        return []

    def _line(self, raw: bytes, events: list[str]) -> None:
        if self._first:
            # The format strips one byte order mark at the stream's start; read as
            # part of the first field's name, it dropped the first event unseen.
            self._first = False
            raw = raw.removeprefix(BOM)
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
