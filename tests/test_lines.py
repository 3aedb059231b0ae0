"""Tests for ``pride._lines``: the one bounded line splitter under pride's four line readers.

The lines do not depend on how the bytes were cut into feeds, whichever endings
the input uses; the bound holds at exactly ``limit`` bytes; a line fed a byte at
a time, and a feed of millions of lines, each cost linear time.
"""

from __future__ import annotations

import itertools
import typing

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pride._lines import Ends, LineSplitter, LineTooLong

REFUSED = "refused"  # stands for a LineTooLong, in its place among the lines

# A line's bytes hold no ending of its rule (so under "lf" they may hold a CR).
BODIES = {
    "lf": st.binary(max_size=12).map(lambda body: body.replace(b"\n", b"")),
    "any": st.binary(max_size=12).map(lambda body: body.replace(b"\r", b"").replace(b"\n", b"")),
}
ENDINGS = {"lf": [b"\n", b"\r\n"], "any": [b"\n", b"\r\n", b"\r"]}


def _split(ends: Ends, limit: int, feeds: list[bytes]) -> list[bytes | str]:
    """What the splitter hands out for ``feeds``, then the end of input: each line,
    ``REFUSED`` for each `LineTooLong`, and the last line no ending ended."""
    splitter = LineSplitter(limit, ends=ends)
    found: list[bytes | str] = []
    for data in feeds:
        splitter.feed(data)
        while True:
            try:
                line = splitter.next_line()
            except LineTooLong as exc:
                assert exc.limit == limit
                found.append(REFUSED)
                continue
            if line is None:
                break
            found.append(line)
    rest = splitter.end()
    if rest is not None:
        found.append(rest)
    return found


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


def _oracle(ends: Ends, body: bytes) -> tuple[list[bytes], bytes]:
    """The lines of ``body`` and what follows the last ending, by the standard library."""
    if ends == "lf":
        *lines, rest = body.split(b"\n")  # a CR before an LF stays in its line
        return lines, rest
    pieces = body.splitlines(keepends=True)  # CR, LF and CRLF, as bytes.splitlines has it
    ended = not pieces or pieces[-1].endswith((b"\r", b"\n"))
    rest = b"" if ended else pieces.pop()
    return [piece.rstrip(b"\r\n") for piece in pieces], rest


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(typing.get_args(Ends)), st.integers(0, 14), st.data())
def test_the_lines_do_not_depend_on_the_chunking(
    ends: Ends, limit: int, data: st.DataObject
) -> None:
    """Any lines with any of the rule's endings, and a last line without one, cut
    into feeds anywhere (a CRLF split between two feeds too), come out as the
    standard library splits them whole, each past the bound refused instead."""
    bodies = BODIES[ends]
    lines = data.draw(st.lists(st.tuples(bodies, st.sampled_from(ENDINGS[ends])), max_size=12))
    body = b"".join(line + ending for line, ending in lines) + data.draw(bodies)
    cuts = data.draw(st.lists(st.integers(0, len(body)), max_size=len(body) + 1))
    whole, rest = _oracle(ends, body)
    expected: list[bytes | str] = [line if len(line) <= limit else REFUSED for line in whole]
    if rest:
        expected.append(rest if len(rest) <= limit else REFUSED)
    assert _split(ends, limit, _cut(body, cuts)) == expected


@pytest.mark.parametrize("ends", typing.get_args(Ends))
def test_the_bound_is_exactly_limit_bytes(ends: Ends) -> None:
    """A line of ``limit`` bytes comes out, one of ``limit + 1`` is refused, whether it
    arrives whole or its end is still to come; the ending is not counted."""
    limit = 10
    assert _split(ends, limit, [b"a" * limit + b"\n"]) == [b"a" * limit]
    assert _split(ends, limit, [b"a" * limit, b"\n"]) == [b"a" * limit]
    assert _split(ends, limit, [b"a" * (limit + 1) + b"\nok\n"]) == [REFUSED, b"ok"]
    assert _split(ends, limit, [b"a" * limit]) == [b"a" * limit]  # the last line, at the bound

    # Past the bound is known before the line's end comes, and said at once.
    splitter = LineSplitter(limit, ends=ends)
    splitter.feed(b"a" * limit)
    assert splitter.next_line() is None
    splitter.feed(b"a")
    with pytest.raises(LineTooLong, match="line longer than 10 bytes; ignored up to its end"):
        splitter.next_line()


def test_a_cr_ending_at_the_bound_is_not_counted_and_under_lf_it_is() -> None:
    """Under "any" a CR is an ending, so a line of ``limit`` bytes whose CR ends a feed
    is within the bound; under "lf" a CR before the LF is part of the line, as
    ``pride run``'s request lines have always counted it."""
    limit = 10
    assert _split("any", limit, [b"a" * limit + b"\r", b"\n"]) == [b"a" * limit]
    assert _split("lf", limit, [b"a" * limit + b"\r", b"\n"]) == [REFUSED]
    assert _split("lf", limit, [b"a" * (limit - 1) + b"\r\n"]) == [b"a" * (limit - 1) + b"\r"]


def test_a_cr_at_a_feed_s_end_then_an_lf_in_the_next_is_one_ending() -> None:
    """A CR ends its line at once (it is not held back for an LF that may never come);
    an LF first in the next feed, even one after an empty feed, is the rest of
    that CRLF and makes no empty line; anything else starts the next line."""
    splitter = LineSplitter(100, ends="any")
    splitter.feed(b"one\r")
    assert splitter.next_line() == b"one"
    assert splitter.next_line() is None
    splitter.feed(b"")
    splitter.feed(b"\ntwo\r")
    assert splitter.next_line() == b"two"
    splitter.feed(b"three\n\r")
    assert [splitter.next_line(), splitter.next_line()] == [b"three", b""]
    splitter.feed(b"\n")
    assert splitter.next_line() is None
    assert splitter.end() is None


def test_a_refused_line_is_skipped_to_its_end_and_the_next_one_follows() -> None:
    """Lines before a refused one come out first; the refused line's bytes are dropped
    as they arrive, over any number of feeds (never held), and the line after its
    end comes out; the input ending inside a refused line leaves no last line."""
    splitter = LineSplitter(5, ends="lf")
    splitter.feed(b"ok\n" + b"x" * 50)
    assert splitter.next_line() == b"ok"
    with pytest.raises(LineTooLong):
        splitter.next_line()
    assert splitter.next_line() is None
    for _ in range(1000):
        splitter.feed(b"x" * 1000)
        assert splitter.next_line() is None
        assert len(splitter._buffer) == 0  # nothing of the refused line is held
    splitter.feed(b"x\nnext\ntail")
    assert [splitter.next_line(), splitter.next_line()] == [b"next", None]
    assert splitter.end() == b"tail"

    splitter.feed(b"y" * 6)
    with pytest.raises(LineTooLong):
        splitter.next_line()
    assert splitter.end() is None


def test_the_end_of_input_gives_the_last_line_and_starts_afresh() -> None:
    """``end`` gives what followed the last ending (None if nothing did) and leaves
    the splitter as new, lines not yet taken still to be taken."""
    splitter = LineSplitter(100, ends="any")
    splitter.feed(b"a\nb\r")
    assert splitter.end() is None
    assert [splitter.next_line(), splitter.next_line(), splitter.next_line()] == [b"a", b"b", None]
    splitter.feed(b"half")
    assert splitter.end() == b"half"
    splitter.feed(b"\nnew\n")  # an LF after the end is no longer half of anything's CRLF
    assert [splitter.next_line(), splitter.next_line()] == [b"", b"new"]


def test_a_limit_below_zero_is_refused() -> None:
    """A negative limit would refuse every line, an empty one too: it is a ValueError."""
    with pytest.raises(ValueError, match="limit"):
        LineSplitter(-1, ends="lf")


@pytest.mark.parametrize("ends", typing.get_args(Ends))
def test_a_long_line_fed_a_byte_at_a_time_costs_linear_time(ends: Ends) -> None:
    """Each feed searches only its own bytes for an ending: 5 MB a byte at a time is
    quick, where searching the line so far at each feed is 1.25e13 bytes of search
    (a timeout, even at memrchr's speed: 400 KB took 0.9 s, 5 MB would take 150 s)."""
    size = 5_000_000
    splitter = LineSplitter(size + 1, ends=ends)
    for _ in range(size):
        splitter.feed(b"x")
    assert splitter.next_line() is None
    splitter.feed(b"\r\n")
    assert splitter.next_line() == b"x" * size + (b"\r" if ends == "lf" else b"")
    assert splitter.next_line() is None


@pytest.mark.parametrize("ends", typing.get_args(Ends))
def test_millions_of_lines_in_one_feed_cost_linear_time(ends: Ends) -> None:
    """Lines leave the front of the buffer without moving what is behind them: 4
    million empty lines in one feed are quick, where copying the rest per line is
    8e12 bytes copied (a timeout)."""
    count = 4_000_000
    splitter = LineSplitter(10, ends=ends)
    splitter.feed(b"\n" * count + b"last")
    taken = 0
    while splitter.next_line() is not None:
        taken += 1
    assert taken == count
    assert splitter.end() == b"last"
