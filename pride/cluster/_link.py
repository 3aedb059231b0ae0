"""A caller's connection to one host: batches out, one long poll back, loss detection.

Per host, a caller process keeps one `Link` with a connection id and:

* an outgoing list of items (envelopes, cancels, stream credits), sent by a
  flusher task as numbered batches: the first item goes at once, and while
  ``MAX_IN_FLIGHT`` deliveries are under way further items wait and leave
  together, so a busy caller sends few large calls instead of many small ones;
* one ``poll`` call always waiting on the host, which answers with everything
  the host owes the connection (acks, turn starts, outcomes, stream items,
  signals) as soon as there is something;
* loss detection: the host's beacon (an object its process owns) failing,
  or a delivery or poll failing, means the process died: Ray reports the
  beacon within milliseconds, and every call in flight fails with
  `HostLost` at once; then the link reconnects under a new
  connection id (fresh numbering) when Ray has restarted the host, and new
  sends wait for that, up to the cluster's ``reconnect_timeout``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from typing import TYPE_CHECKING, Any

import trio

from ..actors.mailbox import ReplyConsumedError
from ..errors import HostLost, InvalidMessage, MailboxFull, TurnCancelled
from ..messages import Command, Signal, WorkCommand, structure, unstructure
from ..messages._ids import new_id
from ._driver import import_ray, on_done, wait_ref
from ._wire import decode_error, decode_value, dumps, loads

if TYPE_CHECKING:
    from .cluster import RemoteBranchRef

__all__ = ["MAX_BATCH", "MAX_IN_FLIGHT", "Link", "RemoteReply", "RemoteStreamItems", "check_work"]

log = logging.getLogger("pride.cluster")

MAX_IN_FLIGHT = 4
"""Deliveries to one host under way at once; past it, items wait and batch up."""
MAX_BATCH = 512
"""Items in one delivery."""


class RemoteReply:
    """The handle on a command sent to a remote branch: what `Reply` offers.

    ``turn_id`` is None until the host reports the turn started (and stays
    None for commands that are not model turns). ``await reply.result()``
    returns the result or raises the command's error, once. ``cancel()``
    reaches the remote turn: queued, it is dropped (no RunStart); running,
    it is cancelled and finalised (terminal RunFailed); the outcome
    (``TurnCancelled``) arrives from the host.
    """

    def __init__(self, ref: RemoteBranchRef, command: WorkCommand, link: Link) -> None:
        self.ref = ref
        self.command = command
        self.id = new_id().hex
        self.state = "queued"
        self.turn_id: Any = None
        self._link = link
        self._acked = trio.Event()
        self._finished = trio.Event()
        self._refusal: BaseException | None = None
        self._result: Any = None
        self._error: BaseException | None = None
        self._consumed = False
        self._cancel_reason: str | None = None
        self._items: tuple[trio.MemorySendChannel[Any], trio.MemoryReceiveChannel[Any]] | None = (
            None
        )

    def __repr__(self) -> str:
        return (
            f"<RemoteReply {type(self.command).__name__} to {self.ref.name!r} "
            f"{self.state} turn_id={self.turn_id}>"
        )

    @property
    def done(self) -> bool:
        """True once the command has an outcome."""
        return self._finished.is_set()

    @property
    def cancel_reason(self) -> str | None:
        """Why the command was cancelled, if it was."""
        return self._cancel_reason

    async def result(self) -> Any:
        """Wait for the outcome; return the result or raise the command's error.

        Raises:
            HostLost: the host died or became unreachable before the outcome.
            TurnCancelled: the command was cancelled.
            RuntimeError: the outcome was already delivered.
            Exception: whatever the command raised on the host.

        Cancelling the wait does not cancel the command; use `cancel`.
        """
        if self._consumed:
            raise ReplyConsumedError(f"{self!r}: result() already delivered its outcome")
        await self._finished.wait()
        self._consumed = True
        if self._error is not None:
            raise self._error
        return self._result

    async def wait_done(self) -> None:
        """Wait until the command has an outcome, without taking it."""
        await self._finished.wait()

    def cancel(self, reason: str = "caller") -> None:
        """Give up on the command (idempotent, never blocks); see the class docstring."""
        if self.done or self._cancel_reason is not None:
            return
        self._cancel_reason = reason
        self._link.push({"k": "cancel", "id": self.id})

    # ------------------------------------------------------------ link side

    def _ack(self) -> None:
        self._acked.set()

    def _start(self, turn_id: Any) -> None:
        self.state = "running"
        self.turn_id = turn_id
        self._acked.set()

    def _finish(self, value: Any = None, error: BaseException | None = None) -> None:
        if self.done:
            return
        self._result, self._error = value, error
        if isinstance(error, TurnCancelled) and self.state == "queued":
            self.state = "dropped"
        else:
            self.state = "done"
        self._acked.set()
        self._finished.set()
        if self._items is not None:
            self._items[0].close()

    def _refuse(self, error: BaseException) -> None:
        self._refusal = error
        self._finish(error=error)

    def _item(self, value: Any) -> None:
        if self._items is not None and not self.done:
            # A consumer that left is no error: the host hears close or cancel.
            with contextlib.suppress(trio.BrokenResourceError):
                self._items[0].send_nowait(value)


class RemoteStreamItems:
    """What ``stream`` on a remote branch yields: its items, in order, with backpressure.

    The host runs at most ``window`` items ahead of consumption: each item
    consumed here returns a credit (sent in batches of half the window).
    After the last item, a failed turn raises its exception from the loop.
    """

    def __init__(self, reply: RemoteReply, window: int) -> None:
        assert reply._items is not None
        self.reply = reply
        self._receive = reply._items[1]
        self._window = window
        self._owed = 0
        self._exhausted = False

    def __aiter__(self) -> RemoteStreamItems:
        return self

    async def __anext__(self) -> Any:
        if self._exhausted:
            raise StopAsyncIteration
        try:
            value = await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
        else:
            self._owed += 1
            if self._owed >= max(1, self._window // 2):
                self.reply._link.push({"k": "credit", "id": self.reply.id, "n": self._owed})
                self._owed = 0
            return value
        self._exhausted = True
        await self.reply.result()
        raise StopAsyncIteration


class Link:
    """One caller's connection to one host (see the module docstring).

    Run `run` in a nursery; it serves until cancelled or the host is
    gone for good.
    """

    def __init__(
        self,
        host: str,
        handle: Any,
        *,
        reconnect_timeout: float,
        on_signal: Any,
    ) -> None:
        self.host = host
        self.handle = handle
        self.reconnect_timeout = reconnect_timeout
        self._on_signal = on_signal
        self.state = "connecting"  # "up", "lost" (reconnecting), "dead"
        self.conn = ""
        self._seq = 0
        self._outgoing: list[dict[str, Any]] = []
        self._in_flight = 0
        self._calls: dict[str, RemoteReply] = {}
        self._room: dict[str, int] = {}
        self._unacked: dict[str, int] = {}
        self._kick = trio.Event()
        self._up = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._loss: BaseException | None = None
        self.watching = False
        self.branches: list[dict[str, Any]] = []
        self.connections = 0

    # ------------------------------------------------------------ callers

    async def wait_up(self, branch_name: str) -> None:
        """Wait until the link is up.

        Raises:
            HostLost: the host is gone for good, or not back within ``reconnect_timeout``.
        """
        if self.state == "up":
            return
        if self.state == "dead":
            raise HostLost(branch_name, self.host, "it is gone for good")
        with trio.move_on_after(self.reconnect_timeout):
            await self._up.wait()
        if self.state != "up":
            raise HostLost(branch_name, self.host, f"not back within {self.reconnect_timeout}s")

    def check_up(self, branch_name: str) -> None:
        if self.state != "up":
            raise HostLost(branch_name, self.host, f"it is {self.state}")

    def submit(self, reply: RemoteReply, mode: str, window: int = 0) -> None:
        """Queue ``reply``'s envelope for the next delivery (never blocks)."""
        branch = reply.ref.name
        item: dict[str, Any] = {
            "k": "send",
            "id": reply.id,
            "b": branch,
            "mode": mode,
            "cmd": unstructure(reply.command),
        }
        if mode == "stream":
            item["window"] = window
            reply._items = trio.open_memory_channel[Any](math.inf)
        self._calls[reply.id] = reply
        self._unacked[branch] = self._unacked.get(branch, 0) + 1
        self.push(item)

    def check_room(self, branch: str, capacity: int | None) -> None:
        """Raise MailboxFull if this caller knows ``branch``'s mailbox is full."""
        room = self._room.get(branch)
        if room is not None and self._unacked.get(branch, 0) >= room:
            raise MailboxFull(branch, capacity if capacity is not None else room)

    def push(self, item: dict[str, Any]) -> None:
        if self.state != "up":
            return  # nothing reaches a lost host; its calls were failed already
        self._outgoing.append(item)
        self._kick.set()

    def watch(self) -> None:
        """Ask the host for the signals of its branches (now and after reconnecting)."""
        self.watching = True
        self.push({"k": "watch", "on": True})

    # ------------------------------------------------------------ running

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                await self._connect()
            except HostLost as exc:
                self.state = "dead"
                self._up.set()  # wake waiters: they see "dead"
                log.error("host %r is gone: %s", self.host, exc)
                if not started:
                    task_status.started()
                return
            if not started:
                started = True
                task_status.started()
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._flush_loop)
                    nursery.start_soon(self._poll_loop)
                    nursery.start_soon(self._watch_beacon)
            self._scope = None
            self._fail_all(self._loss)
            if self.state == "dead":
                return

    async def _connect(self) -> None:
        ray = import_ray()
        deadline = trio.current_time() + self.reconnect_timeout
        delay = 0.05
        while True:
            try:
                info = loads(await wait_ref(self.handle.hello.remote()), "hello")
                break
            except ray.exceptions.ActorDiedError as exc:
                last: BaseException = exc
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                last = exc
            if trio.current_time() > deadline:
                raise HostLost(
                    "*", self.host, f"no answer within {self.reconnect_timeout}s: {last}"
                )
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)
        self.branches = info.get("branches", []) if isinstance(info, dict) else []
        self.conn = new_id().hex
        self._seq = 0
        self._outgoing = [{"k": "watch", "on": True}] if self.watching else []
        self._in_flight = 0
        self._room.clear()
        self._unacked.clear()
        self._loss = None
        self.connections += 1
        self.state = "up"
        self._up.set()
        self._kick.set()

    async def _watch_beacon(self) -> None:
        """Declare the host lost as soon as its process dies (its beacon's owner died)."""
        try:
            [beacon] = await wait_ref(self.handle.beacon.remote())
            await wait_ref(beacon)
        except Exception as exc:
            self._lose(exc)

    def _lose(self, error: BaseException) -> None:
        """The host is lost: fail everything in flight now, then reconnect."""
        if self.state != "up":
            return
        log.warning("host %r lost: %r", self.host, error)
        self.state = "lost"
        self._up = trio.Event()
        self._loss = error
        self._fail_all(error)
        if self._scope is not None:
            self._scope.cancel()

    def _fail_all(self, error: BaseException | None) -> None:
        calls, self._calls = self._calls, {}
        self._outgoing = []
        detail = f"{type(error).__name__}" if error is not None else "disconnected"
        for reply in calls.values():
            reply._finish(error=HostLost(reply.ref.name, self.host, detail))

    async def _flush_loop(self) -> None:
        while True:
            while not self._outgoing or self._in_flight >= MAX_IN_FLIGHT:
                self._kick = trio.Event()
                await self._kick.wait()
            batch = self._outgoing[:MAX_BATCH]
            del self._outgoing[:MAX_BATCH]
            payload = dumps({"conn": self.conn, "seq": self._seq, "items": batch})
            self._seq += 1
            ref = self.handle.deliver.remote(payload)
            self._in_flight += 1
            conn = self.conn
            on_done(ref, functools.partial(self._delivered, conn, batch))
            await trio.lowlevel.checkpoint()

    def _delivered(self, conn: str, batch: list[dict[str, Any]], future: Any) -> None:
        if conn != self.conn:
            return  # a delivery of an earlier connection
        self._in_flight -= 1
        self._kick.set()
        try:
            answer = future.result()
            if answer is not None:
                raise decode_error(loads(answer, "delivery").get("error"))
        except Exception as exc:
            if _is_loss(exc):
                self._lose(exc)
                return
            # The host refused the batch as malformed: a bug on this side; say so to its callers.
            log.error("host %r refused a batch: %r", self.host, exc)
            for item in batch:
                reply = (
                    self._calls.pop(item.get("id", ""), None) if item.get("k") == "send" else None
                )
                if reply is not None:
                    reply._refuse(InvalidMessage([("batch", f"refused by the host: {exc}")]))

    async def _poll_loop(self) -> None:
        while True:
            try:
                payload = await wait_ref(self.handle.poll.remote(self.conn))
            except Exception as exc:
                if _is_loss(exc):
                    self._lose(exc)
                    return
                raise
            try:
                items = loads(payload, "poll")
                if not isinstance(items, list):
                    raise InvalidMessage([("poll", "expected a list")])
            except InvalidMessage as exc:
                log.error("host %r sent an unreadable answer: %s", self.host, exc)
                continue
            for item in items:
                try:
                    self._take(item)
                except (InvalidMessage, KeyError, TypeError, AttributeError) as exc:
                    log.error("host %r sent a bad item %.200r: %s", self.host, item, exc)

    def _take(self, item: dict[str, Any]) -> None:
        kind = item["k"]
        if kind == "signal":
            self._on_signal(structure(item["signal"], Signal))
            return
        reply = self._calls.get(item["id"])
        if reply is None:
            return  # answered already (lost, or refused locally)
        branch = reply.ref.name
        if "room" in item and isinstance(item["room"], int):
            self._room[branch] = item["room"]
        if kind in ("ack", "refused", "done") and not reply._acked.is_set():
            self._unacked[branch] = max(0, self._unacked.get(branch, 0) - 1)
        if kind == "ack":
            reply._ack()
        elif kind == "start":
            reply._start(item.get("turn"))
        elif kind == "item":
            reply._item(decode_value(item.get("value"), "item"))
        elif kind == "refused":
            del self._calls[reply.id]
            reply._refuse(decode_error(item.get("error")))
        elif kind == "done":
            del self._calls[reply.id]
            if item.get("turn") is not None and reply.turn_id is None:
                reply.turn_id = item["turn"]
            if "error" in item:
                reply._finish(error=decode_error(item["error"]))
            else:
                reply._finish(value=decode_value(item.get("value")))
        else:
            raise InvalidMessage([("item.k", f"unknown kind {kind!r}")])

    def close(self) -> None:
        """Stop serving (the Cluster is closing): fail whatever is still in flight."""
        if self._scope is not None:
            self._scope.cancel()
        self.state = "dead"
        self._fail_all(None)


def _is_loss(exc: BaseException) -> bool:
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError)


def check_work(command: Any) -> WorkCommand:
    """``command`` if it can be sent to a remote branch."""
    if not isinstance(command, Command):
        raise TypeError(
            f"expected a pride command (Chat, Operate, ...), got {type(command).__name__}"
        )
    if not isinstance(command, WorkCommand):
        raise TypeError(
            f"{type(command).__name__} is a supervisor's message; a remote branch takes work "
            "commands only (its host's session supervises it)"
        )
    return command
