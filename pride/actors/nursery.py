"""A private nursery: the one an object opens in ``__aenter__`` and closes in ``__aexit__``.

``async with Branch(...)`` (a standalone actor) and ``async with Session(...)``
(a supervisor) each run their task in a nursery of their own. A trio nursery
reports what its children raised as an exception group, which the caller of
``async with`` did not open; `PrivateNursery.close` hands back one
exception instead (pride's rule: no ExceptionGroup escapes a public API the
caller did not ask for).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..errors import one_exception

__all__ = ["PrivateNursery", "leave_unwrapped"]

log = logging.getLogger("pride.actor")


class PrivateNursery:
    """One nursery, opened around one task started in it.

    Usage (inside an async context manager):

    ```python
    self._private = PrivateNursery()
    await self._private.open(self.serve)      # in __aenter__
    return await self._private.close(exc_info)  # in __aexit__
    ```
    """

    __slots__ = ("_cm", "nursery")

    def __init__(self) -> None:
        self._cm: Any = None
        self.nursery: trio.Nursery | None = None

    async def open(self, start: Callable[..., Awaitable[Any]]) -> None:
        """Open the nursery and ``nursery.start(start)`` in it.

        Raises:
            Exception: ``start`` failed before it signalled started (the
                nursery is closed again first).
        """
        cm = trio.open_nursery()
        nursery = await cm.__aenter__()
        try:
            await nursery.start(start)
        except BaseException as exc:
            await cm.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._cm, self.nursery = cm, nursery

    async def close(self, exc_info: tuple[Any, ...]) -> bool:
        """Leave the nursery (waiting for its tasks), raising one exception rather than a group
        (see `leave_unwrapped`)."""
        cm, self._cm, self.nursery = self._cm, None, None
        try:
            return await leave_unwrapped(cm, exc_info)
        finally:
            del exc_info  # an error leaving holds this frame: no cycle through it


async def leave_unwrapped(cm: Any, exc_info: tuple[Any, ...]) -> bool:
    """Leave the nursery ``cm`` (``trio.open_nursery()``, entered) with ``exc_info``,
    raising one exception rather than a group.

    A group is reduced to its first exception that is not ``Cancelled``
    (`pride.errors.one_exception`: re-raised with its own cause; the others are logged).
    """
    try:
        return bool(await cm.__aexit__(*exc_info))
    except BaseExceptionGroup as group:
        chosen = one_exception(group, log, "while leaving")
    finally:
        # What leaves here has this frame in its traceback: hold none of it (the
        # block's own error is in ``exc_info``), or the two keep each other alive.
        del exc_info
    try:
        raise chosen from chosen.__cause__
    finally:
        del chosen
