"""Named operations: ``async def op(branch, **kwargs)`` registered under a name.

A branch owns one registry; a session shares one among its members. Lookup
through [`Branch.get_operation`][pride.actors.branch.Branch.get_operation] is attribute-first, so a
registered name
can never shadow a built-in verb (ADR-0016 D5).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["OperationManager"]


class OperationManager:
    """A registry of named async operations."""

    __slots__ = ("_registry",)

    def __init__(self) -> None:
        self._registry: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, operation: Callable[..., Any], *, update: bool = False) -> None:
        """Register ``operation`` under ``name``.

        Raises:
            TypeError: ``operation`` is not an async function (sync ones are rejected).
            ValueError: ``name`` is empty or already registered (unless ``update``).
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"operation name must be a non-empty str, got {name!r}")
        if not inspect.iscoroutinefunction(operation) and not inspect.iscoroutinefunction(
            getattr(operation, "__call__", None)  # noqa: B004 - async callable objects
        ):
            raise TypeError(
                f"operation {name!r} must be an async function (async def op(branch, **kw))"
            )
        if name in self._registry and not update:
            raise ValueError(f"operation {name!r} is already registered (pass update=True)")
        self._registry[name] = operation

    def unregister(self, name: str) -> None:
        """Remove ``name``. Raises KeyError if it is not registered."""
        del self._registry[name]

    def get(self, name: str) -> Callable[..., Any] | None:
        """The operation registered as ``name``, or None."""
        return self._registry.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._registry

    def __iter__(self) -> Iterator[str]:
        return iter(self._registry)

    def __len__(self) -> int:
        return len(self._registry)

    @property
    def registry(self) -> dict[str, Callable[..., Any]]:
        """A copy of the name → operation mapping."""
        return dict(self._registry)
