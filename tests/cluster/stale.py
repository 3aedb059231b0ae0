"""A real host that drops a silent connection within seconds, not minutes.

`HostActor.stale_after` is how long a connection owed answers may make no call
(no poll, no delivery) before the host takes its caller for gone; this subclass
shortens it, and says what a connection is owed, so a test sees a dead caller's
answers stop piling up.
"""

from __future__ import annotations

from pride.cluster.host.actor import HostActor


class StaleHost(HostActor):
    stale_after = 3.0

    async def owed(self, conn: str) -> int | None:
        """How many answers ``conn`` is owed (None: the host holds no list for it)."""
        with self._lock:
            owed = self._outboxes.get(conn)
            return None if owed is None else len(owed)
