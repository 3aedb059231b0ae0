"""A real host with a smaller message limit: what it takes and returns is capped at 1 MiB.

`HostActor.max_message_bytes` bounds the batches a host accepts and the answers
it returns; this subclass lowers it, so a test proves the cap's properties
with small sizes (and a host whose limit is below its caller's, as after an
upgrade of one side, refuses batches the caller sent in good faith).
"""

from __future__ import annotations

from pride.cluster.host.actor import HostActor


class SmallHost(HostActor):
    max_message_bytes = 1024 * 1024
