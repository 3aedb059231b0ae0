"""``pride run APP``: a supervisor tree as a long-running process.

The process owns the root [`Session`][pride.Session] (and so the store and the
shutdown); the application function spawns its branches and child sessions
into it. Work arrives as JSON lines on standard input and each request is
answered by one JSON line on standard output (`pride.cli._requests`).
Requests are queued in the order they are read, so requests to one branch
are served in that order (a full mailbox makes the reader wait:
backpressure), and answered concurrently, each waited for in its own task.
Structured logs go to standard error (`pride.cli._logs`), with a live
status line on the terminal's bottom row when standard error is a terminal.

Shutdown. The problem: a long-running agent process is stopped by its
supervisor (systemd, Kubernetes, a terminal's Ctrl-C) while turns are
running, and a turn is expensive to lose. Options: exit at once (loses the
turns in flight), wait for everything (a stuck provider blocks the stop
forever), or a bounded drain as OTP's shutdown timeout and hypercorn's
``graceful_timeout`` do. The choice is the bounded drain, escalating:

1. the first SIGINT or SIGTERM stops reading standard input and calls
   ``session.stop(grace)``: running turns may finish within the grace
   period, then are cancelled (terminal signals sent, callers answered
   ``TurnCancelled``); queued requests are answered ``BranchClosed``. Every
   request read gets its answer line, and the process exits 0;
2. a second signal brings the deadline to now (grace 0) and the process
   exits ``128 + signal number`` (130 for SIGINT, 143 for SIGTERM), the shell
   convention for "killed by that signal";
3. a third signal exits at once, without waiting for anything.

End of standard input does not stop the process (its work may arrive from
elsewhere, or not yet) unless ``--exit-on-eof`` is given: then it answers
the requests it has, stops gracefully and exits 0 (that stop is no signal: a
first signal during it still drains, a second forces). Not even when standard
input is not a terminal: a service's is /dev/null or a closed pipe (systemd,
a container without ``-i``), and would stop at once. The log line at end of
input names the flag instead, and the docs pipe with it.

Durable turns (with ``--store``). Each request is sent tagged with its id,
and the turn journal keeps the tag. When the process restarts on the same
store, every turn a crash interrupted is resumed (or abandoned, by policy)
and answered on the id of the request that started it, as if the process
had never stopped; those answers count as requests in flight for
``--exit-on-eof``. A turn that stops for approval is answered with an
``ApprovalRequired`` error line carrying ``turn_id`` and ``pending`` (each
call's ``call_id``, ``function``, ``arguments``); a ``Resume`` request
(``{"type": "Resume", "turn_id": ..., "decisions": {call_id: {"type":
"Approve"} | {"type": "Deny", "reason": ...}}}``) continues it, in this
process or a later one, and is answered with the turn's result.
A flow in flight when the process stopped is listed in the log on restart
(its id, how many nodes finished); its interrupted node turns are resumed
with their branches, and the app continues the flow with
``session.resume_flow(flow_id, flow)`` (docs/flows.md, "Resuming a flow").
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable, Iterable
from math import inf
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import trio
from rich.console import Console

from .._repeats import Repeats
from ..actors import Reply, send
from ..branch import Branch
from ..errors import (
    BranchClosed,
    InvalidMessage,
    StoreError,
    SupervisorFailed,
    UnknownBranch,
)
from ..messages import (
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    RunEnd,
    RunFailed,
    RunStart,
    SessionFailed,
    Signal,
    Usage,
)
from ..messages.limits import image_url_prefixes
from ..messages.requests import for_branch, for_remote
from ..supervisors import Session
from ._answers import MAX_PENDING, Answers
from ._extras import placement, start_tracing, stop_tracing
from ._lines import MAX_LINE, LineReader, LineTooLong
from ._loader import AppError, app_failed, call_app, load_app
from ._logs import configure, write_off_the_loop
from ._requests import Request, RequestRejected, error_line, ok_line, parse_request
from ._signals import answer_signals, interruptible
from ._startup import EXIT_USAGE, cannot_start
from ._status import StatusLine, TurnsInFlight, describe_usage

__all__ = ["EXIT_ANSWERS_LOST", "EXIT_APP_ERROR", "EXIT_FAILED", "RunOptions", "run_app"]

log = logging.getLogger("pride.cli")

EXIT_FAILED = 1
"""Exit status when the root session failed (restart intensity exceeded)."""
EXIT_APP_ERROR = EXIT_USAGE
"""Exit status when the app or the store could not be started."""
EXIT_ANSWERS_LOST = 3
"""Exit status of a drain that could not write every answer line (stdout closed by its
reader, or not read within the bound of a stop): requests were answered into nothing,
and the process's supervisor has to learn it from more than a log record."""
FORCED_FLUSH = 1.0
"""Seconds a forced stop still waits for stdout to take the last answers."""

# Classes, not a predicate: a branch builds only the signals somebody's classes
# admit (Observer.wants), so a predicate here would have every turn build and
# dispatch every MessageAdded for nothing.
_OBSERVED = (BranchStarted, BranchStopped, BranchRestarted, SessionFailed, *TurnsInFlight.SIGNALS)


_USAGE_FIELDS = tuple(field.name for field in attrs.fields(Usage))


def _plain(usage: Usage) -> dict[str, Any]:
    """``attrs.asdict(usage)``, at a fifth of the cost (a flat record needs no recursion)."""
    return {name: getattr(usage, name) for name in _USAGE_FIELDS}


def _prefixes(values: Iterable[str]) -> tuple[str, ...]:
    return image_url_prefixes(*values)


@attrs.frozen
class RunOptions:
    """The options of ``pride run`` (see ``pride run --help``)."""

    app: str
    store: Path | None = None
    grace: float = 5.0
    status: bool = True
    exit_on_eof: bool = False
    log_level: str = "INFO"
    max_line_bytes: int = MAX_LINE
    max_pending: int = MAX_PENDING  # request lines read and not yet answered on stdout
    # Image URL prefixes requests may carry besides data: URLs (ValueError: one allows too much).
    image_urls: tuple[str, ...] = attrs.field(default=(), converter=_prefixes)
    otel: bool = False
    cluster: str | None = None  # a Ray address, "local", or None: no cluster


def run_app(options: RunOptions) -> int:
    """Run the process to its end; return its exit status.

    Returns:
        0 after a clean drain; 1 if the root session failed; 2 if the app
        or the store could not be started (said in one line, `cannot_start`);
        3 (`EXIT_ANSWERS_LOST`) after a drain that could not write every answer
        line; ``128 + signum`` after a forced shutdown.
    """
    try:
        configure(options.log_level)
    except ValueError as exc:
        return cannot_start("run", str(exc))
    try:
        function = load_app(options.app)
    except AppError as exc:
        return app_failed("run", exc)
    provider = None
    if options.otel:
        try:
            provider = start_tracing()
        except (ImportError, ValueError) as exc:
            return cannot_start("run", str(exc))
    try:
        return trio.run(write_off_the_loop, _main, options, function)
    except KeyboardInterrupt:  # Ctrl-C before the signal watcher took over
        log.warning("interrupted while starting")
        return 128 + signal.SIGINT
    finally:
        if provider is not None:
            stop_tracing(provider)


async def _main(options: RunOptions, function: Callable[..., Any]) -> int:
    # The answers' writer outlives the tree: a root session that fails raises out of
    # it, and the answers already queued are still written (bounded) before the exit.
    answers = Answers(sys.stdout.fileno(), options.max_pending)
    failure: BaseException | None = None
    code = 0
    async with trio.open_nursery() as output:
        output.start_soon(answers.run)
        try:
            code = await _run_tree(options, function, answers)
        except BaseException as exc:  # re-raised as itself, not in the nursery's group
            failure = exc
        finally:
            # Bounded, and within the deadline of the drain's own flush if it had one:
            # a stdout nobody reads is waited for once, not a grace more here.
            await answers.flush(max(options.grace, FORCED_FLUSH))
            output.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if answers.unwritten:  # counted only now: the last writes may have been given up above
        if code == 0:  # a failed root or a forced stop says more; otherwise say work was lost
            code = EXIT_ANSWERS_LOST
        log.error(
            "%d answer lines were not written to stdout (exit status %d)", answers.unwritten, code
        )
    return code


async def _run_tree(options: RunOptions, function: Callable[..., Any], answers: Answers) -> int:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        session = Session("pride-run", store=options.store, grace=options.grace)
        try:
            async with placement(options.cluster, options.store, session) as cluster, session:
                process = _Process(session, options, answers, cluster)
                session.on_resume(process.resumed)  # before the app restores its branches
                session.observe(*_OBSERVED, handler=process.on_signal)

                async def start() -> None:
                    await call_app(function, session, cluster)
                    await _list_unfinished_flows(session)

                interrupted = await interruptible(signals, start, command="run")
                if interrupted is not None:
                    return 128 + interrupted
                stats = session.statistics()
                log.info(
                    "app %s started (branches: %d, sessions: %d); reading requests on stdin",
                    options.app,
                    stats.branches,
                    stats.sessions + 1,
                )
                code = await process.serve(signals)
        except AppError as exc:
            return app_failed("run", exc)
        except StoreError as exc:
            return cannot_start("run", f"cannot use the store: {exc}")
        except SupervisorFailed as exc:
            log.error("the root session failed: %s", exc)
            return EXIT_FAILED
        except ImportError as exc:  # --cluster without the ray extra
            return cannot_start("run", str(exc))
        return code


async def _list_unfinished_flows(session: Session) -> None:
    """Say which flows the store's journal holds: cut short by the last process,
    they wait for the app's ``session.resume_flow`` (their interrupted turns
    were resumed with their branches)."""
    for flow in await session.unfinished_flows():
        log.warning(
            "flow %r (%s) was in flight when the last process stopped: %d of %d nodes "
            "finished; continue it with session.resume_flow(%r)",
            flow.name,
            flow.flow_id,
            len(flow.outcomes),
            len(flow.nodes),
            str(flow.flow_id),
        )


class _Process:
    """The serving part: requests, signals, the status line, the drain."""

    def __init__(
        self, session: Session, options: RunOptions, answers: Answers, cluster: Any = None
    ) -> None:
        self.session = session
        self.options = options
        self.cluster = cluster
        self.exit_code = 0
        self.stopping = False
        self.in_flight = 0
        self._stopped = trio.Event()
        self._reading = trio.CancelScope()
        self._outer: trio.Nursery | None = None
        self._work: trio.Nursery | None = None
        self._resumed: list[Reply] = []  # resumed while the app started, not yet awaited
        self.answers = answers  # its writer runs in _main, around the tree
        self._stop_began: float | None = None  # when the first signal came
        self._ended = False  # the end of the work began a stop (no signal: see begin_stop)
        self.forced = False
        self.turns = TurnsInFlight(self._branch)
        # A client writing garbage would log a warning a line; each still gets its answer.
        self._bad_lines = Repeats(log, "request lines that are not valid requests")
        self.status: StatusLine | None = None
        if options.status and sys.stderr.isatty():
            self.status = StatusLine(session, Console(stderr=True), self.turns.names)

    def _branch(self, branch_id: UUID | None) -> Branch | None:
        """The branch of the tree with this id, if any (for `TurnsInFlight`)."""
        try:
            found = self.session.resolve_name(branch_id) if branch_id is not None else None
        except UnknownBranch:
            return None
        return found if isinstance(found, Branch) else None

    async def serve(self, signals: Any) -> int:
        """Serve until a signal (or end of input with ``--exit-on-eof``) and the drain."""
        sys.stdout.flush()  # what the app printed goes first: answers are written to the fd
        async with trio.open_nursery() as outer:
            self._outer = outer
            outer.start_soon(self._watch_signals, signals)
            if self.status is not None:
                outer.start_soon(self.status.run)
            async with trio.open_nursery() as work:
                self._work = work
                for reply in self._resumed:
                    work.start_soon(self._answer_resumed, reply)
                self._resumed.clear()
                with self._reading:
                    await self._read_requests(work)
                    if not self.options.exit_on_eof:
                        log.info(
                            "stdin closed; serving until SIGINT or SIGTERM (--exit-on-eof "
                            "stops once every request is answered)"
                        )
                        await trio.sleep_forever()
                    log.info("stdin closed (--exit-on-eof): answering %d requests", self.in_flight)
            self._work = None
            # Every request read has been answered.
            if not self.stopping:  # not by a signal (nor a failed root): the end of input
                log.info(
                    "every request is answered (end of input): stopping; running turns "
                    "have %ss, then the last answers are written",
                    self.options.grace,
                )
                self._end(self.options.grace)
            await self._stopped.wait()
            # A signal during the end of input's stop bounds the rest as one before it does.
            await self._flush_answers(self._flush_bound() if self.stopping else inf)
            outer.cancel_scope.cancel()
        log.info("stopped (exit status %d)", self.exit_code)
        return self.exit_code

    def _flush_bound(self) -> float:
        """Seconds stdout still gets after a signal's drain: what is left of the grace
        period counted from the signal (the turns had the first of it, and one grace
        bounds the whole drain), but at least `FORCED_FLUSH` for the last answers, which
        turns cancelled at the deadline write just after it."""
        assert self._stop_began is not None
        left = self._stop_began + self.options.grace - trio.current_time()
        return max(left, FORCED_FLUSH)

    async def _flush_answers(self, bound: float) -> None:
        """Wait until every answer is written, for at most ``bound`` seconds (infinite at
        the end of input: a pipeline's slow reader still gets every answer), or
        `FORCED_FLUSH` once forced; a signal during the wait forces it."""
        if not await self.answers.flush(FORCED_FLUSH if self.forced else bound):
            log.error("stdout is not being read: stopping without the answers still unwritten")

    # ------------------------------------------------------------ requests

    async def _read_requests(self, work: trio.Nursery) -> None:
        try:
            await self._read_lines(work)
        finally:
            self._bad_lines.flush()  # the count not said yet, at the input's end (or a stop)

    async def _read_lines(self, work: trio.Nursery) -> None:
        reader = LineReader(sys.stdin.fileno(), self.options.max_line_bytes)
        number = 0
        while True:
            # A place first: a client not reading its answers stops being read (_answers.py).
            await self.answers.place()
            try:
                line = await reader.readline()
            except LineTooLong as exc:
                number += 1
                error = InvalidMessage([("request", f"{exc} (--max-line-bytes)")])
                self._bad_lines.warning("line %d is not a valid request: %s", number, error)
                self._write(error_line(None, error))
                continue
            except OSError as exc:
                self.answers.give_back()
                log.error("cannot read stdin: %s", exc)
                return
            if line is None:
                self.answers.give_back()
                return
            number += 1
            if not line.strip():
                self.answers.give_back()
                continue
            try:
                request = parse_request(line, image_urls=self.options.image_urls)
            except RequestRejected as exc:
                self._bad_lines.warning(
                    "line %d is not a valid request: %s",
                    number,
                    exc.error,
                    extra={"request_id": exc.request_id},
                )
                self._write(error_line(exc.request_id, exc.error))
                continue
            await self._dispatch(request, work)

    async def _dispatch(self, request: Request, work: trio.Nursery) -> None:
        """Queue the request's command, in reading order, and answer it from its own task."""
        try:
            reply = await self._send(request)
        except trio.Cancelled:  # stopping while waiting for room in a full mailbox
            self._refuse(request, BranchClosed(request.to, "the process is stopping; not queued"))
            raise
        except Exception as exc:  # no such branch, closed, a bad target
            self._refuse(request, exc)
            return
        if log.isEnabledFor(logging.DEBUG):  # the record's extra costs even when dropped
            log.debug(
                "request %s queued for %r: %s",
                request.id,
                reply.branch.name,
                type(request.command).__name__,
                extra={"request_id": request.id, "branch": reply.branch.name},
            )
        self.in_flight += 1
        work.start_soon(self._answer, request, reply)

    async def _send(self, request: Request) -> Reply:
        """Send to a branch of the tree, else (with ``--cluster``) to a placed one,
        the command held to the trust rules of `pride.messages.requests`."""
        try:
            target = self.session.resolve_name(request.to)
        except UnknownBranch:
            if self.cluster is None:
                raise
            command = for_remote(request.command)
            return await send(self.cluster.ref(request.to), command, tag=request.id)
        # A virtual branch is activated first: its budget is the one a request may not lift.
        branch = target if isinstance(target, Branch) else await self.session.activate(target.name)
        command = for_branch(request.command, branch.budget)  # a request never lifts a limit
        return await self.session.send(target, command, tag=request.id)

    async def _answer(self, request: Request, reply: Reply) -> None:
        try:
            result = await reply.result()
        except Exception as exc:  # a failed turn is an answer, not a crash
            self._refuse(request, exc)
            return
        except BaseException:
            if not reply.done:
                reply.cancel("caller")
            raise
        finally:
            self.in_flight -= 1
        self._write(ok_line(request.id, result))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s answered", request.id, extra={"request_id": request.id})

    def resumed(self, reply: Reply) -> None:
        """A turn the store's journal held was resumed: answer it on the id of the
        request that started it (its tag)."""
        self.in_flight += 1
        if self._work is not None:
            self._work.start_soon(self._answer_resumed, reply)
        else:  # the app is still starting: answered once serving begins
            self._resumed.append(reply)

    async def _answer_resumed(self, reply: Reply) -> None:
        log.info("answering resumed turn on request %s", reply.tag, extra={"request_id": reply.tag})
        try:
            result = await reply.result()
        except Exception as exc:
            self._write(error_line(reply.tag, exc), placed=False)
            return
        finally:
            self.in_flight -= 1
        self._write(ok_line(reply.tag, result), placed=False)

    def _refuse(self, request: Request, error: Exception) -> None:
        log.info(
            "request %s failed: %s: %s",
            request.id,
            type(error).__name__,
            error,
            extra={"request_id": request.id},
        )
        self._write(error_line(request.id, error))

    def _write(self, line: str, *, placed: bool = True) -> None:
        """Queue an answer line; ``placed``: it answers a line read here (see `Answers`)."""
        self.answers.write(line, placed=placed)

    # ------------------------------------------------------------ stopping

    async def _watch_signals(self, signals: Any) -> None:
        grace = self.options.grace
        draining = f"stopping; running turns have {grace}s to finish, queued requests are refused"
        await answer_signals(signals, self, grace=grace, draining=draining)

    def force_stop(self) -> None:
        """Stop now (a second signal): running turns are cancelled."""
        if self.status is not None:
            self.status.state = "forcing"
        self.forced = True
        self.answers.hurry(FORCED_FLUSH)  # already waiting for stdout: bound the wait now
        assert self._outer is not None
        self._outer.start_soon(self._stop, 0.0)

    def begin_stop(self, grace: float) -> None:
        """Stop gracefully (a first signal, or a failed root), once.

        After the end of the work (`_end`) too: the stop that began there is
        no signal, so this first one drains as before it (running turns get
        at most ``grace`` more, the last answers what is left of it, the exit
        status stays) and only a second one forces.
        """
        if self.stopping:
            return
        self.stopping = True
        self._stop_began = trio.current_time()
        self._reading.cancel()
        if self.status is not None:
            self.status.state = "stopping"
        assert self._outer is not None
        self._outer.start_soon(self._stop, grace)  # a deadline earlier already stands
        if self._ended:
            # The flush of the last answers may be waiting without a bound already.
            self.answers.hurry(self._flush_bound())

    def _end(self, grace: float) -> None:
        """Stop gracefully at the end of the work (every request answered at the
        end of input), leaving `begin_stop` to a first signal."""
        self._ended = True
        if self.status is not None:
            self.status.state = "stopping"
        assert self._outer is not None
        self._outer.start_soon(self._stop, grace)

    async def _stop(self, grace: float) -> None:
        await self.session.stop(grace)
        self._stopped.set()

    def _log_turn(self, event: RunEnd | RunFailed, extra: dict[str, Any]) -> None:
        """One record per finished turn: its usage, the tree's so far, what still runs."""
        usage, total = event.usage, self.session.usage
        fields = {
            **extra,
            "turn_id": event.turn_id,
            "usage": _plain(usage),
            "session_usage": _plain(total),
            # The finished turn has left the list already (on_signal).
            "in_flight": self.turns.names(),
        }
        took = f"{event.duration_ms / 1000:.2f} s"
        if isinstance(event, RunEnd):
            log.info("turn ended in %s: %s", took, describe_usage(usage), extra=fields)
        else:
            log.info(
                "turn failed in %s: %s: %s (%s)",
                took,
                event.error_type,
                event.error_message,
                describe_usage(usage),
                extra=fields,
            )

    def on_signal(self, event: Signal) -> None:
        """Log the tree's lifecycle signals and finished turns; a failed root stops the process."""
        if isinstance(event, RunStart):  # once per turn: keep it cheap
            self.turns.observe(event)
            return
        extra = {"branch": event.branch_name, "branch_id": event.branch_id}
        if isinstance(event, RunEnd | RunFailed):
            self.turns.observe(event)
            self._log_turn(event, extra)
        elif isinstance(event, BranchStarted):  # a restart is logged by BranchRestarted
            level = logging.DEBUG if event.restart else logging.INFO
            log.log(level, "branch %s started", event.branch_name, extra=extra)
        elif isinstance(event, BranchStopped):
            self.turns.observe(event)
            level = logging.WARNING if event.reason == "crash" else logging.INFO
            log.log(level, "branch %s stopped (%s)", event.branch_name, event.reason, extra=extra)
        elif isinstance(event, BranchRestarted):
            log.warning(
                "branch %s restarted after: %s", event.branch_name, event.cause, extra=extra
            )
        elif isinstance(event, SessionFailed):
            log.error("session %s failed: %s", event.session_name, event.cause)
            if event.session_name == self.session.name and not self.stopping:
                self.exit_code = EXIT_FAILED
                if self._outer is not None:
                    self.begin_stop(0.0)
