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
        seconds: the delay of [`slow_first_byte`][pride.testing.Fault.slow_first_byte].
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
        cls, body: bytes | str | Any, *, status: int = 200, content_type: str = "application/json"
    ) -> Fault:
        """Answer with exactly this body (bytes, text, or an object sent as JSON).

        For replies no other item produces: odd shapes, bad tool-call
        arguments, an error event inside a 200 event stream
        (``content_type="text/event-stream"``), ...
        """
        return cls("raw", code=status, body=body, content_type=content_type)

    @classmethod
    def stall_stream(cls, after_chunks: int = 1, reply: Any = None) -> Fault:
        """Send ``after_chunks`` SSE events, then wait until the client hangs up.

        Each hang-up is counted in ``server.disconnects``; see
        ``server.wait_for_disconnects``. Useful to test that leaving a stream
        early closes the connection.
        """
        return cls("stall_stream", after_chunks=after_chunks, reply=reply)
