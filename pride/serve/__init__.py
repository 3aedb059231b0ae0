"""``pride serve``: a supervisor tree behind HTTP (the front door).

The long-running agent process, shared over the network: a native API for
pride's commands in their wire form (ask, stream, send, approvals, events,
metrics), an OpenAI-compatible endpoint (``/v1/models``,
``/v1/chat/completions``) for chat UIs and SDKs, bearer tokens with scopes,
and the actor guarantees kept across the wire: per-branch order,
backpressure (503 with ``Retry-After`` rather than an unbounded queue),
cancellation when a client goes away, committed before answered.

Needs hypercorn (``pip install 'pride[serve]'``), imported when a server
starts. `pride.client` is the client, on httpx, for asyncio and trio apps.
See docs/serve.md.

* `Server`: one front door for a running session (``await
  nursery.start(server.run)`` gives its URL; ``server.shutdown()`` drains).
* `ServeOptions`: where it listens and what it lets through.
* `Tokens`: who may call it, and what each token reaches.
"""

from __future__ import annotations

from .._public import publish as _publish
from ._auth import Grant as Grant, TokenError as TokenError, Tokens as Tokens
from ._options import MAX_BODY_BYTES as MAX_BODY_BYTES, ServeOptions as ServeOptions
from ._server import Server as Server
from ._status import STATUS as STATUS

__all__ = [
    "ANNOUNCE",
    "MAX_BODY_BYTES",
    "STATUS",
    "Grant",
    "ServeOptions",
    "Server",
    "TokenError",
    "Tokens",
]

ANNOUNCE = "pride serve: serving on "
"""How the line on standard output that gives the server's URL begins."""

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
