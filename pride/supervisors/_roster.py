"""A session's children in start order, indexed by member, name and id.

The supervisor keeps its children here, and every question a spawn, a
remove or a send by name asks of them is a dictionary lookup: who is this
member's record, who has this name, who has this id. So spawning N members
costs O(N) in all, where rebuilding the set of taken names on every spawn
cost O(N^2) (10,000 members took over a minute). The indexes follow the
children: a child joins with `append`, leaves with `remove`, and a branch
renamed while it is a member is re-keyed by `rename` (``Branch.name`` tells
its session); a restart keeps the same record, so nothing changes then.

Names are unique among a session's children (stopped ones included, until
they are removed). Ids are unique in practice (uuid4), but two branches may
be built with one explicit id: the earliest started holder is indexed, the
others wait beside it, in start order.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any
from uuid import UUID

from ..branch import Branch
from ._child import Child

__all__ = ["Roster"]


class Roster:
    """The children of one supervisor, in start order, with their indexes.

    Iterating (forwards or with ``reversed``) walks a snapshot, so a loop
    that awaits may see children leave or join meanwhile without breaking.
    """

    __slots__ = ("_by_id", "_by_member", "_by_name", "_order", "_places", "_shared_ids")

    def __init__(self) -> None:
        self._order: dict[Child, None] = {}  # an ordered set: start order
        self._by_member: dict[int, Child] = {}  # id() of the member -> its record
        self._by_name: dict[str, Child] = {}
        self._by_id: dict[UUID, Child] = {}  # the earliest started holder of each id
        self._shared_ids: dict[UUID, list[Child]] = {}  # later holders of an id, if any
        self._places = itertools.count()

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[Child]:
        return iter(list(self._order))

    def __reversed__(self) -> Iterator[Child]:
        return reversed(list(self._order))

    def __contains__(self, child: object) -> bool:
        return child in self._order

    def __repr__(self) -> str:
        return f"<Roster of {len(self._order)}: {[child.name for child in self._order]!r}>"

    # ------------------------------------------------------------ changes

    def append(self, child: Child) -> None:
        """Add ``child`` last in start order.

        Raises:
            ValueError: it is here already, or another child has its name.
        """
        if child in self._order or id(child.actor) in self._by_member:
            raise ValueError(f"{child.name!r} is a child already")
        name = child.name
        if self.named(name) is not None:
            raise ValueError(f"another child is named {name!r}")
        child.place, child.indexed_as = next(self._places), name
        self._order[child] = None
        self._by_member[id(child.actor)] = child
        self._by_name[name] = child
        identity = child.actor.id
        if identity in self._by_id:
            self._shared_ids.setdefault(identity, []).append(child)
        else:
            self._by_id[identity] = child

    def remove(self, child: Child) -> None:
        """Take ``child`` out (its indexes too).

        Raises:
            ValueError: it is not here.
        """
        if child not in self._order:
            raise ValueError(f"{child.name!r} is not a child")
        del self._order[child]
        del self._by_member[id(child.actor)]
        if self._by_name.get(child.indexed_as) is child:
            del self._by_name[child.indexed_as]
        identity = child.actor.id
        others = self._shared_ids.get(identity)
        if self._by_id.get(identity) is child:
            if others:
                self._by_id[identity] = others.pop(0)
            else:
                del self._by_id[identity]
        elif others is not None and child in others:
            others.remove(child)
        if others is not None and not others:
            del self._shared_ids[identity]

    def rename(self, actor: Any, name: str) -> None:
        """Re-key ``actor``'s record under ``name`` (call before the name changes);
        nothing happens if ``actor`` is not a child.

        Raises:
            ValueError: another child has that name.
        """
        child = self.of(actor)
        if child is None:
            return
        holder = self.named(name)
        if holder is not None and holder is not child:
            raise ValueError(f"another child is named {name!r}")
        if self._by_name.get(child.indexed_as) is child:
            del self._by_name[child.indexed_as]
        self._by_name[name] = child
        child.indexed_as = name

    # ------------------------------------------------------------ lookups

    def of(self, actor: Any) -> Child | None:
        """The record of the member ``actor`` (by identity), if it is a child."""
        return self._by_member.get(id(actor))

    def named(self, name: Any) -> Child | None:
        """The child called ``name``, if any (a member renamed without telling
        the roster, a child session say, is no longer found under its old name)."""
        child = self._by_name.get(name) if isinstance(name, str) else None
        return child if child is not None and child.name == name else None

    def with_id(self, identity: UUID) -> list[Child]:
        """The children with this id, in start order (one, or none, in practice)."""
        first = self._by_id.get(identity)
        return [] if first is None else [first, *self._shared_ids.get(identity, ())]

    def find(self, ref: Any) -> Child | None:
        """The child ``ref`` designates: a member (by identity), a name, an id,
        or an id's canonical text; the earliest started if several match."""
        if isinstance(ref, UUID):
            return self._by_id.get(ref)
        if isinstance(ref, str):
            found = [child for child in (self.named(ref),) if child is not None]
            identity = _as_uuid(ref) if len(ref) == _CANONICAL_UUID else None
            if identity is not None and str(identity) == ref:  # only the canonical text here
                found += self.with_id(identity)[:1]
            return min(found, key=_place, default=None)
        return self.of(ref)

    def branch(self, ref: Any) -> Branch | None:
        """The child branch with the id ``ref`` (a UUID or any text of one), else
        the one named ``ref``."""
        identity = ref if isinstance(ref, UUID) else _id_in(ref) if isinstance(ref, str) else None
        if identity is not None:
            for holder in self.with_id(identity):
                if isinstance(holder.actor, Branch):
                    return holder.actor
        named = self.named(ref)
        return named.actor if named is not None and isinstance(named.actor, Branch) else None

    def first_branch(self) -> Branch | None:
        """The earliest started child that is a branch, if any (without building
        the list of all of them: ``run_operation`` asks on every call)."""
        for child in self._order:
            if isinstance(child.actor, Branch):
                return child.actor
        return None

    def in_start_order(self, members: Iterable[Any]) -> list[Any]:
        """Those of ``members`` that are children here, sorted by when they were started."""
        records = [child for child in map(self.of, members) if child is not None]
        return [child.actor for child in sorted(records, key=_place)]


def _place(child: Child) -> int:
    return child.place


_CANONICAL_UUID = 36
"""Length of ``str(uuid)``: 32 hex digits and 4 hyphens."""

_SHORTEST_UUID = 32
"""Length of the shortest text ``UUID()`` takes: 32 hex digits alone."""


def _id_in(text: str) -> UUID | None:
    """The id ``text`` spells in any form ``UUID()`` takes (hex, hyphens, braces, urn), else None.

    Text shorter than 32 characters (the hex digits alone) is not parsed: most
    names are, and a failed ``UUID()`` cost ~0.9 us of every ask by name.
    """
    return _as_uuid(text) if len(text) >= _SHORTEST_UUID else None


def _as_uuid(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None
