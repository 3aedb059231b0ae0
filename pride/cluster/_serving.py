"""How a host serves its callers' connections, in its trio thread.

A host's branches are served with the ordinary public API (``pride.send``,
``send_nowait``, ``stream``) against the host's `Session`. What this module
does with what arrives (one batch at a time, in order):

* **Order.** Each caller connection numbers its batches; a batch that
  overtook an earlier one (Ray does reorder) waits until the gap is filled,
  so every caller's envelopes reach each mailbox in the order it sent them.
  A batch seen twice is ignored.
* **Backpressure.** An envelope goes straight into a mailbox with room;
  otherwise it waits in a per-(caller, branch) intake that awaits
  ``pride.send`` in order, and the caller hears "queued" only then.
* **Cancellation** travels by envelope id and is applied on arrival, even
  ahead of its batch: a queued envelope is dropped (no RunStart), a running
  turn is cancelled (terminal RunFailed), and a cancel that overtook its
  envelope is remembered so the envelope is refused when it arrives.
* **Streams** are pulled: the caller grants credits, and the host forwards
  at most that many items ahead of the caller's consumption.
* **Signals** of the hosted branches go to every connection that asked to
  watch, in emission order (so per turn: RunStart, messages, terminal).
* **Crashes** of a branch a connection supervises (a local Session holds it
  as a child) are reported to that connection, watching or not.

Everything the host sends back is queued per connection and handed to the
glue thread in one batch per trio tick (`pride.cluster._outbox`).
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .. import actors as _actors
from ..actors import Branch, Reply
from ..actors.instrument import forwarding
from ..errors import (
    BranchClosed,
    EnvelopeReplayed,
    InvalidMessage,
    MailboxFull,
    PrideError,
    TurnCancelled,
    UnknownBranch,
)
from ..messages import BranchStopped, RunStart, Signal, WorkCommand, structure, unstructure
from ._wire import encode_error, encode_value

if TYPE_CHECKING:
    from ..supervisors import Session
    from ._host import HostRuntime

__all__ = ["MAX_HELD_BATCHES", "MAX_REMEMBERED_CANCELS", "MAX_WINDOW", "Connections"]

log = logging.getLogger("pride.cluster")

MAX_HELD_BATCHES = 4096
"""Batches a connection may have waiting for an earlier one before it is refused."""
MAX_WINDOW = 4096
"""The most items a stream may run ahead of its caller, whatever the caller asks."""
MAX_REMEMBERED_CANCELS = 100_000
"""Cancels that overtook their envelopes, remembered per connection."""


_TRACE_KEYS = 8  # traceparent, tracestate, baggage and a few more: never a payload
_TRACE_VALUE = 8192  # characters; W3C caps tracestate at 512 and baggage at 8192


def _trace_context(value: Any) -> dict[str, str] | None:
    """An envelope's trace context from the wire: a small str-to-str object, else none.

    It only labels spans, so a malformed one is dropped (and logged), never
    a reason to refuse the work.
    """
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and len(value) <= _TRACE_KEYS
        and all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= _TRACE_VALUE
            for k, v in value.items()
        )
    ):
        return value
    log.warning("an envelope's trace context is malformed; it is dropped")
    return None


@attrs.define(eq=False)
class _Call:
    """One envelope a caller sent, from arrival until its outcome is posted."""

    id: str
    branch: str
    mode: str  # "ask" | "wait" | "nowait" | "stream"
    command: WorkCommand
    window: int = 0
    ack: bool = False  # the caller waits for "queued" (it believes the mailbox full)
    replayed: bool = False
    reply: Reply | None = None
    answered: bool = False
    scope: trio.CancelScope | None = None  # the intake's wait for room, or the stream
    credit: int = 0
    credit_changed: trio.Event = attrs.field(factory=trio.Event)
    closing: str | None = None  # "close" (clean) or "cancel", for a stream
    trace: dict[str, str] | None = None  # the sender's trace context (W3C headers)


@attrs.define(eq=False)
class _Conn:
    """One caller connection: its order, its calls, what it is owed."""

    id: str
    expected: int = 0
    held: dict[int, list[dict[str, Any]]] = attrs.field(factory=dict)
    calls: dict[str, _Call] = attrs.field(factory=dict)
    cancelled: set[str] = attrs.field(factory=set)
    intake: dict[str, collections.deque[_Call]] = attrs.field(factory=dict)
    watching: bool = False
    supervised: set[str] = attrs.field(factory=set)


class Connections:
    """The callers' connections of one host (see the module docstring)."""

    def __init__(self, runtime: HostRuntime) -> None:
        self._runtime = runtime
        self.name = runtime.name
        self.outbox = runtime.outbox
        self._conns: dict[str, _Conn] = {}
        self._running: dict[str, collections.deque[tuple[_Conn, _Call]]] = {}

    @property
    def session(self) -> Session | None:
        return self._runtime.session

    @property
    def _nursery(self) -> trio.Nursery:
        return self._runtime.nursery

    # ------------------------------------------------------------ arrivals

    def on_batch(self, conn_id: str, seq: int, items: list[dict[str, Any]], seen: set[str]) -> None:
        """Take one batch from a connection (in the trio thread, at once)."""
        conn = self._conns.get(conn_id)
        if conn is None:
            conn = self._conns[conn_id] = _Conn(conn_id)
        ordered = []
        in_batch: set[Any] = set()
        for received in items:
            item = received
            kind = item.get("k")
            if "id" in item and not isinstance(item["id"], str):
                # Nothing to answer it by: an envelope, cancel or credit needs a string id.
                log.error(
                    "host %r: an item with a bad id from %s: %.200r", self.name, conn_id, item
                )
                continue
            if kind == "cancel":
                self._cancel(conn, item)
            elif kind == "credit":
                self._credit(conn, item)
            elif kind == "close":
                self._close_stream(conn, item)
            else:
                if kind == "send":
                    envelope_id = item.get("id")
                    if envelope_id in seen or envelope_id in in_batch:
                        item = {**item, "replayed": True}
                    in_batch.add(envelope_id)
                ordered.append(item)
        if seq < conn.expected or seq in conn.held:
            log.warning("host %r: batch %d of %s arrived twice; ignored", self.name, seq, conn_id)
            return
        if len(conn.held) >= MAX_HELD_BATCHES:
            log.error(
                "host %r: connection %s is %d batches out of order; batch %d refused",
                self.name,
                conn_id,
                len(conn.held),
                seq,
            )
            refusal = InvalidMessage([("batch.seq", f"{len(conn.held)} batches wait for a gap")])
            for item in ordered:
                if item.get("k") == "send" and isinstance(item.get("id"), str):
                    self._refuse(conn, item["id"], refusal)
            return
        conn.held[seq] = ordered
        found: dict[str, Branch] = {}  # a name looked up once per batch, not per envelope
        while conn.expected in conn.held:
            for item in conn.held.pop(conn.expected):
                try:
                    self._apply(conn, item, found)
                except Exception:  # raising here would end the trio loop, and the host
                    log.exception("host %r: could not take %.200r", self.name, item)
                    if isinstance(item.get("id"), str):
                        self._refuse(
                            conn, item["id"], InvalidMessage([("envelope", "could not be taken")])
                        )
            conn.expected += 1

    def forget(self, conn_id: str) -> None:
        """A connection is gone: cancel what it still has running."""
        conn = self._conns.pop(conn_id, None)
        self.outbox.forget(conn_id)
        if conn is None:
            return
        for call in list(conn.calls.values()):
            call.answered = True
            if call.reply is not None:
                call.reply.cancel("caller")
            if call.scope is not None:
                call.scope.cancel()

    def _apply(self, conn: _Conn, item: dict[str, Any], found: dict[str, Branch]) -> None:
        kind = item.get("k")
        if kind == "watch":
            conn.watching = bool(item.get("on", True))
            return
        if kind == "supervise":
            branch_name = item.get("b")
            if isinstance(branch_name, str):
                conn.supervised.add(branch_name)
            return
        if kind != "send":
            log.error("host %r: unknown item kind %r from %s", self.name, kind, conn.id)
            return
        envelope_id = item.get("id")
        if not isinstance(envelope_id, str):
            log.error("host %r: an envelope without an id from %s", self.name, conn.id)
            return
        branch_name = item.get("b")
        mode = item.get("mode")
        try:
            if not isinstance(branch_name, str):
                raise InvalidMessage([("envelope.b", "expected a branch name")])
            if mode not in ("ask", "wait", "nowait", "stream"):  # "ask": an older "wait"
                raise InvalidMessage([("envelope.mode", f"unknown mode {mode!r}")])
            command: WorkCommand = structure(item.get("cmd"), WorkCommand)
        except InvalidMessage as exc:
            self._refuse(conn, envelope_id, exc)
            return
        window = item.get("window", 0)
        if isinstance(window, bool) or not isinstance(window, int) or not 0 < window <= MAX_WINDOW:
            window = MAX_WINDOW if isinstance(window, int) and window > MAX_WINDOW else 1
        call = _Call(
            envelope_id,
            branch_name,
            "wait" if mode == "ask" else mode,
            command,
            window,
            ack=item.get("ack") is True,
            trace=_trace_context(item.get("trace")),
        )
        if envelope_id in conn.cancelled:
            conn.cancelled.discard(envelope_id)
            self._refuse(conn, envelope_id, TurnCancelled("caller", "dropped before it started"))
            return
        if item.get("replayed"):
            # Answered by id without touching the calls: the first of that id may be one.
            replayed = EnvelopeReplayed(envelope_id, branch_name)
            self._send(conn, {"k": "refused", "id": envelope_id, "error": encode_error(replayed)})
            return
        session = self.session
        try:
            if session is None:
                raise BranchClosed(branch_name, f"host {self.name!r} is stopping")
            branch = found.get(branch_name) or found.setdefault(
                branch_name, session.get_branch(branch_name)
            )
        except (UnknownBranch, BranchClosed) as exc:
            self._refuse(conn, envelope_id, exc)
            return
        conn.calls[envelope_id] = call
        waiting = conn.intake.get(branch_name)
        if waiting is not None:
            if mode == "nowait":  # senders are waiting for room: the mailbox is full
                self._refuse(conn, envelope_id, MailboxFull(branch_name, branch.mailbox_size))
            else:
                waiting.append(call)
            return
        if mode != "stream":
            try:
                if call.trace is None:
                    reply = _actors.send_nowait(branch, command)
                else:
                    with forwarding(call.trace):
                        reply = _actors.send_nowait(branch, command)
            except MailboxFull as exc:
                if mode == "nowait":
                    self._refuse(conn, envelope_id, exc)
                    return
            except PrideError as exc:
                self._refuse(conn, envelope_id, exc)
                return
            else:
                self._accepted(conn, call, branch, reply)
                return
        conn.intake[branch_name] = collections.deque([call])
        assert self._nursery is not None
        self._nursery.start_soon(self._intake, conn, branch, name=f"intake {branch_name}")

    async def _intake(self, conn: _Conn, branch: Branch) -> None:
        """Queue one connection's envelopes for ``branch`` in order, waiting for room."""
        queue = conn.intake[branch.name]
        assert self._nursery is not None
        try:
            while queue:
                call = queue[0]
                if not call.answered:
                    with trio.CancelScope() as scope:
                        call.scope = scope
                        try:
                            if call.mode == "stream":
                                await self._nursery.start(self._stream, conn, call, branch)
                            else:
                                with forwarding(call.trace):
                                    reply = await _actors.send(branch, call.command)
                                self._accepted(conn, call, branch, reply)
                        except Exception as exc:
                            self._refuse(conn, call.id, exc)
                    if scope.cancelled_caught and not call.answered:
                        self._refuse(
                            conn, call.id, TurnCancelled("caller", "dropped before it started")
                        )
                    call.scope = None
                queue.popleft()
        finally:
            if conn.intake.get(branch.name) is queue:
                del conn.intake[branch.name]

    def _accepted(self, conn: _Conn, call: _Call, branch: Branch, reply: Reply) -> None:
        call.reply = reply
        if call.ack:  # its caller waits for room
            self._send(conn, {"k": "ack", "id": call.id, "room": _room(branch)})
        self._running.setdefault(branch.name, collections.deque()).append((conn, call))
        assert self._nursery is not None
        self._nursery.start_soon(self._answer, conn, call, branch)

    async def _answer(self, conn: _Conn, call: _Call, branch: Branch) -> None:
        reply = call.reply
        assert reply is not None
        try:
            value = await reply.result()
        except trio.Cancelled:
            raise  # the host is going away: its callers hear HostLost
        except BaseException as exc:
            self._finish(conn, call, branch, error=exc)
        else:
            self._finish(conn, call, branch, value=value)

    def _finish(
        self,
        conn: _Conn,
        call: _Call,
        branch: Branch | None,
        *,
        value: Any = None,
        error: BaseException | None = None,
    ) -> None:
        if call.answered:
            return
        call.answered = True
        conn.calls.pop(call.id, None)
        turn_id = call.reply.turn_id if call.reply is not None else None
        item: dict[str, Any] = {"k": "done", "id": call.id}
        if turn_id is not None:
            item["turn"] = str(turn_id)
        if branch is not None:
            item["room"] = _room(branch)
        if error is None:
            try:
                item["value"] = encode_value(value)
            except InvalidMessage as exc:
                error = exc
        if error is not None:
            item["error"] = encode_error(error)
        self._send(conn, item)

    def _refuse(self, conn: _Conn, envelope_id: str, error: BaseException) -> None:
        call = conn.calls.pop(envelope_id, None)
        if call is not None:
            if call.answered:
                return
            call.answered = True
        self._send(conn, {"k": "refused", "id": envelope_id, "error": encode_error(error)})

    # ------------------------------------------------------------ cancellation

    def _cancel(self, conn: _Conn, item: dict[str, Any]) -> None:
        envelope_id = item.get("id")
        call = conn.calls.get(envelope_id)  # type: ignore[arg-type]
        if call is None:
            if not isinstance(envelope_id, str):
                return
            # Overtook its envelope (or the envelope was already answered: harmless).
            if len(conn.cancelled) < MAX_REMEMBERED_CANCELS:
                conn.cancelled.add(envelope_id)
            else:
                log.error("host %r: too many early cancels from %s; dropping", self.name, conn.id)
            return
        if call.mode == "stream":
            call.closing = "cancel"
            call.credit_changed.set()
            if call.reply is not None:
                call.reply.cancel("caller")
            elif call.scope is not None:
                call.scope.cancel()
            else:
                self._refuse(conn, call.id, TurnCancelled("caller", "dropped before it started"))
            return
        if call.reply is None:  # still waiting in the intake for room
            if call.scope is not None:
                call.scope.cancel()
            else:
                self._refuse(conn, call.id, TurnCancelled("caller", "dropped before it started"))
            return
        call.reply.cancel("caller")
        if call.reply.done and call.reply.state == "dropped":
            # Dropped at once: answer now rather than after the turn ahead of it.
            self._finish(
                conn, call, None, error=TurnCancelled("caller", "dropped before it started")
            )

    # ------------------------------------------------------------ streams

    def _credit(self, conn: _Conn, item: dict[str, Any]) -> None:
        call = conn.calls.get(item.get("id"))  # type: ignore[arg-type]
        n = item.get("n")
        if call is not None and isinstance(n, int) and n > 0:
            call.credit += n
            call.credit_changed.set()

    def _close_stream(self, conn: _Conn, item: dict[str, Any]) -> None:
        call = conn.calls.get(item.get("id"))  # type: ignore[arg-type]
        if call is not None and call.mode == "stream":
            call.closing = call.closing or "close"
            call.credit_changed.set()

    async def _stream(
        self,
        conn: _Conn,
        call: _Call,
        branch: Branch,
        *,
        task_status: Any = trio.TASK_STATUS_IGNORED,
    ) -> None:
        call.credit = call.window
        entered = False
        try:
            with forwarding(call.trace):
                async with _actors.stream(branch, call.command) as items:
                    entered = True
                    call.reply = items.reply
                    self._send(conn, {"k": "ack", "id": call.id, "room": _room(branch)})
                    if items.reply is not None:
                        self._running.setdefault(branch.name, collections.deque()).append(
                            (conn, call)
                        )
                    task_status.started()
                    async for value in items:
                        while call.credit <= 0 and call.closing is None:
                            call.credit_changed = trio.Event()
                            await call.credit_changed.wait()
                        if call.closing is not None:
                            break
                        call.credit -= 1
                        try:
                            encoded = encode_value(value, "item")
                        except InvalidMessage as exc:
                            self._finish(conn, call, branch, error=exc)
                            return
                        self._send(conn, {"k": "item", "id": call.id, "value": encoded})
        except trio.Cancelled:
            raise
        except BaseException as exc:
            if not entered:
                raise  # out of nursery.start: the intake refuses the envelope
            self._finish(conn, call, branch, error=exc)
            return
        if call.closing == "cancel":
            self._finish(conn, call, branch, error=TurnCancelled("caller"))
        else:
            self._finish(conn, call, branch, value=None)

    # ------------------------------------------------------------ signals

    def on_signal(self, signal: Signal) -> None:
        if isinstance(signal, RunStart) and signal.branch_name is not None:
            self._started(signal)
        elif isinstance(signal, BranchStopped) and signal.reason == "crash":
            crashed = {"k": "crashed", "b": signal.branch_name, "error": signal.error or ""}
            for conn in self._conns.values():
                if signal.branch_name in conn.supervised:
                    self._send(conn, crashed)
        watchers = [conn for conn in self._conns.values() if conn.watching]
        if watchers:
            data = {"k": "signal", "signal": unstructure(signal)}
            for conn in watchers:
                self._send(conn, data)

    def _started(self, signal: RunStart) -> None:
        running = self._running.get(signal.branch_name)  # type: ignore[arg-type]
        while running:
            conn, call = running[0]
            reply = call.reply
            if reply is None or reply.done or call.answered:
                running.popleft()
                continue
            if reply.turn_id == signal.turn_id:
                running.popleft()
                # Lazy unless streamed: a short turn's start leaves with its outcome.
                self._send(
                    conn,
                    {"k": "start", "id": call.id, "turn": str(signal.turn_id)},
                    lazy=call.mode != "stream",
                )
                self.outbox.note_turn(call.id, str(signal.turn_id))
            return

    # ------------------------------------------------------------ outbound

    def _send(self, conn: _Conn, item: dict[str, Any], *, lazy: bool = False) -> None:
        if conn.id in self._conns:  # else forgotten: nobody is listening
            self.outbox.send(conn.id, item, lazy=lazy)


def _room(branch: Branch) -> int:
    stats = branch.mailbox_statistics()
    if stats is None or stats.closed:
        return 0
    return max(0, stats.capacity - stats.queued)
