"""Branch memory: the MemoryStore protocol, its query types, and an in-process store.

```python
from pride.memory import InMemoryStore, MemoryItem, MemoryQuery

item_id = await branch.memory.store(MemoryItem(content="likes tea", tags=("pref",)))
hits = await branch.memory.search(MemoryQuery(text="tea"))
```

``branch.memory`` is the branch's explicit store (kept by identity), else a
session's default adopted on attachment, else an [`InMemoryStore`][pride.InMemoryStore]
created on first access (the first-claim rule). Memory is never serialised with a
branch and never copied by ``clone``.

This package imports nothing of pride but [`pride.errors`][pride.errors] and
[`pride.messages`][pride.branch.branch.Branch.messages].
"""

from .._public import publish as _publish
from ._in_memory import InMemoryStore as InMemoryStore
from ._types import (
    DEFAULT_SEARCH_LIMIT as DEFAULT_SEARCH_LIMIT,
    MemoryItem as MemoryItem,
    MemoryQuery as MemoryQuery,
    MemoryStore as MemoryStore,
    is_memory_store as is_memory_store,
)

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "InMemoryStore",
    "MemoryItem",
    "MemoryQuery",
    "MemoryStore",
    "is_memory_store",
]

# Tracebacks, reprs and pickles name the public home of each class and function.
_publish(globals(), __all__, __name__)
