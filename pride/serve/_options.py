"""The settings of one front door (``pride serve``'s options), as one frozen value."""

from __future__ import annotations

import attrs

from ..messages.limits import image_url_prefixes

__all__ = ["MAX_BODY_BYTES", "ServeOptions"]

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request body by default (16 MiB: an instruction with a few images inline),
the same bound as a ``pride run`` request line."""


def _prefixes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return image_url_prefixes(*values)


def _strings(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    return tuple(values)


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not value > 0:
        raise ValueError(f"{attribute.name} must be a positive number, got {value!r}")


@attrs.frozen
class ServeOptions:
    """How a front door listens and what it lets through.

    Attributes:
        host: the address to listen on (127.0.0.1: only this machine).
        port: the port (0: a free one, chosen by the system).
        max_body_bytes: the largest request body; a larger one is 413.
        max_concurrent: requests running turns at once; more wait up to
            ``queue_wait`` for a place, then get 503.
        max_watchers: event streams (``GET /v1/events``) open at once, places
            of their own apart from ``max_concurrent``'s; more wait up to
            ``queue_wait``, then get 503.
        queue_wait: seconds a request waits for a place, or for room in a
            full mailbox, before it is answered 503 with ``Retry-After``.
        header_timeout: seconds a connection has to send a complete request
            head (from its opening, or from its previous answer).
        body_timeout: seconds a request's body has to arrive, whole.
        send_timeout: seconds an answer's writes may wait for the client to
            take some of its bytes (a request runs at most a few writes ahead
            of its client); past it the client is taken for gone (its turn
            cancelled, as when it disconnects).
        keepalive: seconds between keep-alive comments of an idle event stream.
        image_urls: image URL prefixes a command may carry besides ``data:``
            URLs (``--allow-image-url``).
        allow_hosts: ``Host`` values allowed besides the server's own (``--allow-host``).
        allow_origins: ``Origin`` values allowed besides its own (``--allow-origin``).
        console: serve the live console at ``/`` (``--console``; docs/console.md).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    max_body_bytes: int = MAX_BODY_BYTES
    max_concurrent: int = 128
    max_watchers: int = 64
    queue_wait: float = attrs.field(default=1.0, validator=_positive)
    header_timeout: float = attrs.field(default=10.0, validator=_positive)
    body_timeout: float = attrs.field(default=30.0, validator=_positive)
    send_timeout: float = attrs.field(default=30.0, validator=_positive)
    keepalive: float = attrs.field(default=15.0, validator=_positive)
    image_urls: tuple[str, ...] = attrs.field(default=(), converter=_prefixes)
    allow_hosts: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    allow_origins: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    console: bool = False

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be within 0..65535, got {self.port}")
        for name in ("max_body_bytes", "max_concurrent", "max_watchers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int of at least 1, got {value!r}")
