"""Replies that never end, or end far too slowly: the loopback server's hostile faults.

Each writer sends a response head and then body bytes until the client hangs
up (`Fault.endless_body`, `Fault.endless_line`, `Fault.endless_events`) or
drips a whole reply one byte at a time (`Fault.trickle`). The endless ones
repeat one preallocated piece, so the server's own memory stays flat however
much it sends: a test can measure the client's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import h11
import trio

__all__ = ["PIECE_BYTES", "endless_parts", "send_endless", "send_trickle"]

#: Bytes sent per write by the endless faults.
PIECE_BYTES = 64 * 1024

_SSE_HEAD = [("content-type", "text/event-stream"), ("cache-control", "no-cache")]


def _openai_delta(text: str) -> bytes:
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _typed_event(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _repeat(unit: bytes) -> bytes:
    return unit * max(1, PIECE_BYTES // len(unit))


def endless_parts(kind: str, wire: str) -> tuple[list[tuple[str, str]], bytes, bytes]:
    """The head, the opening bytes and the repeated piece of an endless reply.

    ``kind`` is ``"body"`` (a JSON body whose string never closes), ``"line"``
    (an event stream whose first line never ends) or ``"events"`` (valid text
    deltas forever); ``wire`` is ``"openai"``, ``"anthropic"`` or ``"responses"``.
    """
    if kind == "body":
        if wire == "openai":
            opening = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "'
        else:
            opening = b'{"type": "message", "content": [{"type": "text", "text": "'
        return [("content-type", "application/json")], opening, _repeat(b"x")
    if kind == "line":
        return _SSE_HEAD, b'data: {"choices": [{"index": 0, "delta": {"content": "', _repeat(b"x")
    if wire == "openai":
        return _SSE_HEAD, b"", _repeat(_openai_delta("endless "))
    if wire == "responses":
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_endless",
            "output_index": 0,
            "content_index": 0,
            "delta": "endless ",
        }
        return _SSE_HEAD, b"", _repeat(_typed_event(delta))
    start: dict[str, Any] = {
        "type": "message_start",
        "message": {"type": "message", "role": "assistant", "model": "loopback", "content": []},
    }
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    delta = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "endless "},
    }
    opening = _typed_event(start) + _typed_event(block)
    return _SSE_HEAD, opening, _repeat(_typed_event(delta))


async def send_endless(
    conn: h11.Connection,
    stream: trio.SocketStream,
    parts: tuple[Sequence[tuple[str, str]], bytes, bytes],
    content_length: int | None = None,
) -> None:
    """Send the head and opening of ``parts``, then its piece again and again,
    until the client hangs up (see `endless_parts`).

    With ``content_length`` the head declares that length (and no more than
    it is sent); without, the body is chunked and has no end.
    """
    head, opening, piece = parts
    headers = list(head)
    if content_length is not None:
        headers.append(("content-length", str(content_length)))
    left = content_length
    try:
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=headers)) or b"")
        for piece_or_opening in itertools.chain((opening,), itertools.repeat(piece)):
            data = piece_or_opening if left is None else piece_or_opening[:left]
            if left is not None:
                left -= len(data)
            if data:
                await stream.send_all(conn.send(h11.Data(data=data)) or b"")
            if left == 0:
                await _wait_for_hangup(stream)
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return  # the client hung up: what this fault waits for


async def send_trickle(
    conn: h11.Connection,
    stream: trio.SocketStream,
    head: Sequence[tuple[str, str]],
    body: bytes,
    interval: float,
) -> bool:
    """Send ``body`` one byte every ``interval`` seconds; return whether it was all sent."""
    try:
        await stream.send_all(conn.send(h11.Response(status_code=200, headers=list(head))) or b"")
        for index in range(len(body)):
            await trio.sleep(interval)
            await stream.send_all(conn.send(h11.Data(data=body[index : index + 1])) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


async def _wait_for_hangup(stream: trio.SocketStream) -> None:
    try:
        while await stream.receive_some(PIECE_BYTES):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # a reset is a hang-up too
