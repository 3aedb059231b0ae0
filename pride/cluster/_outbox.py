"""What a host sends back to its callers, queued per connection and handed over in bulk.

The runtime queues each answer for its connection (`Outbox.send`); once per
trio scheduling round one task hands every connection's queue to the glue
thread (`Outbound.post`), which numbers it and returns it with a waiting
delivery or poll. An answer nobody waits on (a turn's start, for an ask)
may wait `LAZY_FLUSH` seconds for company, so a short turn's start leaves
with its outcome. Turn ids noted for the envelope journal travel the same
way, once per round: one wake of the glue thread and one journal
transaction for all of them, not one per turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import trio

__all__ = ["LAZY_FLUSH", "Outbound", "Outbox"]

log = logging.getLogger("pride.cluster")

LAZY_FLUSH = 0.002
"""Seconds an answer that nobody waits on (a turn's start) may wait for company."""


class Outbound(Protocol):
    """Where the runtime hands what it sends back (the glue thread's outboxes)."""

    def post(self, conn: str, items: list[dict[str, Any]]) -> None: ...


class Outbox:
    """The per-connection queues of one host (see the module docstring).

    ``turn_notes``, when set, is given the ``(envelope id, turn id)`` pairs
    noted since the last round.
    """

    def __init__(self, outbound: Outbound, host: str) -> None:
        self.outbound = outbound
        self.host = host
        self.turn_notes: Callable[[list[tuple[str, str]]], None] | None = None
        self._queues: dict[str, list[dict[str, Any]]] = {}
        self._scheduled: set[str] = set()
        self._due: list[str] = []
        self._flush_due = trio.Event()
        self._lazy: set[str] = set()
        self._lazy_due = trio.Event()
        self._notes: list[tuple[str, str]] = []

    def send(self, conn: str, item: dict[str, Any], *, lazy: bool = False) -> None:
        """Queue ``item`` for ``conn``: handed over at the end of this round, or
        (``lazy``) within `LAZY_FLUSH` seconds, with whatever else is queued by then."""
        self._queues.setdefault(conn, []).append(item)
        if conn in self._scheduled:
            return
        if lazy:
            self._lazy.add(conn)
            self._lazy_due.set()
            return
        self._scheduled.add(conn)
        self._due.append(conn)
        self._flush_due.set()

    def note_turn(self, envelope_id: str, turn_id: str) -> None:
        """Tell the journal, with this round's answers, which turn an envelope started."""
        if self.turn_notes is not None:
            self._notes.append((envelope_id, turn_id))
            self._flush_due.set()

    def forget(self, conn: str) -> None:
        """Drop what ``conn`` is owed (it is gone)."""
        self._queues.pop(conn, None)
        self._scheduled.discard(conn)
        self._lazy.discard(conn)

    async def run(self) -> None:
        """Hand queued answers over until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._flush_lazily)
            await self._flush_soon()

    async def _flush_soon(self) -> None:
        # One task woken by an event: cheaper than a ``run_sync_soon`` per connection
        # and round, which writes to the loop's wakeup socket each time.
        while True:
            await self._flush_due.wait()
            self._flush_due = trio.Event()
            due, self._due = self._due, []
            for conn in due:
                self._flush(conn)
            notes, self._notes = self._notes, []
            if notes and self.turn_notes is not None:
                self.turn_notes(notes)

    async def _flush_lazily(self) -> None:
        while True:
            await self._lazy_due.wait()
            await trio.sleep(LAZY_FLUSH)
            self._lazy_due = trio.Event()
            lazy, self._lazy = self._lazy, set()
            for conn in lazy:
                if conn not in self._scheduled:
                    self._flush(conn)

    def _flush(self, conn: str) -> None:
        self._scheduled.discard(conn)
        items = self._queues.pop(conn, None)
        if items:
            try:
                self.outbound.post(conn, items)
            except Exception:  # raising in a run_sync_soon callback would kill the trio loop
                log.exception("host %r: could not hand %d items to %s", self.host, len(items), conn)
