"""The supervisor loop: children, their runs, crashes, restarts and ordered stops.

One nursery per session owns every child's actor task. A child is a
[`Branch`][pride.Branch] (its task runs ``branch.serve``), a child session
(its task runs that session's own supervisor) or a service such as an MCP
server (its task runs ``service.serve``, which opens and closes the resource
it holds; see `pride.supervisors._service`). Each time a child is started
it gets a fresh `Run` (one incarnation: a task, a cancel scope, an
outcome); restarting a child means starting a new run over the same branch
object and the same mailbox, so the conversation and the queued envelopes
survive.

Every run that ends on its own (a crash, or a ``Stop`` somebody sent)
is reported on a channel to the supervisor task, which handles reports one
at a time under the session's lock. Ends the supervisor asked for itself (a
restart's sibling stops, a shutdown) are handled where they were asked and
their reports ignored, so there is exactly one place deciding about each
run. Stop and suspend requests travel through the same channel, which means
a ``session.stop()`` called from inside a member's own turn cannot strand
the shutdown half-way when that turn is cancelled.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from uuid import UUID

import trio

from ..actors import send_nowait
from ..actors.loop import serve as serve_actor
from ..actors.reply import Reply
from ..actors.turn import await_bounded
from ..branch import Branch
from ..errors import PrideError, SupervisorFailed
from ..messages import BranchRestarted, BranchStarted, BranchStopped, SessionFailed, Signal, Stop
from ._child import Child, Run, Status, close
from ._roster import Roster
from ._service import Service
from .strategy import RestartIntensity, Strategy, restart_group, restarts_after_crash

if TYPE_CHECKING:
    from .hooks import HookBus
    from .observer import Observer

log = logging.getLogger("pride.session")

# The session whose supervisor is delivering a lifecycle signal or hook point in this
# context (the handlers' tasks inherit it): that supervisor holds its lock until the
# handlers return, so a handler must not wait for anything that needs the lock.
_delivering: ContextVar[Any] = ContextVar("pride_session_delivering", default=None)


def delivering_owner() -> Any:
    """The session (a supervisor's ``owner``) whose lifecycle handlers run in this
    context, or None outside them."""
    return _delivering.get()


class Supervisor:
    """A session's supervision: its children, their runs, restarts and ordered stops.

    A component the [`Session`][pride.Session] holds; everything it needs is
    given here. It serves the way a child does (``serve``, ``request_stop``:
    the shape of a service, `pride.supervisors._service`), so a parent
    supervises a child session through its supervisor.

    Args:
        owner: the session, as hook payloads name it (``{"session": owner}``).
        name: the session's name, for logs, errors and lifecycle signals.
        id: the session's id.
        strategy: the restart strategy.
        intensity: the restart intensity (and its count).
        observer: where lifecycle signals go.
        hooks: where lifecycle hook points fire.
        release: called with a child that leaves (a ``remove`` finished) to
            undo its membership wiring.
        stopped: awaited with each child that stopped and the reason its
            ``BranchStopped`` gave, after that signal (a session's virtual
            branches passivate so, `pride.supervisors._virtual`).
    """

    def __init__(
        self,
        owner: Any,
        *,
        name: str,
        id: UUID,
        strategy: Strategy,
        intensity: RestartIntensity,
        observer: Observer,
        hooks: HookBus,
        release: Callable[[Child], None],
        stopped: Callable[[Child, str], Awaitable[None]] | None = None,
    ) -> None:
        self.owner = owner
        self._stopped = stopped
        self.name = name
        self.id = id
        self.observer = observer
        self.hooks = hooks
        self._release = release
        self.strategy = strategy
        self.intensity = intensity
        self._children = Roster()
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._events: trio.MemorySendChannel[tuple[Any, ...]] | None = None
        self._finished = trio.Event()
        self._failure: Exception | None = None
        self._resume: list[Child] = []  # children to bring back when served again
        self._deadline: float | None = None  # set while stopping; stop() may tighten it
        self._suspended = False  # the last run ended in a suspend (a parent's restart)
        self._grace_scope: trio.CancelScope | None = None

    # ------------------------------------------------------------ running

    @property
    def running(self) -> bool:
        """True while the session supervises (between start and the end of its stop)."""
        return self._nursery is not None and not self._finished.is_set()

    @property
    def stopping(self) -> bool:
        """True from a stop (or a failure) being asked until the supervisor is
        served again."""
        return self._deadline is not None or self._finished.is_set()

    @property
    def children(self) -> Roster:
        """The children, in start order, indexed (the supervisor's own: change it under `lock`)."""
        return self._children

    @property
    def lock(self) -> trio.Lock:
        """Held while children are started, stopped, restarted or taken out."""
        return self._lock

    @property
    def nursery(self) -> trio.Nursery | None:
        """The nursery hosting the children's tasks while the supervisor serves."""
        return self._nursery

    async def wait_finished(self) -> None:
        """Wait until the current run of the supervisor is over (stopped, failed, suspended)."""
        await self._finished.wait()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> str:
        """Serve as a supervisor until stopped, failed or suspended.

        Returns ``"normal"`` after a stop and ``"suspend"`` after a suspend.

        Raises:
            SupervisorFailed: restart intensity was exceeded; ``__cause__``
                is the last crash. The children were stopped first.
        """
        if self._nursery is not None:
            raise RuntimeError(f"session {self.name!r} is already running")
        self._failure = None
        self._finished = trio.Event()
        self._deadline = None
        self._suspended = False
        self.intensity.reset()
        send, receive = trio.open_memory_channel[tuple[Any, ...]](math.inf)
        resume, self._resume = self._resume, []
        try:
            async with trio.open_nursery() as nursery:
                self._nursery, self._events = nursery, send
                nursery.start_soon(self._supervise, receive, name=f"supervisor {self.name}")
                await self._hook("session_start", {"session": self.owner})
                async with self._lock:
                    for child in resume:
                        try:
                            await self.start(child, restart=True)
                        except Exception as exc:  # failing to start again is a crash too
                            await self._on_crash(child, exc)
                        if self._finished.is_set():
                            break
                task_status.started()
                await self._finished.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = self._events = None
            send.close()
            self._abandon()
            self._finished.set()  # whoever waits on a stop: it is over, one way or another
        if self._failure is not None:
            raise SupervisorFailed(
                f"session {self.name!r} exceeded its restart intensity "
                f"({self.intensity.max_restarts} per {self.intensity.period}s)"
            ) from self._failure
        return "suspend" if self._suspended else "normal"

    def _post(self, *event: Any) -> bool:
        events = self._events
        if events is None:
            return False
        try:
            events.send_nowait(event)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    async def _supervise(self, receive: trio.MemoryReceiveChannel[tuple[Any, ...]]) -> None:
        async with receive:
            async for event in receive:
                async with self._lock:
                    if self._finished.is_set():
                        continue
                    kind = event[0]
                    if kind == "exit":
                        await self._on_exit(event[1], event[2])
                    elif kind == "stop":
                        await self._shutdown()
                    elif kind == "suspend":
                        await self._suspend_all()
                # Waiting for the next one, hold nothing of this one: a child that
                # left (a passivated virtual branch) must not stay reachable from here.
                del event

    async def _run_child(self, child: Child, run: Run, *, task_status: Any) -> None:
        status = Status(task_status, run)
        del task_status  # trio's status object is done with once started: hold none for the run
        try:
            with run.scope:
                try:
                    actor = child.actor
                    if isinstance(actor, Branch):
                        # The session's nursery hosts the actor's turn-scoped tasks. The
                        # loop is awaited here directly: every resume of the actor's task
                        # re-enters each frame of this chain, and Branch.serve adds one.
                        run.reason = await serve_actor(actor, self._nursery, task_status=status)
                    else:  # a child session (its supervisor) or a service
                        assert child.runner is not None
                        run.reason = await child.runner.serve(task_status=status)
                except Exception as exc:
                    if not run.started:
                        raise  # out of nursery.start: the child failed to start
                    run.crash = exc
        finally:
            run.ended.set()
            if run.started and not run.expected:
                self._post("exit", child, run)
            # A crash's traceback holds this frame, and the run holds the crash: let go of
            # the run and its child here, or the three keep each other (and the branch)
            # alive after the child left, until a full collection.
            del child, run, status

    def check_accepting(self, name: str) -> None:
        """Refuse a new member called ``name`` while stopping or failed.

        Raises:
            RuntimeError: the session is stopping (or not serving): its nursery
                is about to be cancelled, so the member would be killed without
                a shutdown.
        """
        if self.stopping or self._nursery is None:
            raise RuntimeError(
                f"session {self.name!r} is stopping: it takes no new members "
                f"(spawn {name!r} before stop(), or into a session that runs)"
            )

    async def start(self, child: Child, *, restart: bool) -> None:
        """Start a new run of ``child`` in the session's nursery and announce it.

        Raises:
            RuntimeError: a new member (not ``restart``) while the session is
                stopping or failed: its nursery is about to be cancelled, so the
                member would be killed without a shutdown.
        """
        if not restart:  # checked under the lock, where a spawn queued behind a shutdown gets in
            self.check_accepting(child.name)
        assert self._nursery is not None
        run = Run()
        child.run, child.state = run, "running"
        try:
            await self._nursery.start(self._run_child, child, run)
        except BaseException:
            child.state = "stopped"
            raise
        await self._announce(
            BranchStarted(branch_id=child.actor.id, branch_name=child.name, restart=restart),
            "branch_start",
            {"session": self.owner, "branch": child.actor, "restart": restart},
        )

    # ------------------------------------------------------------ crashes

    async def _on_exit(self, child: Child, run: Run) -> None:
        if child.run is not run or run.expected:
            return  # stale: a later run exists, or the end was handled where it was asked
        if child.state == "leaving":
            await self._forget(child, run)
        elif run.crash is not None:
            await self._on_crash(child, run.crash)
        else:
            child.state = "stopped"
            close(child, "its actor was stopped")
            await self._announce_stop(child, "normal", None)

    async def _on_crash(self, child: Child, crash: Exception) -> None:
        """Apply the strategy to a crash of ``child`` (its run has ended)."""
        # Handled here (restarted, or the session fails with SupervisorFailed, which
        # carries it): one line says who crashed and why; where it was raised is for
        # DEBUG. A crash raised on purpose (Escalate) printed ~50 lines mid-run.
        log.warning("session %r: child %r crashed: %r", self.name, child.name, crash)
        log.debug("session %r: child %r crashed here:", self.name, child.name, exc_info=crash)
        child.state = "stopped"
        await self._announce_stop(child, "crash", crash)
        if not restarts_after_crash(child.restart):
            close(child, "it crashed and is temporary (never restarted)")
            return
        if not self.intensity.allow(trio.current_time()):
            await self._fail(child, crash)
            return
        running = [c for c in self._children if c.state == "running" or c is child]
        group = restart_group(self.strategy, running, child)
        restartable: set[int] = {id(child)}
        for sibling in reversed(group):
            if sibling is not child and await self._halt(sibling):
                restartable.add(id(sibling))
        cause = f"{type(crash).__name__}: {crash}"
        for member in group:
            if id(member) not in restartable:
                continue
            if member is not child and not restarts_after_crash(member.restart):
                close(member, "a sibling crashed and it is temporary (never restarted)")
                continue
            await self._announce(
                BranchRestarted(branch_id=member.actor.id, branch_name=member.name, cause=cause),
                "branch_restart",
                {"session": self.owner, "branch": member.actor, "cause": crash},
            )
            try:
                await self.start(member, restart=True)
            except Exception as again:  # it crashed while starting: a crash like any other
                await self._on_crash(member, again)
                if self._finished.is_set():  # that crash failed the session
                    return

    async def _halt(self, child: Child) -> bool:
        """Stop a sibling for a restart: cancel its running turn, keep its mailbox.

        Returns True if it may be started again (it was not stopped on purpose).
        """
        run = child.run
        assert run is not None
        run.expected = True
        child.state = "stopping"
        actor = child.actor
        runner = child.runner
        if not run.ended.is_set():
            if isinstance(actor, Branch):
                suspend: Reply | None = None
                with contextlib.suppress(PrideError):  # closed: its run is ending by itself
                    suspend = actor.actor.suspend(actor, "restart")
                await run.ended.wait()
                if suspend is not None and not suspend.done:
                    suspend.cancel("restart")  # never leave a stale Suspend queued
            elif isinstance(runner, Supervisor):
                runner.request_suspend()
                await run.ended.wait()
            else:
                assert runner is not None
                await _stop_service(runner, run, trio.current_time())
                if run.crash is None:
                    run.reason = "suspend"  # stopped for the restart, not on purpose
        child.state = "stopped"
        await self._announce_stop(child, "crash" if run.crash else "shutdown", run.crash)
        return run.reason not in ("normal", "shutdown")

    async def _fail(self, crashed: Child, crash: Exception) -> None:
        """Past the intensity limit: announce, stop every child at once, finish failed."""
        log.error("session %r: restart intensity exceeded; last crash: %r", self.name, crash)
        self._failure = crash
        cause = f"{type(crash).__name__}: {crash}"
        await self._announce(
            SessionFailed(session_name=self.name, cause=cause),
            "session_failed",
            {"session": self.owner, "cause": crash},
        )
        self._deadline = trio.current_time()
        resume = [c for c in self._children if c.state == "running" or c is crashed]
        await self._stop_children()
        close(crashed, "its session failed")
        # A parent that restarts this session brings these back.
        self._resume = [c for c in resume if restarts_after_crash(c.restart)]
        self._finished.set()

    # ------------------------------------------------------------ stopping

    def request_stop(self, deadline: float) -> None:
        """Ask the supervisor to stop every child by ``deadline`` (tightening an earlier ask)."""
        if self._deadline is not None:
            self._deadline = min(self._deadline, deadline)
            if self._grace_scope is not None:
                self._grace_scope.deadline = min(self._grace_scope.deadline, deadline)
            return
        self._deadline = deadline
        self._post("stop")

    def request_suspend(self) -> None:
        """For a parent's restart: halt every child keeping its mailbox, and finish."""
        self._post("suspend")

    async def _shutdown(self) -> None:
        await self._stop_children()
        await self._hook("session_stop", {"session": self.owner})
        self._resume = []
        self._finished.set()

    async def _suspend_all(self) -> None:
        """For a parent's restart: halt every child, keeping mailboxes; finish 'suspended'."""
        resume = []
        for child in reversed(self._children):
            if child.state == "running" and await self._halt(child):
                if restarts_after_crash(child.restart):
                    resume.append(child)
                else:
                    close(child, "its session restarted and it is temporary")
        self._resume = resume[::-1]
        self._suspended = True
        self._finished.set()

    async def _stop_children(self) -> None:
        """Stop children one after another in reverse start order, by ``self._deadline``."""
        for child in reversed(self._children):
            if child.state in ("running", "leaving"):
                await self._stop_child(child)

    async def _stop_child(self, child: Child) -> None:
        run = child.run
        assert run is not None and self._deadline is not None
        leaving = child.state == "leaving"
        run.expected = True
        child.state = "stopping"
        actor = child.actor
        runner = child.runner
        if not run.ended.is_set():
            if isinstance(actor, Branch):
                with contextlib.suppress(PrideError):  # closed: the run is ending by itself
                    send_nowait(actor, Stop(reason="shutdown"))
                with trio.CancelScope(deadline=self._deadline) as grace:
                    self._grace_scope = grace
                    await run.ended.wait()
                self._grace_scope = None
                if not run.ended.is_set():  # grace is over: cancel the turn (TurnCancelled)
                    run.scope.cancel()
                    await run.ended.wait()
            elif isinstance(runner, Supervisor):
                runner.request_stop(self._deadline)
                await run.ended.wait()
            else:
                assert runner is not None
                await _stop_service(runner, run, self._deadline)
        child.state = "stopped"
        close(child, "its session shut down")
        if leaving:
            await self._forget(child, run)
        else:
            reason = "crash" if run.crash is not None else "shutdown"
            await self._announce_stop(child, reason, run.crash)

    async def _forget(self, child: Child, run: Run) -> None:
        """Finish a ``remove``: detach, drop from the membership, announce, wake the caller."""
        child.state = "stopped"
        close(child, "it was removed from its session")
        self._release(child)
        if child in self._children:
            self._children.remove(child)
        await self._announce_stop(child, "crash" if run.crash else "normal", run.crash)
        if child.gone is not None:
            child.gone.set()

    def _abandon(self) -> None:
        """The nursery is gone: close the mailboxes of children not kept for a restart."""
        kept = {id(child) for child in self._resume}
        lost = 0
        for child in self._children:
            if child.state != "stopped" and id(child) not in kept:
                child.state = "stopped"
                lost += close(child, "its session was cancelled")
                if child.gone is not None:
                    child.gone.set()
        if lost:
            log.warning(
                "session %r was cancelled; %d children stopped without a shutdown", self.name, lost
            )

    # ------------------------------------------------------------ announcing

    async def _announce_stop(self, child: Child, reason: str, error: Exception | None) -> None:
        await self._announce(
            BranchStopped(
                branch_id=child.actor.id,
                branch_name=child.name,
                reason=reason,  # type: ignore[arg-type]
                error=f"{type(error).__name__}: {error}" if error is not None else None,
            ),
            "branch_stop",
            {"session": self.owner, "branch": child.actor, "reason": reason, "error": error},
        )
        if self._stopped is not None:
            await self._stopped(child, reason)

    async def _announce(self, signal: Signal, point: str, payload: Mapping[str, Any]) -> None:
        """Deliver a lifecycle signal to the observer, then fire its hook point.

        The supervisor waits on async subscribers and handlers for at most
        ``FINALIZE_GRACE`` each (then cancels them, logged): restarts and
        shutdown must never hang on somebody watching them.
        """
        token = _delivering.set(self.owner)
        try:
            pending = self.observer.dispatch(signal)
            if pending is not None:
                await self._bounded(pending, type(signal).__name__)
        finally:
            _delivering.reset(token)
        await self._hook(point, payload)

    async def _hook(self, point: str, payload: Mapping[str, Any]) -> None:
        token = _delivering.set(self.owner)
        try:
            pending = self.hooks.emit(point, payload)
            if pending is not None:
                await self._bounded(pending, f"hook {point}")
        except Exception:  # Escalate too: a lifecycle hook has no turn to fail
            log.exception("session %r: hook %s failed", self.name, point)
        finally:
            _delivering.reset(token)

    async def _bounded(self, pending: Any, what: str) -> None:
        await await_bounded(pending, f"session {self.name!r}: subscribers of {what}", log)


SERVICE_OVERRUN = 2.0
"""Seconds a service may take past its stop deadline before its task is cancelled."""


async def _stop_service(service: Service, run: Run, deadline: float) -> None:
    """Ask a service to stop by ``deadline``; cancel it if it overruns (it cleans up shielded)."""
    service.request_stop(deadline)
    with trio.move_on_at(deadline + SERVICE_OVERRUN):
        await run.ended.wait()
    if not run.ended.is_set():
        log.error("service %r did not stop by its deadline; cancelling it", service.name)
        run.scope.cancel()
        await run.ended.wait()
