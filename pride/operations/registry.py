"""Named operations: ``async def op(branch, **kwargs)`` registered under a name.

A branch owns one registry; a session shares one among its members. While a
branch is attached, the session's registry stands behind the branch's own
([`OperationManager.shared`][pride.operations.registry.OperationManager.shared]):
a name is looked up in the branch's registry first, then in the session's, so
what the branch registered keeps its meaning whatever session it joins, the
way attribute-first lookup through
[`Branch.get_operation`][pride.branch.branch.Branch.get_operation] keeps a
built-in verb from being shadowed. Detaching takes the shared
registry away and leaves the branch's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["OperationManager"]


class OperationManager:
    """A registry of named async operations, optionally layered over a shared one.

    ``register`` and ``unregister`` change this registry only; ``get``, ``in``,
    iteration, ``len`` and ``registry`` see this registry's names first, then
    those of `shared` that it does not define.
    """

    __slots__ = ("_registry", "_shared")

    def __init__(self) -> None:
        self._registry: dict[str, Callable[..., Any]] = {}
        self._shared: OperationManager | None = None

    @property
    def shared(self) -> OperationManager | None:
        """The registry consulted after this one (a session's, while attached), or None.

        Raises:
            ValueError: on assignment, if this registry is already behind the
                new one (a registry cannot stand behind itself).
            TypeError: on assignment of anything but an OperationManager or None.
        """
        return self._shared

    @shared.setter
    def shared(self, registry: OperationManager | None) -> None:
        if registry is not None and not isinstance(registry, OperationManager):
            raise TypeError(f"shared must be an OperationManager, got {type(registry).__name__}")
        behind = registry
        while behind is not None:
            if behind is self:
                raise ValueError("an operation registry cannot stand behind itself")
            behind = behind._shared
        self._shared = registry

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
        """The operation registered as ``name`` here, else in `shared`, or None."""
        found = self._registry.get(name)
        if found is None and self._shared is not None:
            return self._shared.get(name)
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._registry or (self._shared is not None and name in self._shared)

    def __iter__(self) -> Iterator[str]:
        return iter(self.registry)

    def __len__(self) -> int:
        return len(self.registry)

    @property
    def registry(self) -> dict[str, Callable[..., Any]]:
        """A copy of the name → operation mapping, this registry's entries winning."""
        merged = self._shared.registry if self._shared is not None else {}
        merged.update(self._registry)
        return merged
