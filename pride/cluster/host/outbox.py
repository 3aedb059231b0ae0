"""What a host sends back to its callers, queued per connection and handed over in bulk.

The runtime queues each answer for its connection (`Outbox.send`); once per
trio scheduling round one task hands every connection's queue to the glue
thread (`Outbound.post`), which numbers it and returns it with a waiting
delivery or poll. A turn's start, for an ask, may wait `LAZY_FLUSH` seconds
for company, and a short turn's outcome replaces it (the outcome carries the
turn id too): so a short ask costs one answer, not two. How much room a
branch's mailbox has is read once per hand-over, not per answer: the last
outcome for that branch in the batch carries it (read when the batch is
handed over, so it is as fresh as the batch). Turn ids noted for
the envelope journal go with the answers handed over next, once per round:
no wake of the glue thread of their own, and one journal transaction for all
of them, not one per turn.
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
_OUTCOMES = frozenset({"done", "refused"})


class Outbound(Protocol):
    """Where the runtime hands what it sends back (the glue thread's outboxes)."""

    def post(self, conn: str, items: list[dict[str, Any]], *, lazy: bool = False) -> None:
        """Hand ``items`` over for ``conn``; ``lazy``: no hurry (turn starts, or outcomes
        of a branch with more work waiting), so they may gather with what follows."""
        ...


class Outbox:
    """The per-connection queues of one host (see the module docstring).

    ``turn_notes``, when set, is given the ``(envelope id, turn id)`` pairs
    noted since the last round.
    """

    def __init__(
        self,
        outbound: Outbound,
        host: str,
        backlog: Callable[[Any], tuple[int, int]] | None = None,
    ) -> None:
        self.outbound = outbound
        self.host = host
        self._backlog = backlog  # a branch's mailbox now: its room, and how much waits in it
        self.turn_notes: Callable[[list[tuple[str, str]]], None] | None = None
        self._queues: dict[str, list[dict[str, Any]]] = {}
        self._scheduled: set[str] = set()
        self._due: list[str] = []
        self._flush_due = trio.Event()
        self._starts: dict[str, dict[str, dict[str, Any]]] = {}  # conn: {envelope id: start}
        self._lazy: set[str] = set()
        self._lazy_due = trio.Event()
        self._notes: list[tuple[str, str]] = []
        # conn: {branch name: (branch, the last item to carry its room)}
        self._rooms: dict[str, dict[str, tuple[Any, dict[str, Any]]]] = {}

    def send(
        self,
        conn: str,
        item: dict[str, Any],
        *,
        supersedes: str | None = None,
        room_of: Any = None,
    ) -> None:
        """Queue ``item`` for ``conn``, handed over at the end of this round.

        ``supersedes`` names an envelope whose start, still waiting (see
        `send_start`), this item replaces. ``room_of`` is a branch whose
        mailbox's room the item reports (as ``"room"``): only the last such
        item of a hand-over gets it, read then.
        """
        if supersedes is not None:
            starts = self._starts.get(conn)
            if starts is not None:
                starts.pop(supersedes, None)
        if room_of is not None:
            rooms = self._rooms.get(conn)
            if rooms is None:
                rooms = self._rooms[conn] = {}
            rooms[room_of.name] = (room_of, item)
        self._queues.setdefault(conn, []).append(item)
        if conn not in self._scheduled:
            self._scheduled.add(conn)
            self._due.append(conn)
            self._flush_due.set()

    def send_start(self, conn: str, envelope_id: str, item: dict[str, Any]) -> None:
        """Queue an envelope's start for ``conn``, handed over with the connection's
        next answers or within `LAZY_FLUSH` seconds; its outcome may replace it."""
        self._starts.setdefault(conn, {})[envelope_id] = item
        if conn not in self._lazy:
            self._lazy.add(conn)
            self._lazy_due.set()

    def note_turn(self, envelope_id: str, turn_id: str) -> None:
        """Tell the journal which turn an envelope started, with the next answers handed
        over (the turn's start or outcome): never a wake of the glue thread of its own,
        which would write to the journal while the turn runs."""
        if self.turn_notes is not None:
            self._notes.append((envelope_id, turn_id))

    def forget(self, conn: str) -> None:
        """Drop what ``conn`` is owed (it is gone)."""
        self._queues.pop(conn, None)
        self._starts.pop(conn, None)
        self._rooms.pop(conn, None)
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
            self._hand_notes()

    async def _flush_lazily(self) -> None:
        while True:
            await self._lazy_due.wait()
            await trio.sleep(LAZY_FLUSH)
            self._lazy_due = trio.Event()
            lazy, self._lazy = self._lazy, set()
            for conn in lazy:
                if conn not in self._scheduled:
                    self._flush(conn, lazy=True)
            self._hand_notes()

    def _hand_notes(self) -> None:
        notes, self._notes = self._notes, []
        if notes and self.turn_notes is not None:
            try:
                self.turn_notes(notes)
            except Exception:  # the journal's turn ids are a record, never a reason to stop
                log.exception("host %r: could not note %d turn ids", self.host, len(notes))

    def _flush(self, conn: str, *, lazy: bool = False) -> None:
        self._scheduled.discard(conn)
        starts = self._starts.pop(conn, None)
        items = self._queues.pop(conn, None)
        rooms = self._rooms.pop(conn, None)
        busy = False
        if rooms and self._backlog is not None:
            for branch, item in rooms.values():
                item["room"], waiting = self._backlog(branch)
                busy = busy or waiting > 0
        if busy and items and all(item["k"] in _OUTCOMES for item in items):
            # Only outcomes, and more follow soon: they may gather (see `Outbound.post`).
            lazy = True
        if starts:  # before anything queued after them
            items = [*starts.values(), *(items or ())]
        if items:
            try:
                self.outbound.post(conn, items, lazy=lazy)
            except Exception:  # raising in a run_sync_soon callback would kill the trio loop
                log.exception("host %r: could not hand %d items to %s", self.host, len(items), conn)
