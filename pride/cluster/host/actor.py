"""The Ray glue of a host: an async Ray actor whose trio runtime runs in its own thread.

Ray runs the actor's ``async def`` methods on its asyncio loop; they only
parse, journal and hand over. The trio side (`HostRuntime`) owns every
branch. The two threads meet in three places:

* asyncio → trio: ``TrioToken.run_sync_soon`` (a batch, a placement, a stop);
* trio → asyncio: per-connection outboxes under a lock, and a
  ``loop.call_soon_threadsafe`` wake of the connection's waiting ``poll``;
* the envelope journal is touched only on the asyncio side.

A caller learns of the process's death through its **beacon**: a Ray object
this process owns that never resolves (see `HostActor.beacon`).

The trio loop ending for any reason other than a requested shutdown ends the
process (``os._exit``): a host whose loop died while Ray still thinks the
actor healthy would be a zombie, failing nothing and serving nothing. Ray
then restarts it (``max_restarts``) and every caller's pending call fails
with ``HostLost``. Methods are never retried by Ray (``max_task_retries=0``
is set where the actor is created): a delivery runs once or not at all.

This module is the only place in pride, with `pride.cluster.caller.driver`,
where asyncio appears (besides pride/aio/).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import trio

from ...errors import HostLost, InvalidMessage, RemoteError
from ..wire.encoding import MAX_MESSAGE_BYTES, dumps, encode_error, loads
from ..wire.storage import host_directory
from .journal import EnvelopeJournal
from .returns import FRAME_BYTES, cut
from .runtime import HostRuntime, OpenCluster

__all__ = ["HostActor"]

log = logging.getLogger("pride.cluster")

START_TIMEOUT = 120.0
"""Seconds a host may take to restore its branches before its creation fails."""
POLL_TIMEOUT = 15.0
"""Seconds a poll waits for something to return before it returns nothing."""
MAX_BATCH_ITEMS = 10_000
"""The most items one delivery may hold (a caller sends at most 512)."""
DELIVERY_LINGER = 0.005
"""Seconds a delivery waits for answers to carry back before it returns without."""
RETURN_AT = 128
"""Answers owed to a connection that end a delivery's linger even when they came lazily."""
STALE_AFTER = 8 * POLL_TIMEOUT
"""Seconds a connection owed answers may go without a call (no poll, no delivery) before
the host takes it for gone: a live caller always has a poll waiting, or polls again as
soon as one returns (at most `POLL_TIMEOUT` apart)."""
MAX_DROPPED = 10_000
"""Dropped connections remembered, so their next call is told (the oldest go first)."""


class HostActor:
    """One host process (created by `Cluster`; see the module docstring).

    Args:
        name: the host's name.
        storage: the storage root; the host keeps its store, journal and
            placements in ``<storage>/<namespace>/<name>/``, a private
            directory (`pride.cluster.wire.storage`).
        options: ``{"namespace": ..., "session": {...Session keyword arguments}}``.
        open_cluster: how the host opens its own Cluster for its branches'
            tools (``host_cluster``; the caller's side hands it over), or None.

    Raises:
        StoreError: the host's directory is not private to this user.
    """

    delivery_linger: float = DELIVERY_LINGER
    """Seconds a delivery lingers for answers (a class attribute: a test's subclass
    makes deliveries wait for their answers, with no timer to race)."""
    max_message_bytes: int = MAX_MESSAGE_BYTES
    """The largest batch this host takes, and the most it returns in one call (a class
    attribute: a test's subclass proves the bound with small sizes)."""
    stale_after: float = STALE_AFTER
    """Seconds a connection owed answers may be silent before it is dropped (a class
    attribute: a test's subclass drops a silent one within a second)."""

    def __init__(
        self,
        name: str,
        storage: str,
        options: dict[str, Any] | None = None,
        open_cluster: OpenCluster | None = None,
    ) -> None:
        logging.basicConfig(level=logging.WARNING)
        options = options or {}
        self._name = name
        self._directory = host_directory(Path(storage), options.get("namespace", "pride"), name)
        self._journal = EnvelopeJournal(self._directory / "journal.db")
        self._lock = threading.Lock()
        # What each connection is owed, in order; numbered as a batch when it is taken
        # (one batch per return, cut to `max_message_bytes`), so a cut never leaves a
        # gap in the numbering. Numbers are taken on the asyncio side only.
        self._outboxes: dict[str, list[dict[str, Any]]] = {}
        self._out_seq: dict[str, int] = {}
        self._pollers: dict[str, asyncio.Future[None]] = {}
        self._deliverers: dict[str, list[asyncio.Future[None]]] = {}
        # When each connection last called (a delivery or a poll, begun or ended), and
        # the connections dropped for their silence (`post`), oldest first.
        self._heard: dict[str, float] = {}
        self._dropped: dict[str, None] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._serving = False
        self._loop_ended = False
        self._graceful = False
        self._failure: BaseException | None = None
        self._ready = threading.Event()
        self._beacon: Any = None
        self._runtime = HostRuntime(
            name,
            self._directory,
            self,
            options.get("session"),
            cluster_options=options,
            open_cluster=open_cluster,
        )
        self._thread = threading.Thread(
            target=self._run_trio, name=f"pride host {name}", daemon=True
        )
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError(f"host {name!r} did not start within {START_TIMEOUT}s")
        if self._failure is not None:
            raise RuntimeError(
                f"host {name!r} failed to start: {self._failure!r}"
            ) from self._failure

    # ------------------------------------------------------------ the trio thread

    def _run_trio(self) -> None:
        try:
            trio.run(self._runtime.main, self._on_ready, self._note_turns)
        except BaseException as exc:
            self._failure = exc
            log.error("host %r: its trio loop failed: %r", self._name, exc, exc_info=exc)
        finally:
            self._loop_ended = True
            self._ready.set()
            if self._serving and not self._graceful:
                log.critical("host %r: its trio loop ended; ending the process", self._name)
                os._exit(70)

    def _on_ready(self, runtime: HostRuntime) -> None:
        self._serving = True
        self._ready.set()

    def _note_turns(self, pairs: list[tuple[str, str]]) -> None:
        loop = self._loop
        if loop is not None:
            # Deferred one more loop round: the answers posted in the same round
            # (a waiting delivery's wake) go back to their callers before this
            # journal write, which nobody waits on.
            loop.call_soon_threadsafe(loop.call_soon, self._journal.note_turns, pairs)

    def post(self, conn: str, items: list[dict[str, Any]], *, lazy: bool = False) -> None:
        """Queue items for ``conn`` (called from the trio thread).

        They go back with the next delivery of that connection still waiting for
        answers, else with its poll, as the connection's next numbered batch; the
        caller applies batches in number order whichever call brought them. A
        ``lazy`` batch (turn starts, which nobody waits on, or outcomes of a branch
        with more work waiting) wakes no lingering delivery until `RETURN_AT`
        answers are owed: under load, a delivery then carries back a large batch of
        answers (and its callers' next sends leave together, in few calls) instead
        of a round's crumbs, while a lone ask is still answered at once.
        """
        with self._lock:
            if conn in self._dropped:
                return  # see below: nobody takes what it is owed
            waiters = self._deliverers.get(conn)
            if not waiters and conn not in self._pollers and self._silent(conn):
                # Its caller is gone (its process died without `forget`): what it is
                # owed, every signal of every branch if it watched, would pile up here
                # for good. Dropped, its calls cancelled, its next call told so.
                self._drop(conn)
                return
            owed = self._outboxes.get(conn)
            if owed is None:
                owed = self._outboxes[conn] = items
            else:
                owed += items
            if not waiters:
                waiting = self._pollers.get(conn)
            elif lazy and len(owed) < RETURN_AT:
                waiting = None
            else:
                waiting = waiters.pop(0)
        if waiting is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(_wake, waiting)

    def _silent(self, conn: str) -> bool:
        heard = self._heard.get(conn)
        return heard is not None and time.monotonic() - heard > self.stale_after

    def _drop(self, conn: str) -> None:
        """Drop ``conn`` for its silence (holding the lock; from the trio thread)."""
        owed = self._outboxes.pop(conn, None)
        self._out_seq.pop(conn, None)
        self._heard.pop(conn, None)
        self._dropped[conn] = None
        if len(self._dropped) > MAX_DROPPED:
            del self._dropped[next(iter(self._dropped))]
        log.warning(
            "host %r: connection %s made no call for %.0fs; dropped with %d answers owed",
            self._name,
            conn,
            self.stale_after,
            len(owed or ()),
        )
        # Its calls are cancelled as a caller's `forget` cancels them; not from within
        # the hand-over of answers that is calling `post` now.
        token = self._runtime.token
        if token is not None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._runtime.forget, conn)

    def _hear(self, conn: str) -> bytes | None:
        """Note a call of ``conn``; for one dropped (`_drop`), the error to answer it with."""
        with self._lock:
            if conn not in self._dropped:
                self._heard[conn] = time.monotonic()
                return None
        lost = HostLost("*", self._name, f"this connection was silent for {self.stale_after:.0f}s")
        return dumps({"error": encode_error(lost)})

    def _owed(self, conn: str, *, delivery: bool) -> bytes | None:
        """Take what ``conn`` is owed as its next numbered batch: the JSON a delivery
        (``{"out": [batch]}``) or a poll (``[batch]``) returns, None if nothing is owed.

        At most `max_message_bytes` leave in one return: past it the rest stay owed,
        for the next call (and an item too large to go at all is refused in its
        place, see `pride.cluster.host.returns.cut`). Run on the asyncio side, between
        two awaits: nothing else numbers this connection's batches meanwhile.
        """
        with self._lock:
            items = self._outboxes.pop(conn, None)
        if not items:
            return None
        seq = self._out_seq.get(conn, 0)
        self._out_seq[conn] = seq + 1
        batch = {"s": seq, "items": items}
        try:
            data = dumps({"out": [batch]} if delivery else [batch])
        except (ValueError, TypeError):
            data = None  # an item JSON cannot carry: see `pride.cluster.host.returns.cut`
        if data is not None and len(data) <= self.max_message_bytes:
            return data  # the common case: everything, one encoding
        texts, rest = cut(self._name, items, self.max_message_bytes - FRAME_BYTES)
        if rest:
            with self._lock:
                self._outboxes[conn] = rest + self._outboxes.get(conn, [])
                poller = self._pollers.get(conn)
            if poller is not None:
                _wake(poller)  # it takes the rest now, not at its timeout
        joined = b"".join((b'{"s":%d,"items":[' % seq, b",".join(texts), b"]}"))
        return b'{"out":[' + joined + b"]}" if delivery else b"[" + joined + b"]"

    def _token(self) -> trio.lowlevel.TrioToken:
        """The trio loop's token.

        Raises:
            HostLost: the loop has ended (the process is about to end, or was
                shut down): a caller must treat this host as lost, not as
                refusing its batch.
        """
        token = self._runtime.token
        if token is None or not self._serving or self._loop_ended:
            raise HostLost("*", self._name, "its trio loop has ended")
        return token

    async def _on_trio(self, function: Any, *args: Any) -> Any:
        """Run a sync function in the trio thread and await its result here."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def run() -> None:
            try:
                result = function(*args)
            except BaseException as exc:
                loop.call_soon_threadsafe(_fail, done, exc)
            else:
                loop.call_soon_threadsafe(_succeed, done, result)

        self._token().run_sync_soon(run)
        return await done

    async def _on_trio_async(self, function: Any, *args: Any) -> Any:
        """Run an async function as a task of the host's nursery; await its result here."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        async def run() -> None:
            try:
                result = await function(*args)
            except trio.Cancelled as exc:
                loop.call_soon_threadsafe(_fail, done, exc)
                raise
            except BaseException as exc:
                # SystemExit, KeyboardInterrupt... from a factory: in a Ray method they
                # would end the actor, so the caller gets them as an error instead.
                if not isinstance(exc, Exception):
                    exc = RemoteError(type(exc).__name__, f"{exc!r} in the host's trio loop")
                loop.call_soon_threadsafe(_fail, done, exc)
            else:
                loop.call_soon_threadsafe(_succeed, done, result)

        self._token().run_sync_soon(self._runtime.start_soon, run)
        return await done

    # ------------------------------------------------------------ methods

    async def hello(self) -> bytes:
        """Who this host is and what it serves (also: "ready", for a caller reconnecting)."""
        self._loop = asyncio.get_running_loop()
        try:
            branches = await self._on_trio(self._runtime.branches)
        except (HostLost, trio.RunFinishedError) as exc:
            return dumps({"error": encode_error(_lost(self._name, exc))})
        return dumps(
            {
                "host": self._name,
                "pid": os.getpid(),
                "branches": branches,
                "restored": list(self._runtime.restored),
            }
        )

    async def beacon(self) -> list[Any]:
        """A Ray object owned by this process that never resolves, in a list.

        A caller waits on it: when this process dies, Ray fails the wait
        with ``OwnerDiedError`` within milliseconds (measured: ~20 ms), where a
        pending call on a restarting actor fails only once the restart is done
        (1-2 s). One beacon serves every caller of this process.
        """
        if self._beacon is None:
            import ray  # a host runs inside Ray: the extra is there

            self._beacon = ray.get_runtime_context().current_actor.never.remote()
        return [self._beacon]

    async def never(self) -> None:
        """Wait forever (the beacon's pending call)."""
        await asyncio.Event().wait()

    async def place(self, spec: bytes) -> bytes:
        """Build and spawn a branch from its placement spec; its description, or an error."""
        self._loop = asyncio.get_running_loop()
        try:
            data = loads(spec, "placement")
            described = await self._on_trio_async(self._runtime.place, data)
        except Exception as exc:
            return dumps({"error": encode_error(exc)})
        return dumps({"branch": described})

    async def deliver(self, payload: bytes) -> bytes | None:
        """Take one batch from a caller: journal its envelopes, hand it to trio.

        Returns ``{"out": [numbered answer batches]}`` when answers for this
        connection are ready within `DELIVERY_LINGER`, None when none are,
        or ``{"error": ...}`` (an `InvalidMessage`) when the batch is malformed
        (then nothing of it was taken). Errors are answers, not exceptions: a
        caller must be able to read them without unpickling.
        """
        self._loop = loop = asyncio.get_running_loop()
        try:
            token, conn, seq, items, seen = self._take_batch(payload)
        except InvalidMessage as exc:
            return dumps({"error": encode_error(exc)})
        except (HostLost, trio.RunFinishedError) as exc:
            return dumps({"error": encode_error(_lost(self._name, exc))})
        except _Dropped as dropped:
            return dropped.answer
        # Linger briefly for the answers: a short turn's outcome then rides back on
        # this call instead of costing the poll a round trip of its own. The waiter
        # is in place before trio gets the batch, so this thread has nothing left
        # to do (to hold the GIL for) while trio serves it.
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            owed = bool(self._outboxes.get(conn))
            if not owed:
                self._deliverers.setdefault(conn, []).append(waiter)
        try:
            token.run_sync_soon(self._runtime.on_batch, conn, seq, items, seen)
        except trio.RunFinishedError as exc:
            self._stop_waiting(conn, waiter)
            return dumps({"error": encode_error(_lost(self._name, exc))})
        if not owed:
            linger = loop.call_later(self.delivery_linger, _wake, waiter)
            try:
                await waiter
            except BaseException:
                # Cancelled by Ray (its caller gave up): leave no waiter behind for
                # `post` to pick, and hand on a wake it may have spent on this one.
                self._stop_waiting(conn, waiter, hand_on=True)
                raise
            finally:
                linger.cancel()
            self._stop_waiting(conn, waiter)
        return self._owed(conn, delivery=True)

    def _stop_waiting(
        self,
        conn: str,
        waiter: asyncio.Future[None],
        *,
        hand_on: bool = False,
    ) -> None:
        """Take a delivery's ``waiter`` off ``conn``'s list (the list too, once empty).

        With ``hand_on``, answers owed to ``conn`` wake its next waiting delivery, else
        its poll: `post` may have woken only this one, which will not carry them.
        """
        with self._lock:
            waiters = self._deliverers.get(conn)
            if waiters is not None:
                if waiter in waiters:
                    waiters.remove(waiter)
                if not waiters:
                    del self._deliverers[conn]
            following = None
            if hand_on and self._outboxes.get(conn):
                following = waiters[0] if waiters else self._pollers.get(conn)
        if following is not None:
            _wake(following)

    def _take_batch(
        self, payload: bytes
    ) -> tuple[trio.lowlevel.TrioToken, str, int, list[dict[str, Any]], set[str]]:
        """Parse and journal one batch: what to hand to trio, and the token to do it with.

        Raises:
            InvalidMessage: the batch is malformed (nothing of it was recorded).
            HostLost: the trio loop has ended (nothing was recorded).
        """
        batch = loads(payload, "batch", limit=self.max_message_bytes)
        if not isinstance(batch, dict):
            raise InvalidMessage([("batch", "expected an object")])
        conn, seq, items = batch.get("conn"), batch.get("seq"), batch.get("items")
        if not isinstance(conn, str) or isinstance(seq, bool) or not isinstance(seq, int):
            raise InvalidMessage([("batch", "needs a connection id and a sequence number")])
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise InvalidMessage([("batch.items", "expected a list of objects")])
        if len(items) > MAX_BATCH_ITEMS:
            raise InvalidMessage(
                [("batch.items", f"{len(items)} items is over the {MAX_BATCH_ITEMS}-item limit")]
            )
        dropped = self._hear(conn)
        if dropped is not None:  # before the journal: nothing of it is taken
            raise _Dropped(dropped)
        envelopes = [
            (item["id"], str(item.get("b", "")))
            for item in items
            if item.get("k") == "send" and isinstance(item.get("id"), str)
        ]
        token = self._token()  # before the journal: a lost host records nothing
        seen = self._journal.record(envelopes)
        return token, conn, seq, items, seen

    async def poll(self, conn: str, timeout: float = POLL_TIMEOUT) -> bytes:
        """What the host owes ``conn`` (waiting up to ``timeout`` for something), or
        ``{"error": HostLost}`` for a connection dropped for its silence."""
        self._loop = loop = asyncio.get_running_loop()
        dropped = self._hear(conn)
        if dropped is not None:
            return dropped
        previous = None
        with self._lock:
            owed = bool(self._outboxes.get(conn))
            if not owed:
                previous = self._pollers.get(conn)
                waiter: asyncio.Future[None] = loop.create_future()
                self._pollers[conn] = waiter
        if owed:
            return self._owed(conn, delivery=False) or b"[]"
        if previous is not None:
            _wake(previous)  # a newer poll of the same connection takes over
        expiry = loop.call_later(timeout, _wake, waiter)
        try:
            await waiter
        finally:
            expiry.cancel()
        with self._lock:
            if self._pollers.get(conn) is waiter:
                del self._pollers[conn]
        self._hear(conn)  # it waited on the host until now: it was not silent
        return self._owed(conn, delivery=False) or b"[]"

    async def forget(self, conn: str) -> None:
        """The caller closed ``conn``: cancel its calls and drop its outbox."""
        await self._on_trio(self._runtime.forget, conn)
        with self._lock:
            self._outboxes.pop(conn, None)
            self._out_seq.pop(conn, None)
            self._heard.pop(conn, None)
            self._deliverers.pop(conn, None)
            waiter = self._pollers.pop(conn, None)
        if waiter is not None:
            _wake(waiter)

    async def shutdown(self) -> None:
        """Stop the host's session (turns finish within its grace) and end its trio loop."""
        self._graceful = True
        try:
            self._token().run_sync_soon(self._runtime.stop)
        except (RuntimeError, trio.RunFinishedError):
            return
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 60.0)
        self._journal.close()


class _Dropped(Exception):
    """A batch of a connection dropped for its silence: ``answer`` says so."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer


def _lost(name: str, exc: BaseException) -> HostLost:
    return exc if isinstance(exc, HostLost) else HostLost("*", name, "its trio loop has ended")


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _succeed(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future[Any], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
