"""Lines from a stream of untrusted bytes, each within a bound: pride's one line splitter.

Four readers cut a peer's bytes into lines: the event-stream parser
(`pride.llm.SseParser`, a provider's stream and ``pride.client``'s), ``pride
run``'s request lines on stdin, pride reading an MCP server's stdout and ``pride
mcp`` reading its client's stdin. Each wrote its own, and each had to learn the
same three lessons: a line must be bounded (an endless line once took a process
past 2 GiB), a line trickled in small reads must be searched once, not from its
start at every read (15 MB in 100-byte reads took 14 s of the event loop), and
a read holding many lines must not move the rest of the buffer once per line.
`LineSplitter` is the one place those are kept; what a reader does with a line
too long (fail the stream, answer and skip it, drop the connection) stays the
reader's.

Sans-I/O, as h11 is: `LineSplitter.feed` takes the bytes a read gave,
`LineSplitter.next_line` hands out the complete lines one at a time (until
None), and `LineSplitter.end` gives the last line no ending ended.

Why here, beside ``_hypercorn``, and not in a package: its readers live in llm,
cli and mcp, and the one package below all three is messages, which holds what
travels between actors, not how bytes are cut into lines; pride-wide helpers
sit at pride's top, outside the layers, and import nothing of pride.
"""

from __future__ import annotations

import collections
import enum
from typing import Literal

__all__ = ["LineSplitter", "LineTooLong"]

Ends = Literal["lf", "any"]
"""Which bytes end a line: ``"lf"``, an LF only (a CR before it stays in the line, and
its reader decides); ``"any"``, a CR, an LF or a CRLF (the event-stream format's rule,
and Python's universal newlines)."""


class LineTooLong(Exception):
    """A line longer than the splitter's limit; its bytes were (or are being) discarded.

    Attributes:
        limit: the bound it passed, in bytes.
    """

    def __init__(self, limit: int) -> None:
        super().__init__(f"line longer than {limit} bytes; ignored up to its end")
        self.limit = limit


class _Refused(enum.Enum):
    """Where a line past the bound stood among the lines waiting to be taken."""

    LINE = enum.auto()


class LineSplitter:
    """Cut bytes into lines of at most ``limit`` bytes each, however the bytes are fed.

    After each `feed`, take lines with `next_line` until it returns None; at the
    end of the input, `end` gives the last line if no ending ended it. The lines
    are the same whatever the cuts between feeds (a CRLF cut in two included).

    Bounded: the start of an unfinished line is held only while it is within
    ``limit``; past it, the line is refused (`next_line` raises `LineTooLong`
    where that line stands) and the rest of it is dropped as it arrives, never
    held, until its ending; the line after it then comes out as usual. A line's
    bytes count without its ending (under ``"lf"``, the CR of a CRLF is the
    line's last byte, and counts). Held at most: ``limit`` bytes of an
    unfinished line, plus the complete lines of the feeds not yet taken.

    Linear time: a feed searches only its own bytes for an ending (what the
    buffer held before it has none), and the lines a feed completes leave the
    buffer together, once per feed, so a line trickled a byte at a time and a
    read of a million lines each cost time in proportion to their bytes.

    Args:
        limit: the most bytes a line may hold, not counting its ending.
        ends: which bytes end a line (`Ends`): ``"lf"`` or ``"any"``.

    Raises:
        ValueError: ``limit`` is below 0.
    """

    def __init__(self, limit: int, *, ends: Ends) -> None:
        if limit < 0:
            raise ValueError(f"a line splitter's limit must be 0 or more bytes, got {limit}")
        self.limit = limit
        self.ends: Ends = ends
        # The start of the line no ending has ended yet, and nothing else: between
        # feeds it holds no ending, so the next feed searches only its own bytes.
        self._buffer = bytearray()
        self._ready: collections.deque[bytes | _Refused] = collections.deque()
        # Inside a refused line: its bytes are dropped until its ending.
        self._skipping = False
        # The last byte fed was a CR that ended a line: an LF first in the next
        # feed is the rest of that CRLF, not an empty line. (Holding the CR back
        # until the next byte would keep a line from its reader for as long as
        # the peer waits to send another.)
        self._after_cr = False

    def feed(self, data: bytes | bytearray) -> None:
        """Take the next bytes of the input (``b""`` is allowed, and changes nothing)."""
        buffer = self._buffer
        searched = len(buffer)
        buffer += data
        if not buffer:
            return
        start = 0
        if self._after_cr:  # buffer[0] is the first byte fed since that CR
            self._after_cr = False
            if buffer[0] == 0x0A:
                start = 1
        last = buffer.rfind(b"\n", searched)
        if self.ends == "any":
            last = max(last, buffer.rfind(b"\r", searched))
        if last >= 0:
            with memoryview(buffer) as view:
                region = bytes(view[start : last + 1])
            self._after_cr = buffer[last] == 0x0D and last == len(buffer) - 1
            del buffer[: last + 1]  # once per feed: its lines leave together
            if self.ends == "any":
                lines = region.splitlines()
            else:
                lines = region.split(b"\n")
                lines.pop()  # the empty piece after the last LF
            if self._skipping:  # the region starts with the end of the refused line
                del lines[0]
                self._skipping = False
            # Only a region past the limit can hold a line past it, and a read is
            # almost always within it: its lines then go in whole, unchecked (4
            # million empty lines in one feed: 0.08 s, checking each 0.30 s).
            if len(region) > self.limit:
                limit = self.limit
                self._ready.extend(_Refused.LINE if len(line) > limit else line for line in lines)
            else:
                self._ready.extend(lines)
        if self._skipping:
            buffer.clear()
        elif len(buffer) > self.limit:
            buffer.clear()
            self._skipping = True
            self._ready.append(_Refused.LINE)

    def next_line(self) -> bytes | None:
        """The next complete line, without its ending, or None until more bytes are fed.

        Raises:
            LineTooLong: the next line is past ``limit`` (raised once per such
                line, in its place among the lines; the next call goes on with
                the line after it).
        """
        if not self._ready:
            return None
        line = self._ready.popleft()
        if line is _Refused.LINE:
            raise LineTooLong(self.limit)
        return line

    def end(self) -> bytes | None:
        """The input ended: the last line, if no ending ended it (None if nothing
        followed the last ending, or the input ended inside a refused line).

        The splitter starts afresh, as new; lines not yet taken are still handed
        out by `next_line`.
        """
        rest = bytes(self._buffer) if self._buffer and not self._skipping else None
        self._buffer.clear()
        self._skipping = False
        self._after_cr = False
        return rest
