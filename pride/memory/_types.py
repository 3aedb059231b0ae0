"""What a memory holds and how it is asked: MemoryItem, MemoryQuery, and the MemoryStore protocol.

A memory store is a branch-scoped live extension: it belongs to
a branch (or is shared by a session as a default), it is never serialised
with the branch and never copied by ``clone``. Anything with the three async
methods of [`MemoryStore`][pride.MemoryStore] can be one: an in-process dict
([`InMemoryStore`][pride.InMemoryStore]), a database, a vector index.
"""

from __future__ import annotations

import time
import uuid
import weakref
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

import attrs

__all__ = ["DEFAULT_SEARCH_LIMIT", "MemoryItem", "MemoryQuery", "MemoryStore", "is_memory_store"]

DEFAULT_SEARCH_LIMIT = 20
"""Results a [`MemoryQuery`][pride.MemoryQuery] returns unless it says otherwise."""


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):  # a lone string is one tag, not a tuple of characters
        return (value,)
    tags = tuple(value)
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"memory tags must be strings, got {type(tag).__name__}")
    return tags


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return dict(value)


def _positive_int(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be a positive int, got {value!r}")


@attrs.frozen(kw_only=True)
class MemoryItem:
    """One remembered piece of text.

    Attributes:
        content: the text remembered.
        tags: labels to find it by (order kept, a lone string is one tag).
        metadata: free-form data; [`MemoryQuery`][pride.MemoryQuery] filters match its values.
        id: the item's identity (a fresh uuid4 unless given).
        created_at: POSIX timestamp of creation.

    Raises:
        TypeError: ``content`` is not a string, a tag is not a string, or
            ``metadata`` is not a mapping.
    """

    content: str = attrs.field(validator=attrs.validators.instance_of(str))
    tags: tuple[str, ...] = attrs.field(default=(), converter=_tags)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    id: UUID = attrs.field(factory=uuid.uuid4, validator=attrs.validators.instance_of(UUID))
    created_at: float = attrs.field(factory=time.time)


@attrs.frozen(kw_only=True)
class MemoryQuery:
    """What to look for in a memory store; every given criterion must hold.

    Attributes:
        text: a substring the item's content must contain (case-insensitive);
            None or ``""`` matches every item.
        tags: tags the item must all carry.
        filters: ``metadata[key] == value`` for each entry.
        limit: at most this many results (default `DEFAULT_SEARCH_LIMIT`).

    Raises:
        ValueError: ``limit`` is not a positive int.
        TypeError: ``text`` is not a string, a tag is not a string, or
            ``filters`` is not a mapping.
    """

    text: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    tags: tuple[str, ...] = attrs.field(default=(), converter=_tags)
    filters: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)
    limit: int = attrs.field(default=DEFAULT_SEARCH_LIMIT, validator=_positive_int)


@runtime_checkable
class MemoryStore(Protocol):
    """Where a branch keeps what it remembers.

    Implementations decide persistence and matching; every method is async
    (a store may do I/O) and must checkpoint.
    """

    async def store(self, item: MemoryItem) -> UUID:
        """Keep ``item`` (replacing one with the same id) and return its id."""
        ...

    async def retrieve(self, id: UUID) -> MemoryItem | None:
        """The item with this id, or None."""
        ...

    async def search(self, query: MemoryQuery) -> list[MemoryItem]:
        """Items matching ``query``, at most ``query.limit`` of them."""
        ...


# The protocol's methods, and the classes whose instances are known to have them.
_METHODS = tuple(
    name for name, value in vars(MemoryStore).items() if callable(value) and name[0] != "_"
)
_store_classes: weakref.WeakSet[type] = weakref.WeakSet()


def is_memory_store(value: object) -> bool:
    """``isinstance(value, MemoryStore)``, remembered per class once a class passes.

    typing's check of a protocol walks the protocol's attributes on every
    call (Python 3.11 keeps nothing: tens of microseconds, a tenth of a
    session spawn, whose ``Attach`` carries a memory store). A class that has
    the methods itself passes for every instance, so it is remembered; an
    instance that has them only in its own ``__dict__`` is asked of typing
    each time.
    """
    kind = type(value)
    if kind in _store_classes:
        return True
    if not isinstance(value, MemoryStore):
        return False
    if all(callable(getattr(kind, name, None)) for name in _METHODS):
        _store_classes.add(kind)
    return True
