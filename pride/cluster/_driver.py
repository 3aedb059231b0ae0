"""The caller's side of Ray: the connection's thread, and waiting on Ray from trio.

Two facts measured on this machine shape it:

* a local cluster started by ``ray.init`` inside ``trio.to_thread`` dies about
  ten seconds later, with the worker thread that started it; so ``ray.init``
  runs on a thread of its own (`RayConnection`) that lives as long as
  the Cluster, and ``ray.shutdown`` runs there too;
* ``ray.get`` on a trio thread would block every task of the loop, and an
  ``ObjectRef`` cannot be awaited outside asyncio; so a trio caller takes
  ``ref.future()`` (a ``concurrent.futures.Future``) and lets its done-callback
  set a trio event through the trio token (`wait_ref`): no thread per
  call, and the wait is cancellable at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

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


def on_done(ref: Any, callback: Callable[[Any], None]) -> None:
    """Call ``callback(future)`` in this trio loop once ``ref`` resolves."""
    token = trio.lowlevel.current_trio_token()
    future = ref.future()

    def done(_: Any) -> None:
        # The caller's loop may be gone: then nobody is waiting.
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(callback, future)

    future.add_done_callback(done)


async def wait_ref(ref: Any) -> Any:
    """The value of a Ray ``ObjectRef``, waited on without blocking trio.

    Raises whatever Ray raises for it (``RayActorError``, ``RayTaskError``...).

    Cancellation: stops waiting at once; the Ray call itself goes on.
    """
    event = trio.Event()
    box: list[Any] = []

    def resolved(future: Any) -> None:
        box.append(future)
        event.set()

    on_done(ref, resolved)
    await event.wait()
    return box[0].result()
