"""A real host whose deliveries wait for their answers: no linger timer to race.

`HostActor` lets a delivery linger a few milliseconds for answers to carry
back; this subclass makes it wait until one comes (an hour), so a test can
cancel a delivery while it waits, and look at what the host still holds.
"""

from __future__ import annotations

import asyncio

from pride.cluster.host.actor import HostActor


class LingeringHost(HostActor):
    delivery_linger = 3600.0

    async def deliveries_waiting(self, conn: str) -> int | None:
        """How many deliveries of ``conn`` wait (None: the host holds no list for it)."""
        with self._lock:
            waiters = self._deliverers.get(conn)
            return None if waiters is None else len(waiters)

    async def until_delivery_waits(self, conn: str) -> None:
        """Return once a delivery of ``conn`` waits for answers."""
        # The delivery's call may not have started yet: look again each loop round
        # (it registers its waiter and starts waiting without a pause in between).
        while not self._deliverers.get(conn):
            await asyncio.sleep(0.001)
