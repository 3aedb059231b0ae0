"""``team.stream``: a streaming turn in trio, consumed by an asyncio ``async for``.

A trio task (one call of the team) holds ``pride.stream(...)`` open for the
block's life; each ``__anext__`` on the asyncio side is one more call, which
takes the next item from the trio stream. Nothing is buffered between them:
the turn produces its next item only when asyncio asks for it, so a slow
consumer slows the turn (backpressure), exactly as with ``pride.stream`` in
trio. Leaving the block ends the stream (the turn finalises; the block's exit
waits for that), with the reason ``"stream_closed"`` after a clean exit and
``"caller"`` after an exception or a cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol
from uuid import UUID

import trio

from ..actors import StreamItems, stream as trio_stream
from ..messages import WorkCommand
from ._calls import Call, CallOwner

__all__ = ["Items", "StreamOwner", "open_stream"]


class StreamOwner(CallOwner, Protocol):
    """What a stream needs of its team (a `Team`): a call owner that checks
    it may take a call here and now and resolves a target as the send API takes it."""

    def check(self) -> None:
        """Raise unless the team takes calls here and now."""
        ...

    def resolve_target(self, target: Any) -> Any:
        """``target`` as the send API takes it."""
        ...


class _LeftEarly(Exception):
    """Raised inside the trio stream block: the asyncio block was left by an exception."""


class _Holder:
    """The trio side of one stream: enters ``pride.stream`` and waits to be told to leave."""

    def __init__(self, team: StreamOwner) -> None:
        self.items: StreamItems | None = None
        self.opened: asyncio.Future[None] = team.loop.create_future()
        self.leave = trio.Event()
        self.clean = True

    async def hold(self, target: Any, command: WorkCommand, tag: str | int | None) -> None:
        try:
            async with trio_stream(target, command, tag=tag) as items:
                self.items = items
                self.opened.set_result(None)
                await self.leave.wait()
                if not self.clean:
                    raise _LeftEarly
        except _LeftEarly:
            pass


class Items:
    """What ``async with team.stream(...) as items`` gives: ``async for item in items``.

    Each item is taken from the turn only when the loop asks for it. After
    the last item a failed turn raises its exception from the ``async for``
    (pride's own class, as with `pride.stream`). A ``__anext__`` cancelled
    while it waits takes nothing, and an item the turn handed over all the
    same (with the cancellation, or in trio before it took effect) is the
    next ``__anext__``'s.
    """

    def __init__(self, team: StreamOwner, holder: _Holder) -> None:
        self._team = team
        self._holder = holder
        self._finished = False
        # The call of a cancelled __anext__ the turn handed an item (or its end) all the
        # same: the next __anext__ takes it.
        self._late: Call | None = None

    @property
    def turn_id(self) -> UUID | None:
        """The turn's id, once it has started (None before, and for non-turn commands)."""
        items = self._holder.items
        return items.reply.turn_id if items is not None and items.reply is not None else None

    def __aiter__(self) -> Items:
        return self

    async def __anext__(self) -> Any:
        if self._finished:
            raise StopAsyncIteration
        self._team.check()
        late, self._late = self._late, None
        try:
            if late is not None:
                return late.take()
            items = self._holder.items
            assert items is not None
            return await Call(self._team, items.__anext__, (), late=self._keep_late).wait()
        except StopAsyncIteration:
            self._finished = True
            raise
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._finished = True
            raise

    def _keep_late(self, call: Call) -> None:
        # Taken from the turn for an __anext__ cancelled meanwhile (see Call).
        self._late = call


@contextlib.asynccontextmanager
async def open_stream(
    team: StreamOwner, target: Any, command: WorkCommand, tag: str | int | None
) -> AsyncIterator[Items]:
    """The body of ``team.stream``: see `Team.stream`."""
    team.check()
    holder = _Holder(team)
    call = Call(team, holder.hold, (team.resolve_target(target), command, tag))
    call.submit()
    try:
        await _opened(holder, call)
    except BaseException:  # cancelled (or it failed) before it opened
        holder.clean = False
        holder.leave.set()
        call.cancel(requested=True)
        with contextlib.suppress(Exception):
            await call.collect()
        raise
    clean = False
    try:
        yield Items(team, holder)
        clean = True
    finally:
        holder.clean = clean
        holder.leave.set()
        if clean:
            await call.collect()
        else:  # the block's own exception goes on; the stream's end is only waited for
            with contextlib.suppress(Exception):
                await call.collect()


async def _opened(holder: _Holder, call: Call) -> None:
    """Wait until the stream is open in trio, or its call has ended (the error)."""
    done, _ = await asyncio.wait((holder.opened, call.future), return_when=asyncio.FIRST_COMPLETED)
    if holder.opened not in done:
        await call.collect()  # raises the reason it could not open
        raise RuntimeError("the stream ended before it opened")
