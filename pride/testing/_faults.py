"""Fault: a scripted misbehaviour of the loopback server, for one request."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Fault"]


@attrs.frozen
class Fault:
    """One way for the loopback server to misbehave, used as a script item.

    Build faults with the class methods; each applies to the one request that
    takes it from the script:

    ```python
    script = [Fault.status(429, retry_after=0), "fine now"]
    ```

    Attributes:
        kind: which fault (set by the constructors).
        code: the HTTP status for [`status`][pride.testing.Fault.status].
        retry_after: the ``Retry-After`` header value, if any.
        content_type: the ``Content-Type`` of a [`raw`][pride.testing.Fault.raw] reply.
        body: the error body (``bytes``, ``str`` or a JSON-able object);
            ``None`` gives a provider-shaped error document.
        seconds: the delay of
            [`slow_first_byte`][pride.testing.Fault.slow_first_byte]; the pause
            between bytes of [`trickle`][pride.testing.Fault.trickle].
        content_length: the length an
            [`endless_body`][pride.testing.Fault.endless_body] declares.
        headers: extra response headers of a [`raw`][pride.testing.Fault.raw] reply.
        after_chunks: SSE events sent before a cut or a stall.
        reply: what to serve around the fault (``None``: echo the request).
    """

    kind: str
    code: int = 200
    content_type: str = "application/json"
    retry_after: float | str | None = None
    body: Any = None
    seconds: float = 0.0
    after_chunks: int = 0
    reply: Any = None
    content_length: int | None = None
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def status(
        cls, code: int, *, retry_after: float | str | None = None, body: Any = None
    ) -> Fault:
        """Answer with HTTP ``code`` (429, 500, 503, 401, ...) and an error body.

        ``retry_after`` sets the ``Retry-After`` header (seconds, or an HTTP date).
        """
        if code < 400:
            raise ValueError(f"Fault.status is for error statuses (>= 400), got {code}")
        return cls("status", code=code, retry_after=retry_after, body=body)

    @classmethod
    def slow_first_byte(cls, seconds: float, reply: Any = None) -> Fault:
        """Wait ``seconds`` before sending anything, then serve ``reply``."""
        return cls("slow_first_byte", seconds=seconds, reply=reply)

    @classmethod
    def cut_stream(cls, after_chunks: int = 1, reply: Any = None) -> Fault:
        """Close the connection mid-reply.

        For a streaming request, after ``after_chunks`` SSE events (0: right
        after the response head); for a plain request, halfway through the body.
        """
        return cls("cut_stream", after_chunks=after_chunks, reply=reply)

    @classmethod
    def malformed_json(cls) -> Fault:
        """Answer 200 with a body that is not valid JSON."""
        return cls("malformed_json")

    @classmethod
    def malformed_sse(cls) -> Fault:
        """Answer 200 with an event stream whose events are not valid JSON."""
        return cls("malformed_sse")

    @classmethod
    def raw(
        cls,
        body: bytes | str | Any,
        *,
        status: int = 200,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> Fault:
        """Answer with exactly this body (bytes, text, or an object sent as JSON).

        For replies no other item produces: odd shapes, bad tool-call
        arguments, an error event inside a 200 event stream
        (``content_type="text/event-stream"``), a compressed body (with
        ``headers={"content-encoding": "gzip"}``), ...
        """
        extra = tuple((headers or {}).items())
        return cls("raw", code=status, body=body, content_type=content_type, headers=extra)

    @classmethod
    def stall_stream(cls, after_chunks: int = 1, reply: Any = None) -> Fault:
        """Send ``after_chunks`` SSE events, then wait until the client hangs up.

        Each hang-up is counted in ``server.disconnects``; see
        ``server.wait_for_disconnects``. Useful to test that leaving a stream
        early closes the connection.
        """
        return cls("stall_stream", after_chunks=after_chunks, reply=reply)

    @classmethod
    def endless_body(cls, *, content_length: int | None = None) -> Fault:
        """Answer 200 with a JSON body that never ends, until the client hangs up.

        The body opens a reply (``{"choices": [{"message": {"content": "xxx...``)
        and its string never closes. With ``content_length`` the head declares
        that length (a client may refuse it at once); without, the body is
        chunked. Each hang-up counts in ``server.disconnects``. For testing that
        a client bounds what it reads.
        """
        return cls("endless_body", content_length=content_length)

    @classmethod
    def endless_line(cls) -> Fault:
        """Answer an event stream whose first line never ends, until the client hangs up."""
        return cls("endless_line")

    @classmethod
    def endless_events(cls) -> Fault:
        """Answer an event stream of valid text deltas that never finishes.

        Each hang-up counts in ``server.disconnects``. For testing that a
        client bounds a whole stream (its size, or its time).
        """
        return cls("endless_events")

    @classmethod
    def trickle(cls, reply: Any = None, *, seconds: float = 0.05) -> Fault:
        """Serve ``reply`` (plain or streamed) one byte every ``seconds`` seconds.

        Every byte arrives well within any per-read timeout, so only a bound on
        the whole call stops it early. A hang-up counts in ``server.disconnects``.
        """
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds!r}")
        return cls("trickle", seconds=seconds, reply=reply)
