"""A caller's connection to one host: batches out, one long poll back, loss detection.

Per host, a caller process keeps one `Link` with a connection id and:

* an outgoing list of items (envelopes, cancels, stream credits), each
  encoded to its JSON text once, when queued, and sent as numbered batches
  (a batch is its items' texts joined: one pass, no second encoding). An
  item queued while nothing is in flight leaves at once, from the task that
  queued it; while deliveries are under way further items wait for the
  flusher task and leave together (at most `MAX_IN_FLIGHT` deliveries at
  once), so a busy caller sends few large calls instead of many small ones;
* answers back on two paths: a delivery returns what the host owes the
  connection by the time its batch was taken (or shortly after), and one
  ``poll`` call waits on the host for the rest whenever no delivery is under
  way (under load, the answers ride back on the deliveries). The host numbers what
  it sends; the link applies it in that order whichever path brought it,
  checked as hostile input (`pride.cluster.caller.answers`);
* loss detection: the host's beacon (an object its process owns that never
  resolves) failing, or a delivery or poll failing, means the process died:
  Ray reports the beacon within milliseconds, and every envelope in flight
  fails with `HostLost` at once; then the link reconnects under a new
  connection id (fresh numbering) when Ray has restarted the host, and new
  sends wait for that, up to the cluster's ``reconnect_timeout``;
* supervision: each connection's `Link.lost` event is set when it ends, and
  a host reports the crashes of the branches a link supervises
  (`Link.supervise`; a local Session supervising them hears them as crashes of its children).

What it carries are `Envelope`s (`pride.cluster.caller.envelope`), each wrapping
the send API's `Reply`, which the link answers through the target protocol
(``hold``, ``start``, ``succeed``, ``fail``, its ``stream``).
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Callable
from typing import Any

import trio

from ...errors import HostLost, InvalidMessage
from ...messages import Signal, new_id
from ..wire.encoding import MAX_MESSAGE_BYTES, decode_error, dumps_text, loads
from .answers import MAX_HELD_ANSWERS, Answers, Mailboxes, described_branches
from .driver import import_ray, on_done, wait_ref
from .envelope import Envelope
from .texts import Texts
from .unsent import encodable, refuse

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "MAX_HELD_ANSWERS",
    "MAX_IN_FLIGHT",
    "Link",
]

log = logging.getLogger("pride.cluster")

MAX_IN_FLIGHT = 4
"""Deliveries to one host under way at once; past it, items wait and batch up."""
MAX_BATCH = 512
"""Items in one delivery."""
MAX_BATCH_BYTES = MAX_MESSAGE_BYTES - 256
"""Bytes of items in one delivery (the host takes `MAX_MESSAGE_BYTES` a call, with its
frame): more wait for the next; one item larger than this alone is refused."""


class Link:
    """One caller's connection to one host (see the module docstring).

    Run `run` in a nursery; it serves until cancelled or the host is
    gone for good. ``spawn`` starts a task that outlives a connection (the
    forwarders of streamed items).
    """

    def __init__(
        self,
        host: str,
        handle: Any,
        *,
        reconnect_timeout: float,
        on_signal: Callable[[Link, Signal], None],
        spawn: Callable[[Callable[[], Any]], None],
        on_crash: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.host = host
        self.handle = handle
        self.reconnect_timeout = reconnect_timeout
        self.on_signal = on_signal
        self.on_crash = on_crash
        self._spawn = spawn
        self.state = "connecting"  # "up", "lost" (reconnecting), "dead"
        self.conn = ""
        self._seq = 0
        self._outgoing: list[str] = []  # items' JSON texts, in order
        self._in_flight = 0
        self.envelopes: dict[str, Envelope] = {}  # sent and not answered yet, by id
        self.mailboxes = Mailboxes()
        self._answers = Answers(self)
        self._kick = trio.Event()
        self._deliveries_done = trio.Event()  # set when no delivery is under way
        self._up = trio.Event()
        self._lost = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._loss: BaseException | None = None
        self._death = "closed"
        self.watching = False
        self._supervised: set[str] = set()
        self.branches: list[dict[str, Any]] = []
        self.served: set[str] = set()  # branch names the host serves (its signals' names)
        self.connections = 0
        self.calls = 0  # Ray calls made to the host (deliveries and polls), for benchmarks
        self.polls = 0  # of which polls
        self._texts = Texts()
        # Envelope ids: a random prefix of this link's own and a counter. Unique
        # like random ids, and in order, so the host's journal appends them to one
        # place of its index instead of touching a page of it per envelope.
        self._id_prefix = new_id().hex[:20]
        self._id_count = itertools.count()

    # ------------------------------------------------------------ callers

    async def wait_up(self, branch_name: str) -> None:
        """Wait until the link is up: its first connection (the host process starting,
        however long that takes), or its reconnection after a loss.

        Raises:
            HostLost: the host is gone for good (or failed to start), or not back
                within ``reconnect_timeout`` after a loss.
        """
        if self.state == "up":
            return
        if self.state == "dead":
            raise HostLost(branch_name, self.host, f"it is gone for good ({self._death})")
        if self.state == "connecting":  # the first connection: the host process starting
            await self._up.wait()
        else:
            with trio.move_on_after(self.reconnect_timeout):
                await self._up.wait()
        if self.state == "dead":
            raise HostLost(branch_name, self.host, f"it is gone for good ({self._death})")
        if self.state != "up":
            raise HostLost(branch_name, self.host, f"not back within {self.reconnect_timeout}s")

    def check_up(self, branch_name: str) -> None:
        if self.state != "up":
            raise HostLost(branch_name, self.host, f"it is {self.state}")

    def has_room(self, branch: str) -> bool:
        """True when this caller believes ``branch``'s mailbox has room for one more."""
        return self.mailboxes.has_room(branch)

    def know_room(self, branch: str, room: int) -> None:
        """``branch`` is served by this host, with a mailbox of ``room`` (its capacity)."""
        self.served.add(branch)
        self.mailboxes.know(branch, room)

    def check_room(self, branch: str, capacity: int | None) -> None:
        """Raise MailboxFull if this caller knows ``branch``'s mailbox is full."""
        self.mailboxes.check(branch, capacity)

    def submit(self, envelope: Envelope, mode: str, *, ack: bool) -> None:
        """Queue ``envelope`` for delivery (never blocks; see the module docstring).

        ``mode`` is ``"wait"``, ``"nowait"`` or ``"stream"``.

        Raises:
            InvalidMessage: its command has no wire form, or is larger than one
                delivery may be (`MAX_BATCH_BYTES`); nothing was queued.
        """
        text = self._texts.send(envelope, mode, ack=ack)
        if ack:
            envelope.waiting = True
        if 4 * len(text) > MAX_BATCH_BYTES:  # it may not fit in a delivery: measure it
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_BATCH_BYTES:
                envelope.waiting = False
                problem = f"{size} bytes is over the {MAX_BATCH_BYTES}-byte limit of a send"
                raise InvalidMessage([("command", problem)])
        if mode == "stream":
            self._spawn(envelope.forward)
        self.envelopes[envelope.id] = envelope
        self.mailboxes.sent(envelope.branch)
        self._queue(text)

    def new_envelope_id(self) -> str:
        """A fresh envelope id (hex: 80 random bits, then a count of at least 48 bits)."""
        return f"{self._id_prefix}{next(self._id_count):012x}"

    def push(self, item: dict[str, Any]) -> None:
        """Queue a control item (a cancel, a stream credit, a watch...) for delivery."""
        self._queue(dumps_text(item))

    def _queue(self, text: str) -> None:
        if self.state != "up":
            return  # nothing reaches a lost host; its envelopes were failed already
        outgoing = self._outgoing
        outgoing.append(text)
        if self._in_flight == 0 and len(outgoing) == 1 and self._scope is not None:
            # Nothing under way, nothing else waiting: send it now, from this task,
            # instead of waking the flusher to do it in the next scheduling round.
            del outgoing[0]
            self._send([text])
        else:
            self._kick.set()

    def watch(self) -> None:
        """Ask the host for the signals of its branches (now and after reconnecting)."""
        self.watching = True
        self.push({"k": "watch", "on": True})

    @property
    def lost(self) -> trio.Event:
        """Set when the current connection ends (the host was lost, or the link closed).

        Each connection has its own: take it while the link is up.
        """
        return self._lost

    @property
    def loss(self) -> str:
        """What ended the last connection, for errors."""
        return type(self._loss).__name__ if self._loss is not None else self.state

    def supervise(self, branch: str) -> None:
        """Ask the host to report crashes of ``branch`` (now and after reconnecting)."""
        self._supervised.add(branch)
        self.push({"k": "supervise", "b": branch})

    # ------------------------------------------------------------ running

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        pause = 0.0
        while True:
            try:
                await self._connect()
            except HostLost as exc:
                self._death = str(exc)
                self.state = "dead"
                self._up.set()  # wake waiters: they see "dead"
                self._lost.set()
                log.error("host %r is gone: %s", self.host, exc)
                if not started:
                    task_status.started()
                return
            if not started:
                started = True
                task_status.started()
            connected = trio.current_time()
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
            # A host that answers hello and fails its connection at once (its poll
            # raising, say) would have this loop reconnect as fast as Ray answers.
            lasted = trio.current_time() - connected
            pause = 0.0 if lasted >= 1.0 else min(max(2 * pause, 0.05), 1.0)
            await trio.sleep(pause)

    async def _connect(self) -> None:
        ray = import_ray()
        deadline = trio.current_time() + self.reconnect_timeout
        delay = 0.05
        while True:
            try:
                info = loads(await wait_ref(self.handle.hello.remote()), "hello")
                if isinstance(info, dict) and "error" in info:
                    raise decode_error(info["error"])
                break
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
                if getattr(exc, "actor_init_failed", False):
                    # The host's constructor raised (its storage refused, say): no
                    # restart will do better, so say why now instead of timing out.
                    raise HostLost("*", self.host, f"it failed to start: {exc}") from exc
                last: BaseException = exc
            except HostLost as exc:  # the process lives, its loop has ended: not back yet
                last = exc
            except Exception as exc:
                # Not JSON, its call raised, or an error that is not a loss: not a
                # pride host, or a broken one; this link's task must not carry the
                # error into the Cluster's nursery.
                raise HostLost("*", self.host, f"its hello is unusable: {exc!r}") from exc
            if trio.current_time() > deadline:
                raise HostLost(
                    "*", self.host, f"no answer within {self.reconnect_timeout}s: {last}"
                )
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)
        self.branches = described_branches(info, self.host)
        self.conn = new_id().hex
        self._seq = 0
        self._answers.reset()
        self._outgoing = [dumps_text({"k": "watch", "on": True})] if self.watching else []
        self._outgoing += [
            dumps_text({"k": "supervise", "b": name}) for name in sorted(self._supervised)
        ]
        self._in_flight = 0
        capacities = {b["name"]: b["capacity"] for b in self.branches}
        self.mailboxes.reset(capacities)
        self.served.update(capacities)
        self._loss = None
        self.connections += 1
        self._lost = trio.Event()
        self.state = "up"
        self._up.set()
        self._kick.set()

    async def _watch_beacon(self) -> None:
        """Declare the host lost as soon as its process dies (its beacon's owner died)."""
        try:
            [beacon] = await wait_ref(self.handle.beacon.remote())
            await wait_ref(beacon)
        except Exception as exc:
            self.lose(exc)

    def lose(self, error: BaseException) -> None:
        """The host is lost: fail everything in flight now, then reconnect."""
        if self.state != "up":
            return
        log.warning("host %r lost: %r", self.host, error)
        self.state = "lost"
        self._up = trio.Event()
        self._loss = error
        self._lost.set()
        self._fail_all(error)
        if self._scope is not None:
            self._scope.cancel()

    def _fail_all(self, error: BaseException | None) -> None:
        envelopes, self.envelopes = self.envelopes, {}
        self._outgoing = []
        detail = f"{type(error).__name__}" if error is not None else "disconnected"
        for envelope in envelopes.values():
            envelope.refused(HostLost(envelope.branch, self.host, detail))

    async def _flush_loop(self) -> None:
        while True:
            while not self._outgoing or self._in_flight >= MAX_IN_FLIGHT:
                self._kick = trio.Event()
                await self._kick.wait()
            outgoing = self._outgoing
            count = size = 0
            for text in itertools.islice(outgoing, MAX_BATCH):
                size += len(text) + 1  # characters: at most its bytes (see `_send`)
                if count and size > MAX_BATCH_BYTES:
                    break
                count += 1
            batch = outgoing[:count]
            del outgoing[:count]
            self._send(batch)
            await trio.lowlevel.checkpoint()

    def _send(self, batch: list[str]) -> None:
        """Deliver ``batch`` (items' JSON texts) as the connection's next numbered batch.

        Never raises (its caller is a sender's task, or the flusher): an item with
        no UTF-8 form fails alone with `InvalidMessage`, a call Ray refuses fails
        what it carried with `HostLost` (or loses the host, when Ray says it is
        gone); logged, no batch number spent (`pride.cluster.caller.unsent`)."""
        try:
            data = self._payload(batch).encode()
        except UnicodeEncodeError:
            batch = [text for text in batch if encodable(self, text)]
            data = self._payload(batch).encode()
        if len(data) > MAX_BATCH_BYTES + 128:  # more bytes than characters: in parts
            if len(batch) > 1:
                self._send(batch[: len(batch) // 2])
                self._send(batch[len(batch) // 2 :])
            else:
                problem = f"{len(data)} bytes is over the {MAX_BATCH_BYTES}-byte limit of a send"
                refuse(self, batch[0], InvalidMessage([("command", problem)]))
            return
        try:
            ref = self.handle.deliver.remote(data) if batch else None
        except Exception as exc:  # nothing of it left this process
            if _is_loss(exc):
                self.lose(exc)
                return
            log.error("host %r refused a delivery of %d items: %r", self.host, len(batch), exc)
            for text in batch:
                refuse(self, text, f"Ray refused the call: {exc!r}")
            return
        if ref is None:
            return
        seq, self._seq = self._seq, self._seq + 1
        self.calls += 1
        self._in_flight += 1
        on_done(ref, functools.partial(self._delivered, self.conn, batch, seq))

    def _fill(self, seq: int) -> None:
        """Deliver an empty batch numbered ``seq``: the host refused the batch of that
        number whole, and holds every later one until that number is taken."""
        try:
            ref = self.handle.deliver.remote(
                f'{{"conn":"{self.conn}","seq":{seq:d},"items":[]}}'.encode()
            )
        except Exception as exc:
            # Unfilled, the gap would hold every later batch: start a new connection.
            self.lose(exc if _is_loss(exc) else InvalidMessage([("batch", f"gap {seq}: {exc!r}")]))
            return
        self.calls += 1
        self._in_flight += 1
        on_done(ref, functools.partial(self._delivered, self.conn, [], seq))

    def _payload(self, batch: list[str]) -> str:
        return f'{{"conn":"{self.conn}","seq":{self._seq:d},"items":[{",".join(batch)}]}}'

    def _delivered(self, conn: str, batch: list[str], seq: int, future: Any) -> None:
        if conn != self.conn:
            return  # a delivery of an earlier connection
        self._in_flight -= 1
        if self._in_flight == 0:
            self._deliveries_done.set()
        if self._outgoing:  # items held back by the in-flight limit may go now
            self._kick.set()
        refusal: BaseException
        try:
            answer = future.result()
        except Exception as exc:
            if _is_loss(exc):
                self.lose(exc)
                return
            refusal = exc  # the delivery itself failed on the host
        else:
            if answer is None:
                return
            try:
                data = loads(answer, "delivery")
                if not isinstance(data, dict):
                    raise InvalidMessage([("delivery", "expected an object")])
                if "error" not in data:
                    self._answers.receive(data.get("out", []))
                    return
            except InvalidMessage as exc:
                log.error("host %r sent an unreadable answer to a delivery: %s", self.host, exc)
                return
            refusal = decode_error(data["error"])
            if _is_loss(refusal):
                self.lose(refusal)
                return
        # The host refused the batch whole (as malformed, or over its size limit): a bug
        # on this side, or a host with other limits; say so to its callers.
        log.error("host %r refused batch %d: %r", self.host, seq, refusal)
        if not batch:  # even an empty one: this host cannot be talked to
            self.lose(InvalidMessage([("batch", f"refused by the host: {refusal}")]))
            return
        for text in batch:  # an error of its own for each caller
            refuse(self, text, InvalidMessage([("batch", f"refused by the host: {refusal}")]))
        self._fill(seq)  # the host did not take its number: the next batches wait for it

    async def _poll_loop(self) -> None:
        while True:
            # A host hands its answers to a delivery waiting on it before its poll, so
            # while one is under way the poll would mostly return the crumbs between
            # two deliveries, a Ray call each (~0.7 ms of this process's CPU): under
            # load the answers ride back on the deliveries instead, and the poll waits
            # for the last delivery to return (answers posted after that are taken by
            # the next delivery or by this poll at once).
            while self._in_flight > 0:
                self._deliveries_done = trio.Event()
                await self._deliveries_done.wait()
            try:
                self.calls += 1
                self.polls += 1
                payload = await wait_ref(self.handle.poll.remote(self.conn))
            except Exception as exc:
                # Lost, or the host's poll raised (a broken host): either way nothing
                # more comes back on this connection; the link reconnects.
                if not _is_loss(exc):
                    log.error("host %r: its poll failed: %r", self.host, exc)
                self.lose(exc)
                return
            try:
                answers = loads(payload, "poll")
                if isinstance(answers, dict) and "error" in answers:
                    # The host dropped this connection (silent too long, it says): what
                    # it carried is gone there, so it is lost here; the link reconnects.
                    refusal = decode_error(answers["error"])
                    log.error("host %r refused a poll: %r", self.host, refusal)
                    self.lose(refusal)
                    return
                self._answers.receive(answers)
            except InvalidMessage as exc:
                log.error("host %r sent an unreadable answer: %s", self.host, exc)

    def close(self) -> None:
        """Stop serving (the Cluster is closing): fail whatever is still in flight, and
        wake the sends waiting for the link to come up (they raise `HostLost`)."""
        if self._scope is not None:
            self._scope.cancel()
        self.state = "dead"
        self._up.set()
        self._lost.set()
        self._fail_all(None)


def _is_loss(exc: BaseException) -> bool:
    """True for an error that means the host process is gone or serves nothing."""
    if isinstance(exc, HostLost):  # the host said so: its trio loop has ended
        return True
    ray = import_ray()
    return isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.ActorUnavailableError)
