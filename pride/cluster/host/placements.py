"""What a host builds its branches from: placement specs, recorded and replayed.

A placement is the JSON a `Cluster.spawn` sends: ``{"name", "factory":
"module:function", "args": [...], "kwargs": {...}, "restart", "timeout"}``
(the seconds its factory may take). The host
records each in ``placements.json`` (written whole, then renamed, so a crash
leaves the old file or the new one) and replays them when it restarts,
calling each factory again and restoring the conversation from its store.
The file lives in the host's private directory (`pride.cluster.wire.storage`):
a host imports and calls what it names, so no other user may write it.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...branch import Branch
from ...errors import StoreError

__all__ = ["MAX_SPAWN_TIMEOUT", "SPAWN_TIMEOUT", "Placements", "build_branch", "import_factory"]

SPAWN_TIMEOUT = 60.0
"""Seconds a placement's factory may take, unless its spec says (``Cluster(spawn_timeout=)``)."""
MAX_SPAWN_TIMEOUT = 24 * 3600.0
"""The longest a placement may ask its factory to be waited for."""


class Placements:
    """The placements file of one host."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Placements made at once are recorded from worker threads of their own:
        # each rewrites the whole file, so one at a time, or one loses another's.
        self._writing = threading.Lock()

    def load(self) -> list[dict[str, Any]]:
        """The recorded placements, in the order they were made.

        Raises:
            StoreError: the file cannot be read or is not a list of placements.
        """
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        if not isinstance(data, list) or not all(_is_placement(spec) for spec in data):
            raise StoreError(f"{self.path} is not a list of placements")
        return data

    def placed_before(self, spec: dict[str, Any], host: str) -> bool:
        """True if ``spec`` was placed before (the same factory and arguments).

        Raises:
            ValueError: a branch of that name was placed with another factory
                or other arguments.
        """
        name = spec["name"]
        placed = next((s for s in self.load() if s["name"] == name), None)
        if placed is None:
            return False
        if not all(placed.get(key) == spec.get(key) for key in ("factory", "args", "kwargs")):
            raise ValueError(
                f"host {host!r} already serves a branch named {name!r}, "
                f"made by {placed['factory']!r} with other arguments"
            )
        return True

    def add(self, spec: dict[str, Any]) -> None:
        """Record ``spec`` (replacing one of the same name); blocking, for a worker thread.

        The file is replaced whole, its new text synced first, so a crash at any
        instant leaves the old list or the new one, never a torn file.
        """
        with self._writing:
            specs = [s for s in self.load() if s["name"] != spec["name"]]
            specs.append(spec)
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as file:
                file.write(json.dumps(specs))
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)  # the rename itself survives a crash
            finally:
                os.close(directory)


def build_branch(spec: dict[str, Any]) -> Branch:
    """Call the placement's factory; the branch it made.

    Raises:
        ValueError, ImportError, AttributeError: the factory cannot be found.
        TypeError: it is not callable, or did not return a `Branch`.
        ValueError: the branch is not named as the placement says.
        Exception: whatever the factory raised.
    """
    name = spec["name"]
    factory = import_factory(spec["factory"])
    branch = factory(*spec.get("args", ()), name=name, **spec.get("kwargs", {}))
    if not isinstance(branch, Branch):
        raise TypeError(
            f"factory {spec['factory']!r} returned a {type(branch).__name__}, not a Branch"
        )
    if branch.name != name:
        raise ValueError(
            f"factory {spec['factory']!r} made a branch named {branch.name!r}, "
            f"not {name!r} (pass the name= it is given to Branch)"
        )
    return branch


def import_factory(path: str) -> Callable[..., Any]:
    """The callable ``"package.module:attribute"`` names.

    Raises:
        ValueError: ``path`` is not of that form.
        ImportError, AttributeError: the module or attribute does not exist here.
    """
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"factory {path!r} should be 'package.module:callable'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"factory {path!r} is not callable")
    return target  # type: ignore[no-any-return]


def _is_placement(spec: Any) -> bool:
    """True for a placement as `Cluster.spawn` writes it (anything else: a damaged file)."""
    return (
        isinstance(spec, dict)
        and isinstance(spec.get("name"), str)
        and isinstance(spec.get("factory"), str)
        and isinstance(spec.get("args", []), list)
        and isinstance(spec.get("kwargs", {}), dict)
        and all(isinstance(key, str) for key in spec.get("kwargs", {}))
        and isinstance(spec.get("timeout", 1.0), int | float)
    )
