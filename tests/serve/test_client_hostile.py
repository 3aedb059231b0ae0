"""`pride.client` against a hostile server: what it sends back is as untrusted as a
provider's bytes, so each answer it cannot read is a typed error, never a crash.

The server is a real loopback socket (trio's ``serve_tcp``) that answers every
request with one canned HTTP/1.1 response and closes the connection.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import pytest
import trio

import pride
from pride import ChatAndRecord, Run
from pride.client import AnswerTooLarge, Client, RequestRefused

DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested past the standard library's reach: it raises RecursionError."""


def _response(status: str, headers: dict[str, bytes], body: bytes, *, length: bool = True) -> bytes:
    """An HTTP/1.1 response; without ``length`` its body runs to the connection's end."""
    lines = [f"HTTP/1.1 {status}".encode()]
    lines += [name.encode() + b": " + value for name, value in headers.items()]
    if length:
        lines.append(b"content-length: " + str(len(body)).encode())
    lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _answer(stream: trio.SocketStream, response: bytes) -> None:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = await stream.receive_some()
        if not chunk:
            return
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = await stream.receive_some()
        if not chunk:
            return
        body += chunk
    # The client drops the connection once it has read enough: the rest is not sent.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(response)
    await stream.aclose()


@attrs.define
class Hostile:
    """The server: its URL, and the response it gives every request (set by the test)."""

    url: str
    response: bytes = b""


@pytest.fixture
async def hostile(nursery: trio.Nursery) -> AsyncIterator[Hostile]:
    server = Hostile("")

    async def handler(stream: trio.SocketStream) -> None:
        await _answer(stream, server.response)

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    server.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"
    yield server


async def test_an_error_body_nested_too_deeply_to_read_is_a_refusal(hostile: Hostile) -> None:
    hostile.response = _response(
        "500 Internal Server Error", {"content-type": b"application/json"}, DEEP
    )
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(RequestRefused) as refused:
            await client.ask("writer", ChatAndRecord(instruction="x"))
    assert refused.value.status == 500


async def test_a_success_body_nested_too_deeply_to_read_is_a_refusal(hostile: Hostile) -> None:
    hostile.response = _response("200 OK", {"content-type": b"application/json"}, DEEP)
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(RequestRefused) as refused:
            await client.ask("writer", ChatAndRecord(instruction="x"))
    assert refused.value.status == 200


@pytest.mark.parametrize(
    "retry_after", [b"\xb2", b"\xb9\xb2", b"1e9", b"-1", b"99999999999999999999"]
)
async def test_a_retry_after_that_is_no_number_of_seconds_is_left_out(
    hostile: Hostile, retry_after: bytes
) -> None:
    """``Retry-After: ²`` passes ``str.isdigit`` (and ``float`` refuses it): a header
    the client cannot read as whole seconds is None, the refusal raised all the same."""
    body = b'{"error": {"type": "Overloaded", "message": "busy"}}'
    headers = {"content-type": b"application/json", "retry-after": retry_after}
    hostile.response = _response("503 Service Unavailable", headers, body)
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(RequestRefused) as refused:
            await client.ask("writer", ChatAndRecord(instruction="x"))
    assert refused.value.status == 503 and refused.value.kind == "Overloaded"
    expected = float(retry_after) if retry_after.isdigit() else None  # ASCII digits only
    assert refused.value.retry_after == expected


async def test_an_event_nested_too_deeply_to_read_is_invalid(hostile: Hostile) -> None:
    events = b"data: " + DEEP + b"\n\n"
    hostile.response = _response("200 OK", {"content-type": b"text/event-stream"}, events)
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(pride.InvalidMessage, match="not JSON"):
            async with client.stream("writer", Run(instruction="x")) as items:
                async for _ in items:
                    pass


JSON = {"content-type": b"application/json"}


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "undeclared"])
async def test_an_answer_past_max_answer_bytes_is_too_large(
    hostile: Hostile, declared: bool
) -> None:
    """A declared length past the bound is refused unread; an undeclared one is
    counted as it comes and cut at the bound."""
    body = b'{"ok": true, "result": "' + b"x" * 2_000_000 + b'"}'
    hostile.response = _response("200 OK", JSON, body, length=declared)
    async with Client(hostile.url, "token-0123456789", max_answer_bytes=1_000_000) as client:
        with pytest.raises(AnswerTooLarge) as too_large:
            await client.ask("writer", ChatAndRecord(instruction="x"))
    assert (too_large.value.limit, too_large.value.allowed) == ("max_answer_bytes", 1_000_000)


async def test_an_error_answer_past_the_bound_is_too_large_too(hostile: Hostile) -> None:
    hostile.response = _response("500 Internal Server Error", JSON, b"x" * 2_000_000, length=False)
    async with Client(hostile.url, "token-0123456789", max_answer_bytes=1_000_000) as client:
        with pytest.raises(AnswerTooLarge):
            await client.ask("writer", ChatAndRecord(instruction="x"))
        with pytest.raises(AnswerTooLarge):  # a stream refused with a long body
            async with client.stream("writer", Run(instruction="x")):
                pass


async def test_a_compressed_answer_is_bounded_after_inflation(hostile: Hostile) -> None:
    """The client asks for no compression; a server compressing anyway is read
    inflated, and the bound counts the inflated bytes (10 MB of zeros in 10 KB)."""
    body = gzip.compress(b'{"ok": true, "result": "' + b"0" * 10_000_000 + b'"}')
    hostile.response = _response("200 OK", {**JSON, "content-encoding": b"gzip"}, body)
    async with Client(hostile.url, "token-0123456789", max_answer_bytes=1_000_000) as client:
        with pytest.raises(AnswerTooLarge):
            await client.ask("writer", ChatAndRecord(instruction="x"))


async def test_an_event_past_max_event_bytes_is_too_large(hostile: Hostile) -> None:
    events = b"data: " + b"x" * 200_000 + b"\n\n"
    hostile.response = _response("200 OK", {"content-type": b"text/event-stream"}, events)
    async with Client(hostile.url, "token-0123456789", max_event_bytes=100_000) as client:
        with pytest.raises(AnswerTooLarge) as too_large:
            async with client.stream("writer", Run(instruction="x")) as items:
                async for _ in items:
                    pass
    assert (too_large.value.limit, too_large.value.allowed) == ("max_event_bytes", 100_000)


async def _call(client: Client, method: str) -> Any:
    """Call ``method`` of ``client`` to the end (a stream or events read whole)."""
    if method == "ask":
        return await client.ask("writer", ChatAndRecord(instruction="x"))
    if method == "send":
        return await client.send("writer", ChatAndRecord(instruction="x"))
    if method == "approvals":
        return await client.approvals()
    if method == "branches":
        return await client.branches()
    if method == "messages":
        return await client.messages("writer")
    if method == "stream":
        async with client.stream("writer", Run(instruction="x")) as items:
            return [item async for item in items]
    async with client.events() as signals:
        return [signal async for signal in signals]


SSE = {"content-type": b"text/event-stream"}


@pytest.mark.parametrize(
    ("method", "headers", "body", "where"),
    [
        ("ask", JSON, b'{"ok": true, "result": 1, "turn_id": "not-a-uuid"}', "answer.turn_id"),
        ("ask", JSON, b'{"ok": true, "result": 1, "turn_id": 5}', "answer.turn_id"),
        ("ask", JSON, b'{"ok": true, "result": 1, "turn_id": 0}', "answer.turn_id"),
        ("ask", JSON, b'{"ok": true, "result": 1, "turn_id": ""}', "answer.turn_id"),
        ("send", JSON, b'{"ok": true}', "answer.turn_id"),
        ("send", JSON, b'{"ok": true, "turn_id": [1]}', "answer.turn_id"),
        ("approvals", JSON, b'{"ok": true}', "answer.approvals"),
        ("approvals", JSON, b'{"ok": true, "approvals": 5}', "answer.approvals"),
        ("branches", JSON, b'{"ok": true}', "answer.session"),
        ("branches", JSON, b'{"ok": true, "session": 5}', "answer.session"),
        ("messages", JSON, b'{"ok": true}', "answer.messages"),
        ("stream", SSE, b'data: {"event": "start", "turn_id": "zzz"}\n\n', "event.turn_id"),
        ("stream", SSE, b'data: {"event": "start", "turn_id": 7}\n\n', "event.turn_id"),
        ("stream", SSE, b'data: {"event": "start", "turn_id": false}\n\n', "event.turn_id"),
        ("events", SSE, b'data: {"type": "RunEnd", "turn_id": 5}\n\n', "RunEnd.turn_id"),
    ],
)
async def test_an_answer_of_the_wrong_shape_is_invalid_naming_where(
    hostile: Hostile, method: str, headers: dict[str, bytes], body: bytes, where: str
) -> None:
    """JSON the client can read but not use (a field missing, of the wrong type, a
    turn id that is none) raised a bare ``KeyError``, ``TypeError``, ``ValueError``
    or ``AttributeError`` from deep in the client; it is an ``InvalidMessage``
    naming the field, as a provider's reply of the wrong shape is."""
    hostile.response = _response("200 OK", headers, body)
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(pride.InvalidMessage) as invalid:
            await _call(client, method)
    assert invalid.value.path == where, invalid.value


@pytest.mark.parametrize("kind", ["Escalate", "LoopBreak", "StopStream", "Defer"])
async def test_an_error_only_the_runtime_raises_is_a_refusal(hostile: Hostile, kind: str) -> None:
    """A server naming a class pride's runtime raises to steer itself (crash the
    branch, end a loop or a stream, ask for approval) cannot steer the caller's:
    it is a `RequestRefused` of that kind, never the class itself."""
    body = b'{"ok": false, "error": {"type": "' + kind.encode() + b'", "message": "x"}}'
    hostile.response = _response("500 Internal Server Error", JSON, body)
    async with Client(hostile.url, "token-0123456789") as client:
        with pytest.raises(RequestRefused) as refused:
            await client.ask("writer", ChatAndRecord(instruction="x"))
    assert refused.value.kind == kind and not isinstance(refused.value, getattr(pride, kind))


@pytest.mark.parametrize("bound", ["max_answer_bytes", "max_event_bytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_the_bounds_are_positive_numbers_of_bytes(bound: str, value: object) -> None:
    with pytest.raises(ValueError, match=bound):
        Client("http://127.0.0.1:1", "token-0123456789", **{bound: value})  # type: ignore[arg-type]


async def test_events_a_read_completes_by_the_million_are_taken_in_linear_time() -> None:
    """A transport may hand over a whole answer in one read (an httpx transport the
    application gives: a proxy's, a test's); the events it completes were then taken
    from the front of a list one by one, each moving the rest (1 MiB of events took
    1.2 s, 4 MiB 13 s, 16 MiB 216 s). Taken in order from a deque, 16 MiB is quick
    (a timeout if it is not)."""
    body = b"data:{}\n\n" * 1_900_000 + b'data: {"event": "end"}\n\n'  # 16 MiB, skipped events

    async def answer(request: httpx.Request) -> httpx.Response:
        events = httpx.ByteStream(body)  # one read
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=events)

    transport = httpx.MockTransport(answer)
    async with Client("http://pride.test", "token-0123456789", transport=transport) as client:
        async with client.stream("writer", Run("x")) as items:
            assert [item async for item in items] == []
