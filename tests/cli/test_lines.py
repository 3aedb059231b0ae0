"""Tests for ``pride.cli._lines``: lines from a real pipe, however the bytes arrive."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio

from pride.cli._lines import READ_SIZE, LineReader, LineTooLong


class _Pipe:
    """A real pipe: ``read`` for the reader, ``write``/``close`` for the test."""

    def __init__(self) -> None:
        self.read, self._write = os.pipe()
        self._open = True

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._write, view) :]

    def close(self) -> None:
        if self._open:
            self._open = False
            os.close(self._write)


@contextmanager
def _pipe() -> Iterator[_Pipe]:
    pipe = _Pipe()
    try:
        yield pipe
    finally:
        pipe.close()
        os.close(pipe.read)


async def _lines(reader: LineReader) -> list[str]:
    found = []
    while (line := await reader.readline()) is not None:
        found.append(line)
    return found


async def test_many_lines_in_one_read_and_lines_split_across_reads() -> None:
    """Hundreds of lines per read come out in order, and a line cut by a read's
    boundary is joined with its rest; CRLF endings and a last line without one."""
    expected = [f"request {index:05d}" + "x" * (index % 50) for index in range(6000)]
    data = "".join(line + ("\r\n" if index % 7 else "\n") for index, line in enumerate(expected))
    data += "last, without a newline"
    with _pipe() as pipe:
        reader = LineReader(pipe.read)
        async with trio.open_nursery() as nursery:

            async def writer() -> None:
                payload = data.encode()
                start, sizes = 0, (1000, 50_000, 7, 20_000)  # boundaries mid-line
                while start < len(payload):
                    size = sizes[start % len(sizes)]
                    await trio.to_thread.run_sync(pipe.write, payload[start : start + size])
                    start += size
                pipe.close()

            nursery.start_soon(writer)
            found = await _lines(reader)
    assert found == [*expected, "last, without a newline"]
    assert len(data) > 3 * READ_SIZE  # several full reads, each holding many lines


async def test_a_line_too_long_is_refused_and_the_next_line_is_read() -> None:
    """A line past the limit raises once, its bytes are skipped even across reads,
    and reading goes on with the next line; a line at the limit is kept."""
    limit = 100
    with _pipe() as pipe:
        reader = LineReader(pipe.read, max_line=limit)
        pipe.write(b"a" * limit + b"\n" + b"b" * (limit + 1))
        assert await reader.readline() == "a" * limit
        with pytest.raises(LineTooLong):
            await reader.readline()
        pipe.write(b"b" * 5000 + b"\nnext\n\xff\xfe bytes\n")
        pipe.close()
        assert await _lines(reader) == ["next", "\ufffd\ufffd bytes"]


async def test_a_long_line_cut_off_by_the_end_of_input_yields_nothing() -> None:
    """End of input inside a line already refused ends the lines (no fragment)."""
    with _pipe() as pipe:
        reader = LineReader(pipe.read, max_line=10)
        pipe.write(b"ok\n" + b"z" * 50)
        pipe.close()
        assert await reader.readline() == "ok"
        with pytest.raises(LineTooLong):
            await reader.readline()
        assert await reader.readline() is None


class _Trickle(LineReader):
    """A reader given ``pieces`` one read at a time: a client sending a little at a time."""

    def __init__(self, pieces: Iterator[bytes], max_line: int) -> None:
        super().__init__(-1, max_line)
        self._pieces = pieces

    async def _read(self) -> bytes:
        return next(self._pieces, b"")


async def test_a_long_line_trickled_in_small_reads_is_scanned_once() -> None:
    """A request line is hostile, and may come a little at a time: each read used to
    search the whole line so far for its end (a 4 MB line in reads of 100 bytes took
    0.9 s of the event loop, 15 MB 14 s). Searched once, 48 MB in reads of 100 bytes
    is one line at once (a timeout if it is not)."""
    size, piece = 48_000_000, b"x" * 100
    pieces = itertools.chain(itertools.repeat(piece, size // len(piece)), [b"\nnext\n"])
    reader = _Trickle(pieces, max_line=2 * size)
    assert await reader.readline() == "x" * size
    assert await _lines(reader) == ["next"]
