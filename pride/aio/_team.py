"""The team: a pride Session in trio, offered to asyncio code as coroutines.

A team's session runs in a trio task of the loop's guest run (`_hold`): it
enters ``async with Session(**kwargs)``, waits until asyncio closes the team,
and leaves, which stops the members with the session's grace. ``ask`` and
``send`` put their envelope in the mailbox from the asyncio side and wait on
it through a `ReplyWait` (no trio task per call); every other verb is a
`Call` into that session, run by a trio task. The team's life on the asyncio
side:

* opened by ``async with open_session(...)`` (or ``await open_session(...)``,
  closed later by ``await team.aclose()``, for notebooks);
* while open, calls run; the session failing (`pride.SupervisorFailed`)
  cancels the task that entered ``async with``, as an ``asyncio.TaskGroup``
  does when a child fails, and leaving the block raises the failure;
* closing: new calls raise `TeamClosed`; the session stops (at once if the
  block raised); calls still running then are cancelled and answered
  `TeamClosed`; the observers' handlers get the signals still queued; the
  guest run ends with the loop's last team.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from uuid import UUID

import trio

from ..actors import BranchRef, Reply, check_timeout, send_in_line, send_nowait
from ..branch import Branch
from ..errors import MailboxFull
from ..flows import Flow, FlowResult
from ..messages import Command, Signal, WorkCommand
from ..supervisors import Session
from ..supervisors.session import VirtualRef
from ._calls import Call, Pending, ReplyWait
from ._errors import TeamClosed, WrongLoop
from ._guest import Guest, acquire, release, wait_through
from ._observe import Subscriber
from ._stream import Items, open_stream

__all__ = ["Sent", "Team"]

log = logging.getLogger("pride.aio")

T = TypeVar("T")
H = TypeVar("H", bound=Callable[[Signal], Any])
M = TypeVar("M", Branch, Session)

TeamState = Literal["new", "opening", "open", "failed", "closing", "closed"]


class Team:
    """A pride [`Session`][pride.Session] run on trio as a guest of the running asyncio loop.

    Made by [`open_session`][pride.aio.open_session]; every coroutine here runs
    the Session verb of the same name in trio and returns its result, in the
    loop's thread.

    Errors arrive as pride's own classes, as from the trio API (no exception
    group, no ``trio.Cancelled``); a ``timeout=`` that runs out raises the
    builtin ``TimeoutError``.

    Cancellation: cancelling the asyncio task awaiting a call cancels the trio
    work behind it (a queued command never starts, a running turn is
    cancelled and ends with its one terminal signal) and waits for it to
    finish before the ``CancelledError`` goes on.

    Raises (every method):
        WrongLoop: called outside the loop (thread) that opened the team, or a
            coroutine awaited in trio code (use ``team.session``'s trio API there).
        TeamClosed: called before the team opened or after it closed.
    """

    def __init__(self, session_kwargs: Mapping[str, Any]) -> None:
        self._kwargs = dict(session_kwargs)
        self._state: TeamState = "new"
        # Set when the team opens; until then every call is refused (`check`).
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.guest: Guest = None  # type: ignore[assignment]
        self.calls: set[Pending] = set()
        self._session: Session | None = None
        self._leave = trio.Event()
        self._at_once = False  # the block raised: stop the session without its grace
        self._calls_done: trio.Event | None = None
        self._ended: asyncio.Future[BaseException | None] | None = None
        self._owner: asyncio.Task[Any] | None = None  # the task in `async with`
        self._owner_cancelled = False
        self._subscribers: list[Subscriber] = []
        self._closed: asyncio.Future[None] | None = None

    def __repr__(self) -> str:
        name = self._session.name if self._session is not None else self._kwargs.get("name")
        return f"<pride.aio.Team {name!r} {self._state}>"

    # ------------------------------------------------------------ opening and closing

    def __await__(self) -> Generator[Any, None, Self]:
        """``team = await pride.aio.open_session(...)``: open it; close with `aclose`."""
        return self._open().__await__()

    async def __aenter__(self) -> Self:
        self._owner = asyncio.current_task()
        return await self._open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        ours = self._owner_cancelled and isinstance(exc, asyncio.CancelledError)
        if self._owner_cancelled and self._owner is not None:
            self._owner.uncancel()
        failure = await self._close(at_once=exc is not None)
        if failure is not None and (exc is None or ours):
            raise failure
        return False

    async def aclose(self) -> None:
        """Close the team: stop its session (with its grace) and wait for everything to end.

        Idempotent. Raises the session's failure ([`SupervisorFailed`][pride.SupervisorFailed])
        if it failed.

        Cancellation: the session stops at once (what was left of the grace is
        cut short) and the close still waits for everything to end; then the
        ``CancelledError`` is raised. The same holds for leaving the block.

        From an observer's handler, it waits for the session to stop, not for
        the handlers to take their last signals (the handler itself among them).
        """
        self._check_loop()
        self._check_asyncio_code()
        failure = await self._close(at_once=False)
        if failure is not None:
            raise failure

    async def _open(self) -> Self:
        if self._state != "new":
            raise RuntimeError("a team opens once: call pride.aio.open_session() again")
        self._check_asyncio_code()
        try:
            self.loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "pride.aio.open_session() needs a running asyncio loop (inside asyncio.run, "
                "a FastAPI lifespan, a notebook cell...)"
            ) from None
        self._state = "opening"
        try:
            self.guest = await acquire(self.loop)
        except BaseException:  # refused, or cancelled while the run started: never opened
            self._state = "closed"
            raise
        self.guest.members.add(self)
        opened: asyncio.Future[None] = self.loop.create_future()
        self._ended = self.loop.create_future()
        nursery = self.guest.nursery
        assert nursery is not None
        contextvars.Context().run(nursery.start_soon, self._hold, opened)
        try:
            await asyncio.wait((opened, self._ended), return_when=asyncio.FIRST_COMPLETED)
            if not opened.done():
                opened.cancel()
                error = self._ended.result()
                assert error is not None
                raise error
        except BaseException:
            failure = await self._close(at_once=True)
            if failure is not None:
                raise failure from None
            raise
        return self

    async def _close(self, *, at_once: bool) -> BaseException | None:
        """Close (or wait for the close already under way); return the session's failure."""
        ended = self._ended
        if ended is None:  # never opened
            self._state = "closed"
            return None
        if self._closed is not None:  # closed, or being closed by another caller: wait
            # An observer's handler waits for the session to stop, not for the close's
            # end: that close waits for the handlers to take their signals, this one too.
            current = asyncio.current_task()
            in_handler = any(s.task is current for s in self._subscribers)
            waited = ended if in_handler else self._closed
            cancelled = await wait_through(waited, on_cancel=self._stop_at_once)
        else:
            self._closed = closed = self.loop.create_future()
            self._state = "closing"
            self._at_once = self._at_once or at_once
            if not self.guest.finished.done():
                self._leave.set()
            cancelled = await wait_through(ended, on_cancel=self._stop_at_once)
            for subscriber in list(self._subscribers):  # a handler may unobserve meanwhile
                try:
                    await subscriber.drain()
                except asyncio.CancelledError as exc:
                    cancelled = exc
            self._subscribers.clear()
            self.guest.members.discard(self)
            try:
                await release(self.guest)
            except asyncio.CancelledError as exc:
                cancelled = exc
            self._state = "closed"
            closed.set_result(None)
        if cancelled is not None:
            raise cancelled
        return ended.result()

    def _stop_at_once(self) -> None:
        # A closer cancelled (Ctrl-C under asyncio.run, a shutdown's timeout) cuts the grace
        # short: the session stops at once, as if the block had raised, and the closer
        # still waits for the end. `_hold` not yet past `_leave` stops at once on its own;
        # one in the graceful stop is brought forward by a second stop with no grace
        # (Session.stop: the earlier deadline wins).
        ended = self._ended
        if self._at_once or ended is None or ended.done():  # nothing left to cut short
            return
        self._at_once = True
        session = self._session
        if session is not None and not self.guest.finished.done():
            Call(self, functools.partial(session.stop, grace=0), ()).submit()

    async def _hold(self, opened: asyncio.Future[None]) -> None:
        """The trio task of the team: its session, from start to stop."""
        failure: BaseException | None = None
        try:
            session = Session(**self._kwargs)
            async with session:
                self._session = session
                if self._state == "opening":  # not given up meanwhile (closing already)
                    self._state = "open"
                    opened.set_result(None)
                await self._leave.wait()
                if self._at_once:
                    await session.stop(grace=0)
        except trio.Cancelled:
            failure = TeamClosed("the trio guest run was cancelled")
            raise
        except BaseException as exc:
            failure = exc
        finally:
            with trio.CancelScope(shield=True):
                await self._cancel_calls()
            if failure is not None and self._state == "open":
                self._session_failed()
            assert self._ended is not None
            if not self._ended.done():
                self._ended.set_result(failure)
            self.guest.after_call()
            failure = None

    def _session_failed(self) -> None:
        # The session failed while the block ran: refuse calls, and cancel the block.
        self._state = "failed"
        owner = self._owner
        if owner is not None and not owner.done():
            self._owner_cancelled = True
            owner.cancel()

    async def _cancel_calls(self) -> None:
        if not self.calls:
            return
        self._calls_done = trio.Event()
        for call in list(self.calls):
            call.cancel(requested=False)
        await self._calls_done.wait()

    def call_done(self, call: Pending) -> None:
        """A call was answered (see `CallOwner`)."""
        calls = self.calls
        calls.discard(call)
        if not calls and self._calls_done is not None:
            self._calls_done.set()

    def guest_ended(self, error: BaseException) -> None:
        """The guest run ended under the team (trio failed): answer everything."""
        if self._state == "open":
            self._state = "failed"
        for call in list(self.calls):
            call.fail(error)
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(error)

    # ------------------------------------------------------------ checks

    def _check_loop(self) -> None:
        if self._state == "new":  # not opened: no loop to belong to yet
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not self.loop or running is None:
            raise WrongLoop(
                f"{self!r} belongs to the asyncio loop that opened it; it was used from "
                + ("another loop" if running is not None else "a thread without a running loop")
                + ". Hand the call to its loop: asyncio.run_coroutine_threadsafe(coro, loop)"
            )

    def _check_asyncio_code(self) -> None:
        # A trio task of the guest run runs in the loop's thread, with the loop running:
        # only this tells it apart, before a coroutine does work it cannot then await.
        if trio.lowlevel.in_trio_task():
            raise WrongLoop(
                f"{self!r} was awaited in trio code (a tool, an operation, a function given "
                "to team.run): its coroutines are for asyncio code. In trio code use the "
                "trio API: await team.session.ask(...), team.session.send(...), "
                "team.session.spawn(...), team.session.stream(...)"
            )

    def check(self) -> None:
        """Raise unless the team takes calls here and now (asyncio code of its loop, and open)."""
        self._check_asyncio_code()
        self._check_open()

    def _check_open(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._state != "open" or running is not self.loop:
            self._check_loop()
            raise TeamClosed(
                f"{self!r} takes no calls: "
                + (
                    "open it first (async with pride.aio.open_session(...))"
                    if self._state in {"new", "opening"}
                    else "it was closed; open a new team"
                )
            )

    def resolve_target(self, target: Any) -> Any:
        """``target`` as the send API takes it: a name or id looked up in the session's tree.

        Raises:
            UnknownBranch: no branch of the tree has that name or id.
        """
        if isinstance(target, str | UUID):
            return self.session.resolve_name(target)
        return target

    def _deliver(
        self, target: Any, command: Command, tag: str | int | None, *, in_line: bool
    ) -> Reply | None:
        """Put ``command`` in the target's mailbox from the asyncio side; None if it is full
        (for a caller that checked the team takes calls here and now).

        This is how ``ask`` and ``send`` reach trio without a trio task of their
        own (sync trio APIs may be called from the host): the envelope goes in
        at once and wakes the actor. With ``in_line`` (an ask, which waits for
        the outcome anyway) a local branch's full mailbox puts it in line for
        room (`pride.actors.send_in_line`). Otherwise a full mailbox returns
        None, and the caller waits for room in trio (`Call`), as `pride.send` does.

        Raises:
            UnknownBranch, BranchClosed, TypeError: as `pride.send_nowait` raises them.
        """
        deliver = send_in_line if in_line else send_nowait
        try:
            reply = deliver(self.resolve_target(target), command, tag=tag)
        except MailboxFull:
            return None
        self.guest.note_crossing()
        return reply

    async def _call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        self.check()
        result: T = await Call(self, fn, args).wait()
        return result

    # ------------------------------------------------------------ the session's verbs

    @property
    def session(self) -> Session:
        """The trio Session. From asyncio code use only its plain, synchronous members
        (``name``, ``branches``, ``get_branch``, ``statistics()``, ``usage``...)."""
        self._check_loop()
        if self._session is None:
            raise TeamClosed(f"{self!r} has no session yet: open it first")
        return self._session

    async def spawn(self, member: M, **options: Any) -> M:
        """[`Session.spawn`][pride.supervisors.session.Session.spawn]: start ``member``
        (a Branch, a child Session) under the session; returns it once attached."""
        session = self.session
        self.check()
        if options:
            return await self._call(functools.partial(session.spawn, member, **options))
        return await self._call(session.spawn, member)

    async def ask(self, target: Any, command: Command, timeout: float | None = None) -> Any:
        """[`Session.ask`][pride.supervisors.session.Session.ask]: send ``command`` to
        ``target`` (a Branch, a BranchRef, a name or an id) and return its result.

        Raises:
            TimeoutError: ``timeout`` seconds passed (the command was cancelled).
            UnknownBranch, BranchClosed, ...: as the session raises them.
            Exception: what the command raised.
        """
        self.check()
        if timeout is not None:
            check_timeout(timeout)
        reply = self._deliver(target, command, None, in_line=True)
        if reply is None:  # a target with no line (a remote one) is full: wait in trio
            session = self.session
            return await Call(self, session.ask, (target, command, timeout)).wait()
        return await ReplyWait(self, reply).wait(timeout)

    async def send(self, target: Any, command: Command, *, tag: str | int | None = None) -> Sent:
        """[`Session.send`][pride.supervisors.session.Session.send]: queue ``command`` and
        return a [`Sent`][pride.aio.Sent] handle at once (waits while the mailbox is full).
        Sends from one caller are served in the order they were awaited.

        Cancellation: a send cancelled while it waits for room leaves nothing to run
        (a command queued just as the cancellation came is dropped, or cancelled if
        its turn had begun)."""
        self.check()
        reply = self._deliver(target, command, tag, in_line=False)
        if reply is None:  # the mailbox is full: wait for room in trio (backpressure)
            session = self.session
            send = functools.partial(session.send, target, command, tag=tag)
            reply = await Call(self, send, (), late=_drop_late).wait()
        return Sent(self, reply)

    def stream(
        self, target: Any, command: WorkCommand, *, tag: str | int | None = None
    ) -> contextlib.AbstractAsyncContextManager[Items]:
        """``async with team.stream(target, command) as items: async for item in items``.

        Nothing is queued before the block is entered. The turn produces each
        item only when the loop asks for it (backpressure, no buffer between);
        leaving the block ends the stream and waits for the turn to finalise.
        See [`pride.stream`][pride.stream].
        """
        return open_stream(self, target, command, tag)

    async def resolve(self, turn_id: UUID | str, decisions: Mapping[str, Any] | None = None) -> Any:
        """[`Session.resolve`][pride.supervisors.session.Session.resolve]: continue a turn
        that stopped for approval with ``{call_id: Approve() | Deny(reason)}``; returns its
        result."""
        session = self.session
        return await self._call(session.resolve, turn_id, decisions)

    async def flow(self, flow: Flow, **options: Any) -> FlowResult:
        """[`Session.flow`][pride.supervisors.session.Session.flow]: run ``flow`` across
        the members (``max_concurrent``, ``budget``, ``fail_fast``...)."""
        session = self.session
        return await self._call(functools.partial(session.flow, flow, **options))

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run the trio async function ``fn(*args)`` in pride's trio run; return its result.

        ``fn`` runs in a trio task of its own: it may use any trio or pride API
        (``pride.ask``, ``trio.sleep``, nurseries). An exception group it
        raises from a nursery it opened reaches the caller as it is.
        """
        return await self._call(fn, *args)

    def ref(self, name: str | UUID) -> BranchRef | VirtualRef:
        """An address of the branch ``name`` (or id) that ``ask``/``send``/``stream``
        take, and that can be stored or logged (see
        [`Session.ref`][pride.supervisors.session.Session.ref]).

        For a virtual branch's name (``kind/key``) it is its
        [`VirtualRef`][pride.supervisors.session.VirtualRef], live or not: a send
        through it activates the branch, and it outlives a passivation. For any
        other branch of the tree, its [`BranchRef`][pride.BranchRef].

        Raises:
            UnknownBranch: no branch of the session's tree has that name (nor a virtual kind).
        """
        # The session's own ref: a BranchRef built here from what resolve_name found
        # named a virtual branch's live id (gone once passivated) or, before its
        # activation, an id no branch has, so an ask through it raised UnknownBranch.
        return self.session.ref(name)

    # ------------------------------------------------------------ observation

    def observe(self, *filters: Any, handler: H | None = None) -> Any:
        """Run ``handler`` on the asyncio side for each matching signal of the members.

        ``filters`` are those of [`Session.observe`][pride.supervisors.session.Session.observe]
        (signal classes, tuples of them, predicates). ``handler`` is a plain
        function or a coroutine function; it runs in a task of the loop, one
        signal at a time in order, and never holds up a turn (a slow handler
        falls behind on a bounded queue; see docs/asyncio.md). Without
        ``handler``, returns a decorator.

        Raises:
            TypeError: a filter is neither a signal class, a tuple of them nor a
                predicate, or ``handler`` is not callable.
        """
        if handler is None:

            def decorate(fn: H) -> H:
                self.observe(*filters, handler=fn)
                return fn

            return decorate
        session = self.session
        self._check_open()  # a plain function: trio code may call it too
        if not callable(handler):  # the session sees only the forwarder: checked here
            raise TypeError(f"observer handler must be callable, got {handler!r}")
        subscriber = Subscriber(self.guest, handler)
        try:
            session.observe(*filters, handler=subscriber.forward)
        except BaseException:
            subscriber.end()  # its consumer ends at once: nothing was queued
            raise
        self._subscribers.append(subscriber)
        return handler

    def unobserve(self, handler: Callable[[Signal], Any]) -> int:
        """Remove ``handler``'s subscriptions (each still handles what it already queued);
        returns how many there were."""
        session = self.session
        removed = 0
        for subscriber in [s for s in self._subscribers if s.handler == handler]:
            removed += session.unobserve(subscriber.forward)
            subscriber.end()
            self._subscribers.remove(subscriber)
        return removed


def _drop_late(call: Call) -> None:
    # Queued all the same for a send whose caller was cancelled, who gets no handle (see
    # Call): dropped, as a cancelled send leaves nothing queued (cancelled, had it begun).
    outcome, call.outcome = call.outcome, None
    if outcome is not None and isinstance(outcome[0], Reply):
        outcome[0].cancel("caller")


class Sent:
    """The handle ``await team.send(...)`` returns (a [`Reply`][pride.Reply] seen from asyncio)."""

    __slots__ = ("_reply", "_team")

    def __init__(self, team: Team, reply: Reply) -> None:
        self._team = team
        self._reply = reply

    def __repr__(self) -> str:
        return f"<pride.aio.Sent {self._reply!r}>"

    @property
    def turn_id(self) -> UUID | None:
        """The turn's id once it has started (None before, and for non-turn commands)."""
        return self._reply.turn_id

    @property
    def done(self) -> bool:
        """True once the command has an outcome."""
        return self._reply.done

    async def result(self) -> Any:
        """Wait for the command's result (or raise its error), once.

        Cancellation: cancelling the wait does not cancel the command; use `cancel`.

        Raises:
            ReplyConsumedError: the result was already taken.
            TurnCancelled, BranchClosed, Exception: as
                [`Reply.result`][pride.actors.reply.Reply.result].
        """
        team = self._team
        team.check()
        return await ReplyWait(team, self._reply).wait(cancels=False)

    def cancel(self, reason: str = "caller") -> None:
        """Give up on the command: dropped if still queued, cancelled if running. Idempotent."""
        self._team._check_loop()
        self._reply.cancel(reason)
