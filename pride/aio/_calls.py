"""One asyncio caller's call into trio: handed to a worker, answered once, cancellable both ways.

The asyncio side makes a `Call`, hands it to the guest's pool and awaits its
future; a worker task runs ``fn(*args)`` inside a cancel scope of the call's
own and answers the future. Everything happens in the loop's one thread, so
the two sides touch each other's objects directly (trio's guest-mode
documentation: sync trio APIs may be called from the host freely).

Cancellation, asyncio to trio: the awaiting task cancelled, the call's scope
is cancelled (or, still queued, the call never starts), and the task waits
for the trio side to finish before its ``CancelledError`` goes on, so nothing
of the call outlives it. trio to asyncio: work cancelled on the trio side
(the team closing) answers `TeamClosed`; trio's own exceptions never reach
asyncio code (`for_asyncio`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import trio

from ._errors import TeamClosed

if TYPE_CHECKING:
    from ._guest import Guest

__all__ = ["Call", "CallOwner", "for_asyncio"]

CallState = Literal["queued", "running", "done"]


class CallOwner(Protocol):
    """What a call needs of its team."""

    loop: asyncio.AbstractEventLoop
    guest: Guest
    calls: set[Call]

    def call_done(self, call: Call) -> None:
        """``call`` has been answered: it is no longer the team's to cancel."""
        ...


class Call:
    """``fn(*args)`` run in trio for one asyncio caller.

    Made by the team, run by a pool worker (`run`), awaited by the caller
    (`wait`). ``state`` goes queued, running, done; the answer is given once.
    """

    __slots__ = ("args", "cancel_requested", "finished", "fn", "future", "owner", "scope", "state")

    def __init__(
        self, owner: CallOwner, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]
    ) -> None:
        self.owner = owner
        self.fn = fn
        self.args = args
        self.future: asyncio.Future[Any] = owner.loop.create_future()
        self.state: CallState = "queued"
        self.cancel_requested = False
        self.scope: trio.CancelScope | None = None
        # Made only when the caller gave up and waits for the trio side to finish.
        self.finished: asyncio.Future[None] | None = None

    # ------------------------------------------------------------ asyncio side

    async def wait(self) -> Any:
        """Submit the call and wait for its answer (on the asyncio side).

        Raises:
            Exception: what ``fn`` raised, translated by `for_asyncio`.

        Cancellation: the trio work is cancelled (a queued call never starts)
        and waited for; then the ``CancelledError`` is raised.
        """
        # submit() and collect(), written out: this is every call's path.
        owner = self.owner
        owner.calls.add(self)
        try:
            owner.guest.submit(self)
        except BaseException:
            owner.calls.discard(self)
            raise
        try:
            return await self.future
        except asyncio.CancelledError:
            if self.state != "done":
                await self._abandon()
            raise

    def submit(self) -> None:
        """Hand the call to a trio worker (the first half of `wait`)."""
        owner = self.owner
        owner.calls.add(self)
        try:
            owner.guest.submit(self)
        except BaseException:
            owner.calls.discard(self)
            raise

    async def collect(self) -> Any:
        """Wait for the answer of a submitted call (the second half of `wait`)."""
        try:
            return await self.future
        except asyncio.CancelledError:
            if self.state != "done":
                await self._abandon()
            raise

    async def _abandon(self) -> None:
        self.cancel(requested=True)
        if self.state == "done":
            return
        finished = self.finished = self.owner.loop.create_future()
        while not finished.done():
            try:
                await asyncio.wait((finished,))
            except asyncio.CancelledError:
                continue  # already on the way out: the first cancellation is raised after

    def cancel(self, *, requested: bool) -> None:
        """Cancel the trio work: for the caller (``requested``) or for the team closing."""
        if requested:
            self.cancel_requested = True
        if self.state == "running" and self.scope is not None:
            self.scope.cancel()

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` from outside the run (the guest run itself ended)."""
        self._answer(None, error)

    # ------------------------------------------------------------ trio side

    async def run(self, scope: trio.CancelScope) -> None:
        """Run the call in the current trio task and answer it.

        ``scope`` is the worker's cancel scope, cancelled to cancel this call
        (a cancel scope per call would cost more than the rest of the bridge);
        once it is, the worker ends after this call. Never raises but an outer
        ``Cancelled`` (the guest run stopping), and answers even then.
        """
        if self.cancel_requested or self.state == "done":
            self._answer(None, None)
            return
        self.state = "running"
        self.scope = scope
        value: Any = None
        error: BaseException | None = None
        completed = False
        try:
            try:
                value = await self.fn(*self.args)
            except trio.Cancelled:
                raise
            except BaseException as exc:
                error = exc
            completed = True
        except trio.Cancelled:
            if not scope.cancel_called:
                raise  # not this call's cancellation: the finally answers it
            # This call's own (the worker's scope, which leaves without another checkpoint).
            completed = True
            if not self.cancel_requested:
                error = TeamClosed("the team closed while this call was running")
        finally:
            self.scope = None
            if not completed:
                error = TeamClosed("the trio guest run stopped while this call was running")
            self._answer(value, error)
            value = error = None

    def _answer(self, value: Any, error: BaseException | None) -> None:
        if self.state == "done":
            return
        self.state = "done"
        owner = self.owner
        owner.call_done(self)
        owner.guest.after_call()
        future = self.future
        if future.done():  # the caller gave up: it waits only for the end
            if self.finished is not None and not self.finished.done():
                self.finished.set_result(None)
        elif error is None:
            future.set_result(value)
        else:
            future.set_exception(for_asyncio(error))


def for_asyncio(error: BaseException) -> BaseException:
    """``error`` as asyncio code should see it: pride's classes pass; trio's are translated.

    ``trio.TooSlowError`` (a ``timeout=`` ran out) becomes the builtin
    ``TimeoutError`` (asyncio's own timeout error), ``trio.Cancelled``
    becomes `TeamClosed`; each keeps the original as its cause.
    """
    translated: BaseException
    if isinstance(error, trio.TooSlowError):
        translated = TimeoutError("the call did not finish within its timeout")
    elif isinstance(error, trio.Cancelled):
        translated = TeamClosed("the call was cancelled on the trio side")
    elif isinstance(error, asyncio.CancelledError) or type(error) is StopIteration:
        # Neither may travel in a future: the first would read as the caller's own
        # cancellation, the second is refused by asyncio.
        translated = RuntimeError(f"trio code raised {type(error).__name__}")
    else:
        return error
    translated.__cause__ = error
    return translated
