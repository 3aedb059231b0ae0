"""ADR-0016 D3 memory contract: MemoryStore, InMemoryStore, and branch.memory's lifetime."""

from __future__ import annotations

import types
import uuid

import pytest
import trio.testing

from pride import Branch
from pride.memory import InMemoryStore, MemoryItem, MemoryQuery, MemoryStore, is_memory_store

# --------------------------------------------------------- the branch contract


def test_an_explicit_constructor_store_is_retained_by_identity() -> None:
    """An explicit constructor store is what branch.memory returns, the same object."""
    store = InMemoryStore()
    branch = Branch(chat_model="scripted", memory=store)
    assert branch.memory is store and branch.memory is store


def test_first_access_creates_one_private_in_memory_store() -> None:
    """First access on a standalone branch creates an InMemoryStore; later access returns it."""
    branch = Branch(chat_model="scripted")
    first = branch.memory
    assert isinstance(first, InMemoryStore)
    assert branch.memory is first
    assert Branch(chat_model="scripted").memory is not first


def test_there_is_no_public_setter() -> None:
    """branch.memory cannot be assigned; sessions attach through the private protocol."""
    branch = Branch(chat_model="scripted")
    with pytest.raises(AttributeError):
        branch.memory = InMemoryStore()  # type: ignore[misc]


def test_memory_is_not_in_to_dict_and_not_copied_by_clone() -> None:
    """Memory is not included in to_dict and not copied by clone."""
    store = InMemoryStore()
    branch = Branch(chat_model="scripted", memory=store)
    assert "memory" not in branch.to_dict() and "memory" not in branch.to_dict(mode="json")
    clone = branch.clone()
    assert clone.memory is not store
    assert Branch.from_dict(branch.to_dict()).memory is not store


async def test_a_branch_remembers_through_its_store() -> None:
    """branch.memory stores, retrieves and searches items."""
    branch = Branch(chat_model="scripted")
    item_id = await branch.memory.store(MemoryItem(content="the user prefers tea"))
    found = await branch.memory.retrieve(item_id)
    assert found is not None and found.content == "the user prefers tea"
    assert await branch.memory.search(MemoryQuery(text="TEA")) == [found]


# ------------------------------------------------------------- InMemoryStore


def test_in_memory_store_satisfies_the_protocol() -> None:
    """InMemoryStore is a MemoryStore (store, retrieve, search)."""
    assert isinstance(InMemoryStore(), MemoryStore)
    assert not isinstance(object(), MemoryStore)


class _Store:
    async def store(self, item: MemoryItem) -> uuid.UUID:
        return item.id

    async def retrieve(self, id: uuid.UUID) -> MemoryItem | None:
        return None

    async def search(self, query: MemoryQuery) -> list[MemoryItem]:
        return []


class _NoSearch:
    async def store(self, item: MemoryItem) -> uuid.UUID:
        return item.id

    async def retrieve(self, id: uuid.UUID) -> MemoryItem | None:
        return None


def test_is_memory_store_answers_as_the_protocol_check_does() -> None:
    """is_memory_store (the check spawn, Branch and Session make) agrees with
    isinstance(..., MemoryStore) on each case, asked twice (the second answer
    may come from its per-class memory): a class with the three methods, one
    missing a method, and instances of one class that have the methods in their
    own __dict__ or do not (a class is remembered only when the class itself has them)."""
    own = types.SimpleNamespace(store=print, retrieve=print, search=print)
    bare = types.SimpleNamespace(store=print)
    cases = [InMemoryStore(), _Store(), _NoSearch(), object(), own, bare, own, bare]
    for value in cases + cases:
        assert is_memory_store(value) is isinstance(value, MemoryStore), value
    assert is_memory_store(_Store()) and not is_memory_store(bare)
    with pytest.raises(TypeError, match="memory must be a MemoryStore"):
        Branch(chat_model="scripted", memory=bare)  # type: ignore[arg-type]
    assert Branch(chat_model="scripted", memory=own).memory is own  # type: ignore[arg-type]


async def test_store_returns_the_id_and_replaces_an_item_with_the_same_id() -> None:
    """store() returns the item's id; storing the same id again replaces it in place."""
    store = InMemoryStore()
    item = MemoryItem(content="v1")
    assert await store.store(item) == item.id
    await store.store(MemoryItem(content="other"))
    await store.store(MemoryItem(content="v2", id=item.id))
    assert len(store) == 2
    assert [i.content for i in store] == ["v2", "other"]


async def test_retrieve_an_unknown_id_is_none() -> None:
    """retrieve() returns None for an id it does not hold."""
    assert await InMemoryStore().retrieve(uuid.uuid4()) is None


async def test_search_by_substring_tags_and_metadata_filters() -> None:
    """Every criterion must hold: case-insensitive substring, all tags, equal metadata."""
    store = InMemoryStore()
    tea = MemoryItem(content="Likes green TEA", tags=("pref", "drink"), metadata={"user": "ada"})
    coffee = MemoryItem(content="likes coffee", tags=("pref",), metadata={"user": "bob"})
    note = MemoryItem(content="meeting at ten", tags="note", metadata={"user": "ada"})
    for item in (tea, coffee, note):
        await store.store(item)
    assert await store.search(MemoryQuery()) == [tea, coffee, note]
    assert await store.search(MemoryQuery(text="likes")) == [tea, coffee]
    assert await store.search(MemoryQuery(text="tea")) == [tea]
    assert await store.search(MemoryQuery(tags=("pref",))) == [tea, coffee]
    assert await store.search(MemoryQuery(tags=("pref", "drink"))) == [tea]
    assert await store.search(MemoryQuery(filters={"user": "ada"})) == [tea, note]
    assert await store.search(MemoryQuery(text="likes", filters={"user": "ada"})) == [tea]
    assert await store.search(MemoryQuery(filters={"missing": None})) == []


async def test_search_returns_at_most_limit_oldest_first() -> None:
    """limit cuts the results, which come in storage order (default limit 20)."""
    store = InMemoryStore()
    items = [MemoryItem(content=f"item {i}") for i in range(25)]
    for item in items:
        await store.store(item)
    assert await store.search(MemoryQuery(text="item")) == items[:20]
    assert await store.search(MemoryQuery(text="item", limit=3)) == items[:3]


async def test_store_methods_checkpoint() -> None:
    """Every store method is a trio checkpoint (async functions always checkpoint)."""
    store = InMemoryStore()
    item = MemoryItem(content="x")
    with trio.testing.assert_checkpoints():
        await store.store(item)
    with trio.testing.assert_checkpoints():
        await store.retrieve(item.id)
    with trio.testing.assert_checkpoints():
        await store.search(MemoryQuery())


async def test_bad_arguments_are_type_errors() -> None:
    """A store only takes MemoryItems, UUIDs and MemoryQuerys."""
    store = InMemoryStore()
    with pytest.raises(TypeError):
        await store.store({"content": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.retrieve("not-a-uuid")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.search("tea")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"limit": 0}, ValueError),
        ({"limit": True}, ValueError),
        ({"text": 5}, TypeError),
        ({"tags": [1]}, TypeError),
        ({"filters": ["a"]}, TypeError),
    ],
)
def test_a_bad_query_is_rejected(kwargs: dict[str, object], error: type[Exception]) -> None:
    """MemoryQuery validates its fields."""
    with pytest.raises(error):
        MemoryQuery(**kwargs)  # type: ignore[arg-type]


def test_a_bad_item_is_rejected() -> None:
    """MemoryItem content must be text."""
    with pytest.raises(TypeError):
        MemoryItem(content=3)  # type: ignore[arg-type]
