"""``pride serve APP``: a supervisor tree behind HTTP (`pride.serve`).

The app function is found and called as for ``pride run`` (it receives the
root [`Session`][pride.Session], and the cluster with ``--cluster``); then
the tree is served over HTTP. Once the socket listens the process prints
one line on standard output, ``pride serve: serving on http://HOST:PORT``,
with the port actually bound (``--port 0`` takes a free one). With no token
configured (``PRIDE_SERVE_TOKEN``, ``--token-file``) it makes one and prints
it on standard error. Logs are ``pride run``'s structured JSON lines, on
standard error.

Shutdown, as ``pride run``'s: the first SIGINT or SIGTERM turns readyz
false, stops accepting connections and stops the session with its grace
period (running turns may finish, then are cancelled; queued requests are
answered ``BranchClosed``); every request in flight is answered and the
process exits 0. A second signal cancels the running turns at once and the
process exits ``128 + signal number``; a third exits without waiting.

With ``--console`` the live console is served at ``/`` (docs/console.md);
with a generated token, the link that signs a browser in is printed on
standard error beside it.

With ``--store``, a turn a crash interrupted is resumed when its branch is
restored, and its outcome is reported by ``GET /v1/turns/{turn_id}``.

Exit statuses: 0 after a clean drain; 1 if the root session failed; 2 if
the app, the store, the tokens or the address could not be used.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ..errors import StoreError, SupervisorFailed
from ..messages import SessionFailed, Signal
from ..supervisors import Session
from ._extras import placement, start_tracing, stop_tracing
from ._loader import AppError, app_failed, call_app, load_app
from ._logs import configure, say, write_off_the_loop
from ._signals import answer_signals, interruptible
from ._startup import cannot_start

__all__ = ["ServeCommand", "serve_command"]

log = logging.getLogger("pride.cli")

TOKEN_ENV = "PRIDE_SERVE_TOKEN"


@attrs.frozen
class ServeCommand:
    """The options of ``pride serve`` besides the server's own (`pride.serve.ServeOptions`)."""

    app: str
    serve: Any  # a pride.serve.ServeOptions
    store: Path | None = None
    grace: float = 5.0
    token_file: Path | None = None
    log_level: str = "INFO"
    otel: bool = False
    cluster: str | None = None


def serve_command(command: ServeCommand) -> int:
    """Run ``pride serve`` to its end; return the exit status (module docstring)."""
    try:
        configure(command.log_level)
    except ValueError as exc:
        return cannot_start("serve", str(exc))
    try:
        import hypercorn  # noqa: F401  (the extra)
    except ImportError:
        return cannot_start("serve", "needs hypercorn: pip install 'pride[serve]'")
    from ..serve import TokenError, Tokens

    try:
        function = load_app(command.app)
    except AppError as exc:
        return app_failed("serve", exc)
    try:
        tokens, generated = Tokens.load(os.environ.get(TOKEN_ENV), command.token_file)
    except TokenError as exc:
        return cannot_start("serve", str(exc))
    provider = None
    if command.otel:
        try:
            provider = start_tracing()
        except (ImportError, ValueError) as exc:
            return cannot_start("serve", str(exc))
    try:
        return trio.run(write_off_the_loop, _Process(command, function, tokens, generated).main)
    except KeyboardInterrupt:
        log.warning("interrupted while starting")
        return 128 + signal.SIGINT
    finally:
        if provider is not None:
            stop_tracing(provider)


class _Process:
    """The serving process: the session, the server, signals and the drain."""

    def __init__(
        self,
        command: ServeCommand,
        function: Callable[..., Any],
        tokens: Any,
        generated: str | None,
    ) -> None:
        self.command = command
        self.function = function
        self.tokens = tokens
        self.generated = generated
        self.exit_code = 0
        self.stopping = False
        self.server: Any = None
        self._outer: trio.Nursery | None = None
        self._served = trio.Event()
        self._stopped = trio.Event()

    async def main(self) -> int:
        from ..serve import ANNOUNCE, Server

        command = self.command
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            session = Session("pride-serve", store=command.store, grace=command.grace)
            try:
                async with placement(command.cluster, command.store, session) as cluster, session:
                    self.session = session
                    self.server = Server(
                        session, command.serve, self.tokens, cluster=cluster, grace=command.grace
                    )
                    session.on_resume(self.server.front.adopt)  # before the app restores
                    session.observe(SessionFailed, handler=self._on_failure)
                    interrupted = await interruptible(
                        signals, lambda: call_app(self.function, session, cluster), command="serve"
                    )
                    if interrupted is not None:
                        return 128 + interrupted
                    async with trio.open_nursery() as outer:
                        self._outer = outer
                        outer.start_soon(self._watch_signals, signals)
                        url = await outer.start(self._serve)
                        if self.generated is not None:
                            say(
                                f"pride serve: no token configured ({TOKEN_ENV} or "
                                f"--token-file); this run's token is {self.generated}"
                            )
                            if command.serve.console:  # Jupyter's link: it signs a browser in
                                say(f"pride serve: the console is at {url}/?token={self.generated}")
                        stats = session.statistics()
                        log.info(
                            "app %s started (branches: %d); serving on %s",
                            command.app,
                            stats.branches,
                            url,
                        )
                        print(f"{ANNOUNCE}{url}", flush=True)
                        await self._stopped.wait()
                        outer.cancel_scope.cancel()
            except AppError as exc:
                return app_failed("serve", exc)
            except StoreError as exc:
                return cannot_start("serve", f"cannot use the store: {exc}")
            except SupervisorFailed as exc:
                log.error("the root session failed: %s", exc)
                return 1
            except (ImportError, OSError) as exc:  # --cluster without ray; a port in use
                return cannot_start("serve", str(exc))
        log.info("stopped (exit status %d)", self.exit_code)
        return self.exit_code

    async def _serve(self, task_status: trio.TaskStatus[str]) -> None:
        try:
            await self.server.run(task_status=task_status)
        finally:
            self._served.set()

    async def _watch_signals(self, signals: Any) -> None:
        grace = self.command.grace
        await answer_signals(
            signals,
            self,
            grace=grace,
            draining=f"draining; requests in flight have {grace}s to finish",
        )

    def force_stop(self) -> None:
        """Stop now (a second signal): running turns are cancelled."""
        assert self._outer is not None
        self._outer.start_soon(self.session.stop, 0.0)

    def begin_stop(self, grace: float) -> None:
        """Stop gracefully (a first signal, or the end of the work), once."""
        if self.stopping:
            return
        self.stopping = True
        self.server.shutdown()
        assert self._outer is not None
        self._outer.start_soon(self._stop, grace)

    async def _stop(self, grace: float) -> None:
        await self.session.stop(grace)
        await self._served.wait()
        self._stopped.set()

    def _on_failure(self, event: Signal) -> None:
        assert isinstance(event, SessionFailed)
        if event.session_name == self.session.name and not self.stopping:
            log.error("session %s failed: %s", event.session_name, event.cause)
            self.exit_code = 1
            if self._outer is not None:
                self.begin_stop(0.0)
