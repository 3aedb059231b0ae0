"""InMemoryStore: a memory store held in a dict, for a branch's lifetime.

It is what ``branch.memory`` creates on first access when the branch has no
store of its own and no session supplied one. Matching is deliberately
simple: a case-insensitive substring of the content, every tag of the query,
and equality of the filtered metadata values. Results come back in the order
items were first stored, which is also what ``limit`` cuts.
"""

from __future__ import annotations

from collections.abc import Iterator
from uuid import UUID

import trio

from ._types import MemoryItem, MemoryQuery

__all__ = ["InMemoryStore"]

_MISSING = object()


class InMemoryStore:
    """A [`MemoryStore`][pride.MemoryStore] in process memory.

    Usage:

    ```python
    store = InMemoryStore()
    item_id = await store.store(MemoryItem(content="the user prefers tea", tags=("pref",)))
    await store.retrieve(item_id)
    await store.search(MemoryQuery(text="tea", tags=("pref",)))
    ```

    ``len(store)`` counts the items; iterating yields them in storage order.
    Nothing is persisted: the items live as long as the store object.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[UUID, MemoryItem] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[MemoryItem]:
        return iter(list(self._items.values()))

    def __repr__(self) -> str:
        return f"<InMemoryStore of {len(self._items)} items>"

    async def store(self, item: MemoryItem) -> UUID:
        """Keep ``item`` and return its id; an item with the same id is replaced in place.

        Raises:
            TypeError: ``item`` is not a [`MemoryItem`][pride.MemoryItem].
        """
        if not isinstance(item, MemoryItem):
            raise TypeError(f"expected a MemoryItem, got {type(item).__name__}")
        await trio.lowlevel.checkpoint()
        self._items[item.id] = item
        return item.id

    async def retrieve(self, id: UUID) -> MemoryItem | None:
        """The item with this id, or None.

        Raises:
            TypeError: ``id`` is not a UUID.
        """
        if not isinstance(id, UUID):
            raise TypeError(f"expected a UUID, got {type(id).__name__}")
        await trio.lowlevel.checkpoint()
        return self._items.get(id)

    async def search(self, query: MemoryQuery) -> list[MemoryItem]:
        """The items matching every criterion of ``query``, oldest stored first.

        Raises:
            TypeError: ``query`` is not a [`MemoryQuery`][pride.MemoryQuery].
        """
        if not isinstance(query, MemoryQuery):
            raise TypeError(f"expected a MemoryQuery, got {type(query).__name__}")
        await trio.lowlevel.checkpoint()
        needle = query.text.casefold() if query.text else None
        found: list[MemoryItem] = []
        for item in self._items.values():
            if needle is not None and needle not in item.content.casefold():
                continue
            if query.tags and not set(query.tags).issubset(item.tags):
                continue
            if any(
                item.metadata.get(key, _MISSING) != value for key, value in query.filters.items()
            ):
                continue
            found.append(item)
            if len(found) == query.limit:
                break
        return found
