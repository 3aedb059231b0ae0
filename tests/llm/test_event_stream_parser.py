"""The event-stream parser (sans-I/O, shared by model access and `pride.client`): the
events do not depend on how the bytes were chunked, and a line trickled in tiny
chunks is scanned once, not once per chunk."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pride.llm import LimitExceeded
from pride.llm._sse import SseParser

LINES = st.lists(
    st.sampled_from(["data: {}", "data: x", "data:", ": ping", "event: e", "id: 7", "", "data: é"]),
    max_size=30,
)
NEWLINES = st.sampled_from(["\n", "\r\n", "\r"])


def _events(body: bytes, cuts: list[int]) -> list[str]:
    parser = SseParser(1 << 20)
    events: list[str] = []
    start = 0
    for cut in sorted(cuts):
        events += parser.feed(body[start:cut])
        start = cut
    events += parser.feed(body[start:])
    return events + parser.close()


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(LINES, NEWLINES, st.data())
def test_the_events_do_not_depend_on_the_chunking(
    lines: list[str], newline: str, data: st.DataObject
) -> None:
    body = (newline.join(lines) + newline).encode()
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=len(body)))
    assert _events(body, cuts) == _events(body, [])


def test_a_line_trickled_one_byte_a_chunk_is_scanned_once() -> None:
    """A hostile stream sending one long line a byte at a time: each chunk used to
    rescan the whole line for its end (quadratic: 50 KB took 6 s, 200 KB 94 s of
    the event loop). Scanned once, 300 KB is quick (a test timeout if it is not)."""
    parser = SseParser(1 << 20)
    assert parser.feed(b"data: ") == []
    for _ in range(300_000):
        parser.feed(b"x")
    assert parser.feed(b"\r") == []  # the line ends, its event does not
    assert parser.feed(b"\n\n") == ["x" * 300_000]  # that LF was the rest of a CRLF


def test_an_event_ends_with_the_feed_that_brings_its_blank_line() -> None:
    """A CR ending the blank line at the end of a chunk completes the event there and
    then, not at the next chunk (it may be minutes away on a quiet stream), and an
    LF opening the next chunk is the rest of that CRLF, no second blank line."""
    parser = SseParser(1 << 20)
    assert parser.feed(b"data: one\r\r") == ["one"]
    assert parser.feed(b"\ndata: two\r\n\r") == ["two"]
    assert parser.feed(b"\n") == []
    assert parser.close() == []


@pytest.mark.parametrize("line", [b"data: " + b"x" * 995, b": " + b"x" * 999])
def test_a_line_past_the_bound_is_refused_however_it_arrives(line: bytes) -> None:
    """A line of exactly max_event_bytes passes; one byte more is refused, arriving
    whole in one chunk too (a comment line that did once passed unbounded)."""
    assert SseParser(1001).feed(line + b"\n\n") == (["x" * 995] if line[:1] == b"d" else [])
    with pytest.raises(LimitExceeded, match="a line of the event stream"):
        SseParser(1000).feed(line + b"\n\n")


def test_the_bound_still_holds_for_a_trickled_line() -> None:
    parser = SseParser(1000)
    parser.feed(b"data: ")
    with pytest.raises(LimitExceeded):
        for _ in range(2000):
            parser.feed(b"x")


@pytest.mark.parametrize("cut", [0, 1, 2, 3, 5])
def test_a_stream_opening_with_a_byte_order_mark_keeps_its_first_event(cut: int) -> None:
    """The format strips one UTF-8 byte order mark at the start of the stream (some
    servers write one): it was read as part of the first field's name, so the first
    event (a chat completion's first words, Anthropic's message_start) was dropped
    without a word, however the mark was cut. A mark anywhere else is data."""
    body = b"\xef\xbb\xbfdata: first\n\ndata: \xef\xbb\xbfsecond\n\n"
    assert _events(body, [cut]) == ["first", "\ufeffsecond"]
    parser = SseParser(1 << 20)
    parser.feed(b"data: one\n\n")
    assert parser.feed(b"\xef\xbb\xbfdata: two\n\n") == []  # not the stream's start
    parser.close()
    assert parser.feed(b"\xef\xbb\xbfdata: three\n\n") == ["three"]  # another stream's
