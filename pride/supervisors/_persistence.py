"""Sessions and the branch store: restore conversations on spawn, persist as they grow.

A session given a [`BranchStore`][pride.store.BranchStore] wires each member that has
a stable name (one given by code, so the same across process restarts):

* on spawn, a stored conversation with that name is restored into the branch
  (its id and messages; models, tools and providers are wired by code), or the
  branch is saved as a new entry;
* every recorded message is queued for the store as it is added, and a
  history changed otherwise (cleared, system message replaced) is queued as a
  rewrite of the stored conversation;
* every turn ends with one commit of what is queued (a turn barrier), before
  its terminal signal and before its caller is answered, so a crash loses at
  most the turn in flight.
"""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from ..actors import Branch
from ..messages import RoledMessage
from ..store import BranchStore

__all__ = ["Persistence"]

log = logging.getLogger("pride.session")


class Persistence:
    """The wiring between one store and the members of one session."""

    def __init__(self, store: BranchStore) -> None:
        self.store = store
        self._wired: dict[Branch, tuple[Any, Any, Any]] = {}

    async def restore_or_register(self, branch: Branch) -> bool:
        """Restore ``branch``'s conversation from the store, or save it as new.

        Returns True if a stored conversation was restored. Branches without
        a stable name are left alone (their names change between runs).
        """
        if not branch.stable_name or branch in self._wired:
            return False
        stored = await self.store.load(branch.name)
        restored = stored is not None
        if stored is not None:
            messages = await self.store.load_messages(branch.name)
            branch.id = UUID(stored["id"]) if "id" in stored else branch.id
            branch.id_str = str(branch.id)
            branch.messages.clear(keep_system=False)
            for message in messages:
                branch.messages.append(message)
            await self.store.register(branch.name)
            log.info("restored branch %r: %d messages", branch.name, len(messages))
        else:
            await self.store.save(branch)
        self._wire(branch)
        return restored

    def _wire(self, branch: Branch) -> None:
        store = self.store

        def persist(branch: Branch, message: RoledMessage) -> None:
            store.append(branch.name, message)

        def rewrite(branch: Branch) -> None:
            store.rewrite(branch.name, list(branch.messages))

        async def commit() -> None:
            # This branch's rows only: a commit that failed elsewhere fails the
            # turns whose rows it held, not this one.
            await store.flush(branch.name)

        branch.add_message_listener(persist)
        branch.add_rewrite_listener(rewrite)
        branch.actor.add_turn_barrier(commit)
        self._wired[branch] = (persist, rewrite, commit)

    def unwire(self, branch: Branch) -> None:
        """Stop persisting ``branch`` (it left the session)."""
        listeners = self._wired.pop(branch, None)
        if listeners is None:
            return
        persist, rewrite, commit = listeners
        branch.remove_message_listener(persist)
        branch.remove_rewrite_listener(rewrite)
        branch.actor.remove_turn_barrier(commit)
