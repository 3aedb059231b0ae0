"""One asyncio caller's call into trio: answered once, cancellable both ways.

Two kinds of call, one contract. A `ReplyWait` is an asyncio caller waiting
on a command already in a mailbox: ``team.ask`` delivers the envelope from
the asyncio side (`pride.actors.send_in_line`; ``team.send`` likewise, with
`pride.send_nowait`), and the caller waits on an asyncio future that the
reply's done callback answers, so an ask costs no trio task of its own. A
`Call` runs any trio async function: the asyncio side hands it to the
guest's pool and awaits its future; a worker task runs ``fn(*args)`` and
answers the future. Everything happens in the loop's one thread, so the
two sides touch each other's objects directly (trio's guest-mode
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

from ..actors import Reply
from ..errors import TurnCancelled, exception_leaves
from ._errors import TeamClosed
from ._guest import wait_through

if TYPE_CHECKING:
    from ._guest import Guest

__all__ = ["Call", "CallOwner", "Late", "Pending", "ReplyWait", "for_asyncio"]

CallState = Literal["queued", "running", "done"]


class Pending(Protocol):
    """A call not answered yet, as its team sees it (a `Call` or a `ReplyWait`)."""

    def cancel(self, *, requested: bool) -> None:
        """Cancel the trio work: for the caller (``requested``) or for the team closing."""
        ...

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` from outside the run (the guest run itself ended)."""
        ...


class CallOwner(Protocol):
    """What a call needs of its team."""

    loop: asyncio.AbstractEventLoop
    guest: Guest
    calls: set[Pending]

    def call_done(self, call: Pending) -> None:
        """``call`` has been answered: it is no longer the team's to cancel."""
        ...


class ReplyWait:
    """An asyncio caller waiting for the outcome of a command in a mailbox.

    The command was delivered from the asyncio side; the reply's done
    callback (run in trio, where the outcome is delivered, or at once if it
    is done already) wakes the caller's future, so nothing of trio waits
    for the caller. The outcome is taken from the reply by the caller's task
    once it runs, never by the callback: a caller cancelled between the two
    (its cancellation and the outcome in one loop pass) leaves the outcome in
    the reply, for a later wait of ``Sent.result``. Made and awaited by the team.
    """

    __slots__ = ("_finished", "_future", "_owner", "_timed_out", "reply")

    def __init__(self, owner: CallOwner, reply: Reply) -> None:
        self._owner = owner
        self.reply = reply
        self._future: asyncio.Future[Any] = owner.loop.create_future()
        self._timed_out = False
        # Made only when the caller gave up and waits for the command to end.
        self._finished: asyncio.Future[None] | None = None

    async def wait(self, timeout: float | None = None, *, cancels: bool = True) -> Any:
        """Wait for the command's outcome: return its result or raise its error.

        ``timeout`` seconds running out cancels the command, and once it has
        ended raises the builtin ``TimeoutError`` (as ``asyncio.wait_for``
        does: the work behind a timed-out call has ended when it raises).

        Raises:
            TimeoutError: ``timeout`` ran out first.
            Exception: the command's error, translated by `for_asyncio`.

        Cancellation: with ``cancels`` (an ask), the command is cancelled (a
        queued one never starts, a running turn finalises) and waited for,
        then the ``CancelledError`` is raised; without it (``Sent.result``),
        the command goes on, and its outcome stays for a later wait.
        """
        owner = self._owner
        reply = self.reply
        owner.calls.add(self)
        reply.add_done_callback(self._answer)
        timer = None if timeout is None else owner.loop.call_later(timeout, self._time_out)
        try:
            await self._future  # done (or the team's error), not the outcome: see _take
        except asyncio.CancelledError:
            if cancels and not reply.done:
                reply.cancel("caller")
                if not reply.done:
                    await self._wait_finished()
            elif not reply.done:
                # The command goes on, no longer this caller's: nothing of the wait stays.
                reply.remove_done_callback(self._answer)
                owner.call_done(self)
            raise
        finally:
            if timer is not None:
                timer.cancel()
        return self._take()

    def _take(self) -> Any:
        # The outcome, taken now that the caller runs; a timeout's cancellation is TimeoutError.
        try:
            return self.reply.take_result()
        except TurnCancelled as error:
            if not self._timed_out:
                raise
            raise TimeoutError("the call did not finish within its timeout") from error
        except BaseException as error:
            # No name holds what is raised (its traceback holds this frame). B904: it is
            # the error itself, or for_asyncio's translation, already caused by it.
            raise for_asyncio(error)  # noqa: B904

    async def _wait_finished(self) -> None:
        # Already on the way out: a further cancellation is dropped, the first raised after.
        self._finished = self._owner.loop.create_future()
        await wait_through(self._finished)

    def _time_out(self) -> None:
        if not self.reply.done:
            self._timed_out = True
            self.reply.cancel("caller")

    def cancel(self, *, requested: bool) -> None:
        """Cancel the command (see `Pending`); the team closing answers `TeamClosed` at once,
        before the cancel (which answers a queued command at once, with its drop)."""
        if not requested:
            self.fail(TeamClosed("the team closed while this call was waiting"))
        self.reply.cancel("caller" if requested else "shutdown")

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` now, whatever the command does (see `Pending`)."""
        self.reply.remove_done_callback(self._answer)
        self._owner.call_done(self)
        future = self._future
        if not future.done():
            future.set_exception(error)
        self._set_finished()

    def _answer(self, reply: Reply) -> None:
        # The reply's done callback: in trio where the outcome was delivered, or at once.
        owner = self._owner
        owner.call_done(self)
        owner.guest.after_call()
        future = self._future
        if future.done():  # the caller gave up (or the team answered): nothing to wake
            self._set_finished()
        else:
            future.set_result(None)

    def _set_finished(self) -> None:
        finished = self._finished
        if finished is not None and not finished.done():
            finished.set_result(None)


Late = Callable[["Call"], object]
"""What a call does with an answer its caller was cancelled before taking (`Call`)."""


class Call:
    """``fn(*args)`` run in trio for one asyncio caller.

    Made by the team, run by a pool worker (`run`), awaited by the caller
    (`wait`). ``state`` goes queued, running, done; the answer is given once.
    The answer wakes ``future``; the outcome stays on the call until the
    caller's task takes it (`take`), so no future holds an error raised
    through the frame that holds the call (a reference cycle, left to the
    collector).

    An answer can come though the caller was cancelled: with the
    cancellation (one loop pass), or from trio work already past its last
    checkpoint when the cancellation reached it (an item handed over, a
    command queued). ``late(call)`` is then called with the answer in
    ``outcome``, as soon as it is known (in trio, for the second), so the
    caller's part can keep it (`take` it later) or undo it; without ``late``
    it is let go.
    """

    __slots__ = (
        "args",
        "cancel_requested",
        "finished",
        "fn",
        "future",
        "late",
        "outcome",
        "owner",
        "scope",
        "state",
    )

    def __init__(
        self,
        owner: CallOwner,
        fn: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        *,
        late: Late | None = None,
    ) -> None:
        self.owner = owner
        self.fn = fn
        self.args = args
        self.late = late
        self.future: asyncio.Future[Any] = owner.loop.create_future()
        self.state: CallState = "queued"
        self.cancel_requested = False
        self.scope: trio.CancelScope | None = None
        # Made only when the caller gave up and waits for the trio side to finish.
        self.finished: asyncio.Future[None] | None = None
        # The answer not taken yet: (value, None) or (None, error).
        self.outcome: tuple[Any, BaseException | None] | None = None

    # ------------------------------------------------------------ asyncio side

    async def wait(self) -> Any:
        """Submit the call and wait for its answer (on the asyncio side).

        Raises:
            Exception: what ``fn`` raised, translated by `for_asyncio`.

        Cancellation: the trio work is cancelled (a queued call never starts)
        and waited for; then the ``CancelledError`` is raised. An answer that
        came all the same goes to ``late`` (see `Call`).
        """
        self.submit()
        return await self.collect()

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
        """Wait for the answer of a submitted call (the second half of `wait`).

        Cancellation: as `wait`.
        """
        try:
            await self.future
        except asyncio.CancelledError:
            if self.state != "done":
                await self._abandon()
            if self.outcome is not None:  # it came with the cancellation
                if self.late is not None:
                    self.late(self)
                else:
                    self.outcome = None
            raise
        return self.take()

    def take(self) -> Any:
        """The answer (once): return the value or raise the error, translated by `for_asyncio`."""
        outcome, self.outcome = self.outcome, None
        assert outcome is not None, "take() before the answer, or twice"
        value, error = outcome
        del outcome
        if error is None:
            return value
        try:
            raise for_asyncio(error)
        finally:  # no name holds what is raised: its traceback holds this frame
            del error

    async def _abandon(self) -> None:
        self.cancel(requested=True)
        if self.state == "done":
            return
        # Already on the way out: a further cancellation is dropped, the first raised after.
        self.finished = self.owner.loop.create_future()
        await wait_through(self.finished)

    def cancel(self, *, requested: bool) -> None:
        """Cancel the trio work: for the caller (``requested``) or for the team closing."""
        if requested:
            self.cancel_requested = True
        if self.state == "running" and self.scope is not None:
            self.scope.cancel()

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` from outside the run (the guest run itself ended)."""
        self._answer(None, error, answered=False)

    # ------------------------------------------------------------ trio side

    async def run(self, scope: trio.CancelScope) -> None:
        """Run the call in the current trio task and answer it.

        ``scope`` is the worker's cancel scope, cancelled to cancel this call
        (a cancel scope per call would cost more than the rest of the bridge);
        once it is, the worker ends after this call. Never raises but an outer
        ``Cancelled`` (the guest run stopping), and answers even then.
        """
        if self.cancel_requested or self.state == "done":
            self._answer(None, None, answered=False)
            return
        self.state = "running"
        self.scope = scope
        value: Any = None
        error: BaseException | None = None
        completed = answered = False
        try:
            value = await self.fn(*self.args)
            completed = answered = True
        except BaseException as exc:
            if not _is_cancellation(exc):
                error = exc
                completed = answered = True
            elif not scope.cancel_called:
                raise  # not this call's cancellation: the finally answers it
            else:  # this call's own (the worker's scope, which leaves without a checkpoint)
                completed = True
                if not self.cancel_requested:
                    error = TeamClosed("the team closed while this call was running")
        finally:
            self.scope = None
            if not completed:
                error = TeamClosed("the trio guest run stopped while this call was running")
            self._answer(value, error, answered=answered)
            value = error = None

    def _answer(self, value: Any, error: BaseException | None, *, answered: bool = True) -> None:
        # ``answered``: ``fn`` returned or raised (not cancelled before it could).
        if self.state == "done":
            return
        self.state = "done"
        owner = self.owner
        owner.call_done(self)
        owner.guest.after_call()
        future = self.future
        if future.done():  # the caller gave up: it waits only for the end
            if answered and self.late is not None:  # an answer all the same
                self.outcome = (value, error)
                self.late(self)
            if self.finished is not None and not self.finished.done():
                self.finished.set_result(None)
        else:
            self.outcome = (value, error)
            future.set_result(None)


def _is_cancellation(error: BaseException) -> bool:
    """True for ``trio.Cancelled`` and for a group of nothing else (a nursery of the
    call's function, cancelled with it): trio's cancellation, never the call's answer."""
    if isinstance(error, BaseExceptionGroup):
        return all(isinstance(leaf, trio.Cancelled) for leaf in exception_leaves(error))
    return isinstance(error, trio.Cancelled)


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
