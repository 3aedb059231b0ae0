"""The caller's side of Ray: the connection's thread, and waiting on Ray from trio.

Two facts measured on this machine shape it:

* a local cluster started by ``ray.init`` inside ``trio.to_thread`` dies about
  ten seconds later, with the worker thread that started it; so ``ray.init``
  runs on a thread of its own (`RayConnection`) that lives as long as
  the Cluster, and ``ray.shutdown`` runs there too;
* ``ray.get`` on a trio thread would block every task of the loop, and an
  ``ObjectRef`` cannot be awaited outside asyncio; so a trio caller takes
  ``ref.future()`` (a ``concurrent.futures.Future``) and lets its done-callback
  hand it to the loop through the trio token (`on_done`, `wait_ref`): no
  thread per call, one wake of the loop per burst of completions, and the
  wait is cancellable at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import outcome
import trio

__all__ = ["RayConnection", "import_ray", "on_done", "wait_ref"]

log = logging.getLogger("pride.cluster")


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            "pride.cluster needs Ray: install the extra with `pip install 'pride[ray]'`"
        ) from exc
    return ray


class RayConnection:
    """This process's connection to a Ray cluster, held by a thread of its own.

    ``start`` connects (to ``address``, or to a new local cluster when it is
    None) and returns once connected; ``stop`` disconnects. If the process is
    already connected (``ray.init`` was called by the application or a test
    session), the existing connection is used and left open.
    """

    def __init__(self, init_options: dict[str, Any]) -> None:
        self._options = init_options
        self._thread: threading.Thread | None = None
        self._connected = threading.Event()
        self._release = threading.Event()
        self._error: BaseException | None = None
        self.owned = False

    def start(self) -> None:
        """Connect (blocking: call it from ``trio.to_thread``)."""
        ray = import_ray()
        if ray.is_initialized():
            return
        self.owned = True
        self._thread = threading.Thread(target=self._hold, name="pride ray connection", daemon=True)
        self._thread.start()
        self._connected.wait()
        if self._error is not None:
            raise self._error

    def _hold(self) -> None:
        ray = import_ray()
        try:
            ray.init(**self._options)
        except BaseException as exc:
            self._error = exc
            self._connected.set()
            return
        self._connected.set()
        self._release.wait()
        try:
            ray.shutdown()
        except Exception:
            log.exception("ray.shutdown failed")

    def stop(self) -> None:
        """Disconnect if this object connected (blocking: call it from ``trio.to_thread``)."""
        if self._thread is None:
            return
        self._release.set()
        self._thread.join(timeout=60.0)
        self._thread = None


class _Completions:
    """Ray futures completed for one trio loop, handed over in bursts.

    Ray completes a future on a thread of its own; each completion would cost
    one ``run_sync_soon`` (a write to the loop's wakeup socket, a wake of the
    loop) if handed over alone. Completions that arrive while one hand-over is
    pending join it: one ``run_sync_soon`` per burst, however many calls ended.
    """

    __slots__ = ("_lock", "_pending", "_token")

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token
        self._lock = threading.Lock()
        self._pending: list[tuple[Callable[[Any], None], Any]] = []

    def add(self, callback: Callable[[Any], None], future: Any) -> None:
        """Run ``callback(future)`` in the loop soon (from any thread)."""
        with self._lock:
            first = not self._pending
            self._pending.append((callback, future))
        if first:
            # The caller's loop may be gone: then nobody is waiting.
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for callback, future in pending:
            try:
                callback(future)
            except Exception:  # one broken callback must not starve the others
                log.exception("a completion callback failed")


_COMPLETIONS: trio.lowlevel.RunVar[_Completions] = trio.lowlevel.RunVar("pride_cluster_completions")


def _completions() -> _Completions:
    try:
        return _COMPLETIONS.get()
    except LookupError:
        completions = _Completions(trio.lowlevel.current_trio_token())
        _COMPLETIONS.set(completions)
        return completions


def on_done(ref: Any, callback: Callable[[Any], None]) -> None:
    """Call ``callback(future)`` in this trio loop once ``ref`` resolves.

    Nothing here refers back to the future (its done-callback is a partial of
    plain objects), so a finished call leaves no reference cycle behind.
    """
    ref.future().add_done_callback(functools.partial(_completions().add, callback))


class _Waiter:
    """One task parked on a Ray call (see `wait_ref`)."""

    __slots__ = ("task",)

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task: trio.lowlevel.Task | None = task

    def resolved(self, future: Any) -> None:
        task, self.task = self.task, None
        if task is not None:  # else the wait was cancelled
            trio.lowlevel.reschedule(task, outcome.capture(future.result))

    def abort(self, _: Any) -> trio.lowlevel.Abort:
        self.task = None
        return trio.lowlevel.Abort.SUCCEEDED


async def wait_ref(ref: Any) -> Any:
    """The value of a Ray ``ObjectRef``, waited on without blocking trio.

    Raises whatever Ray raises for it (``RayActorError``, ``RayTaskError``...).

    Cancellation: stops waiting at once; the Ray call itself goes on.
    """
    await trio.lowlevel.checkpoint_if_cancelled()
    waiter = _Waiter(trio.lowlevel.current_task())
    on_done(ref, waiter.resolved)
    return await trio.lowlevel.wait_task_rescheduled(waiter.abort)
