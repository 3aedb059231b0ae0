"""How a host serves its callers' connections, in its trio thread.

A host's branches are served through the ordinary target protocol against
the host's `Session`: each envelope becomes a `HostedReply`
(`pride.cluster.host.calls`) in the branch's mailbox, which reports its start and
outcome back as the branch's actor answers it. What this module does with
what arrives (one batch at a time, in order):

* **Order.** Each caller connection numbers its batches; a batch that
  overtook an earlier one (Ray does reorder) waits until the gap is filled,
  so every caller's envelopes reach each mailbox in the order it sent them.
  A batch seen twice is ignored whole (its cancels and credits too).
* **Backpressure.** An envelope goes straight into a mailbox with room;
  otherwise it waits in a per-(caller, branch) intake that awaits
  ``branch.deliver`` in order, and the caller hears "queued" only then.
* **Cancellation** travels by envelope id and is applied on arrival, even
  ahead of its batch: a queued envelope is dropped (no RunStart), a running
  turn is cancelled (terminal RunFailed), and a cancel that overtook its
  envelope is remembered so the envelope is refused when it arrives.
* **Streams** are pulled (`pride.cluster.host.streams`): the caller grants
  credits, and the host forwards at most that many items ahead of the
  caller's consumption.
* **Signals** of the hosted branches go to every connection that asked to
  watch, in emission order (so per turn: RunStart, messages, terminal).
* **Crashes** of a branch a connection supervises (a local Session holds it
  as a child) are reported to that connection, watching or not.

Everything the host sends back is queued per connection and handed to the
glue thread in one batch per trio tick (`pride.cluster.host.outbox`).
"""

from __future__ import annotations

import collections
import logging
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import attrs
import trio

from ...branch import Branch
from ...errors import (
    BranchClosed,
    EnvelopeReplayed,
    InvalidMessage,
    MailboxFull,
    PrideError,
    TurnCancelled,
    UnknownBranch,
)
from ...messages import BranchStopped, Signal, WorkCommand, structure, unstructure
from ..wire.encoding import encode_error, encode_value, loads_text
from .calls import Call, HostedReply, room, trace_context
from .outbox import Outbox
from .streams import MAX_WINDOW, cancel_stream, serve_stream

if TYPE_CHECKING:
    from ...supervisors import Session

__all__ = ["MAX_HELD_BATCHES", "MAX_REMEMBERED_CANCELS", "MAX_WINDOW", "Connections", "Served"]

log = logging.getLogger("pride.cluster")

MAX_HELD_BATCHES = 4096
"""Batches a connection may have waiting for an earlier one before it is refused."""
MAX_REMEMBERED_CANCELS = 100_000
"""Cancels of envelopes this host has not (yet) seen, remembered per connection."""
_MODES = {"ask": "wait", "wait": "wait", "nowait": "nowait", "stream": "stream"}
"""The envelope modes on the wire ("ask": an older "wait"), as a call keeps them."""


@attrs.define(eq=False)
class _Conn:
    """One caller connection: its order, its calls, what it is owed."""

    id: str
    expected: int = 0
    held: dict[int, list[tuple[dict[str, Any], bool]]] = attrs.field(factory=dict)
    calls: dict[str, Call] = attrs.field(factory=dict)
    cancelled: dict[str, None] = attrs.field(factory=dict)  # in arrival order
    intake: dict[str, collections.deque[Call]] = attrs.field(factory=dict)
    watching: bool = False
    supervised: set[str] = attrs.field(factory=set)


class Served(Protocol):
    """What the connections serve (the host's `HostRuntime`): its name, its
    outbox, its session (None while it is not serving) and its nursery."""

    @property
    def name(self) -> str: ...
    @property
    def outbox(self) -> Outbox: ...
    @property
    def session(self) -> Session | None: ...
    @property
    def nursery(self) -> trio.Nursery: ...


class Connections:
    """The callers' connections of one host (see the module docstring)."""

    def __init__(self, runtime: Served) -> None:
        self._runtime = runtime
        self.name = runtime.name
        self.outbox = runtime.outbox
        self._conns: dict[str, _Conn] = {}
        self._watchers = 0  # connections watching signals (most hosts: none)

    @property
    def session(self) -> Session | None:
        return self._runtime.session

    # ------------------------------------------------------------ arrivals

    def on_batch(self, conn_id: str, seq: int, items: list[dict[str, Any]], seen: set[str]) -> None:
        """Take one batch from a connection (in the trio thread, at once)."""
        conn = self._conns.get(conn_id)
        if conn is None:
            conn = self._conns[conn_id] = _Conn(conn_id)
        if seq < conn.expected or seq in conn.held:
            log.warning("host %r: batch %d of %s arrived twice; ignored", self.name, seq, conn_id)
            return  # whole: a second copy's cancels and credits would count twice
        if seq != conn.expected and len(conn.held) >= MAX_HELD_BATCHES:
            log.error(
                "host %r: connection %s is %d batches out of order; batch %d refused",
                self.name,
                conn_id,
                len(conn.held),
                seq,
            )
            refusal = InvalidMessage([("batch.seq", f"{len(conn.held)} batches wait for a gap")])
            for item in items:
                if item.get("k") == "send" and isinstance(item.get("id"), str):
                    self._refuse(conn, item["id"], refusal)
            return
        found: dict[str, Branch] = {}  # a name looked up once per batch, not per envelope
        commands: dict[str, WorkCommand] = {}  # a command's text decoded once per batch
        in_batch: set[Any] = set()
        if seq == conn.expected:
            # In order (the common case): each item is applied as it is read.
            for item in items:
                taken = self._arrived(conn, item, seen, in_batch)
                if taken is not None:
                    self._apply_safely(conn, taken, found, commands)
            conn.expected += 1
        else:
            # Ahead of a gap: its cancels and credits apply now, the rest waits its turn.
            held = []
            for item in items:
                taken = self._arrived(conn, item, seen, in_batch)
                if taken is not None:
                    held.append(taken)
            conn.held[seq] = held
        while conn.expected in conn.held:
            for taken in conn.held.pop(conn.expected):
                self._apply_safely(conn, taken, found, commands)
            conn.expected += 1

    def _arrived(
        self, conn: _Conn, item: dict[str, Any], seen: set[str], in_batch: set[Any]
    ) -> tuple[dict[str, Any], bool] | None:
        """An item as it arrives: a cancel, credit or close is applied at once (None);
        anything else is returned to be applied in order, with whether it is a
        replayed envelope (its id journalled before, or twice in this batch)."""
        kind = item.get("k")
        envelope_id = item.get("id")
        if envelope_id is not None and not isinstance(envelope_id, str):
            # Nothing to answer it by: an envelope, cancel or credit needs a string id.
            log.error("host %r: an item with a bad id from %s: %.200r", self.name, conn.id, item)
            return None
        if kind == "send":
            replayed = envelope_id in seen or envelope_id in in_batch
            in_batch.add(envelope_id)
            return item, replayed
        if kind == "cancel":
            self._cancel(conn, item)
        elif kind == "credit":
            self._credit(conn, item)
        elif kind == "close":
            self._close_stream(conn, item)
        else:
            return item, False
        return None

    def _apply_safely(
        self,
        conn: _Conn,
        taken: tuple[dict[str, Any], bool],
        found: dict[str, Branch],
        commands: dict[str, WorkCommand],
    ) -> None:
        item, replayed = taken
        try:
            self._apply(conn, item, replayed, found, commands)
        except Exception:  # raising here would end the trio loop, and the host
            log.exception("host %r: could not take %.200r", self.name, item)
            if isinstance(item.get("id"), str):
                self._refuse(conn, item["id"], InvalidMessage([("envelope", "could not be taken")]))

    def forget(self, conn_id: str) -> None:
        """A connection is gone: cancel what it still has running."""
        conn = self._conns.pop(conn_id, None)
        self.outbox.forget(conn_id)
        if conn is None:
            return
        self._watch(conn, False)
        for call in list(conn.calls.values()):
            call.answered = True
            if call.reply is not None:
                call.reply.cancel("caller")
            if call.scope is not None:
                call.scope.cancel()
            if call.receiving is not None:
                call.receiving.cancel()

    def _apply(
        self,
        conn: _Conn,
        item: dict[str, Any],
        replayed: bool,
        found: dict[str, Branch],
        commands: dict[str, WorkCommand],
    ) -> None:
        kind = item.get("k")
        if kind == "watch":
            self._watch(conn, bool(item.get("on", True)))
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
        mode = _MODES.get(item.get("mode"))  # type: ignore[arg-type]
        try:
            if not isinstance(branch_name, str):
                raise InvalidMessage([("envelope.b", "expected a branch name")])
            if mode is None:
                raise InvalidMessage([("envelope.mode", f"unknown mode {item.get('mode')!r}")])
            command = _command(item.get("cmd"), commands)
        except InvalidMessage as exc:
            self._refuse(conn, envelope_id, exc)
            return
        window = 0
        if mode == "stream":
            window = item.get("window", 0)
            if isinstance(window, bool) or not isinstance(window, int):
                window = 1
            elif not 0 < window <= MAX_WINDOW:
                window = MAX_WINDOW if window > MAX_WINDOW else 1
        trace = item.get("trace")
        call = Call(
            envelope_id,
            conn.id,
            branch_name,
            mode,
            command,
            window,
            ack=item.get("ack") is True,
            trace=None if trace is None else trace_context(trace),
        )
        if conn.cancelled and envelope_id in conn.cancelled:
            del conn.cancelled[envelope_id]
            self._drop(conn, envelope_id)
            return
        if replayed:
            # Answered by id without touching the calls: the first of that id may be one.
            refusal = EnvelopeReplayed(envelope_id, branch_name)
            self._send(conn, {"k": "refused", "id": envelope_id, "error": encode_error(refusal)})
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
            reply = HostedReply(branch, call, self)
            try:
                branch.deliver_nowait(reply)
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
        self._runtime.nursery.start_soon(self._intake, conn, branch, name=f"intake {branch_name}")

    async def _intake(self, conn: _Conn, branch: Branch) -> None:
        """Queue one connection's envelopes for ``branch`` in order, waiting for room."""
        queue = conn.intake[branch.name]
        nursery = self._runtime.nursery
        try:
            while queue:
                call = queue[0]
                if not call.answered:
                    with trio.CancelScope() as scope:
                        call.scope = scope
                        try:
                            if call.mode == "stream":
                                await nursery.start(serve_stream, self, call, branch)
                            else:
                                reply = HostedReply(branch, call, self)
                                await branch.deliver(reply)
                                self._accepted(conn, call, branch, reply)
                        except Exception as exc:
                            self._refuse(conn, call.id, exc)
                    if scope.cancelled_caught and not call.answered:
                        self._drop(conn, call.id)
                    call.scope = None
                queue.popleft()
        finally:
            if conn.intake.get(branch.name) is queue:
                del conn.intake[branch.name]

    def _accepted(self, conn: _Conn, call: Call, branch: Branch, reply: HostedReply) -> None:
        call.reply = reply
        if call.ack:  # its caller waits for room
            self._send(conn, {"k": "ack", "id": call.id, "room": room(branch)})

    # ------------------------------------------------------------ answers

    def started(self, call: Call, turn_id: UUID) -> None:
        """A call's turn started (its hosted reply says so, from inside the actor)."""
        conn = self._conns.get(call.conn)
        if conn is None or call.answered:
            return
        turn = str(turn_id)
        if call.mode == "stream":
            self._send(conn, {"k": "start", "id": call.id, "turn": turn})
        else:  # lazy: a short turn's outcome replaces it
            self.outbox.send_start(conn.id, call.id, {"k": "start", "id": call.id, "turn": turn})
        self.outbox.note_turn(call.id, turn)

    def finished(self, call: Call, branch: Branch, value: Any, error: BaseException | None) -> None:
        """Post ``call``'s outcome to its connection, once (its hosted reply or its
        stream's forwarder says it arrived)."""
        if call.answered:
            return
        call.answered = True
        conn = self._conns.get(call.conn)
        if conn is None:
            return  # forgotten: nobody is listening
        conn.calls.pop(call.id, None)
        turn_id = call.reply.turn_id if call.reply is not None else None
        item: dict[str, Any] = {"k": "done", "id": call.id}
        if turn_id is not None:
            item["turn"] = str(turn_id)
        if error is None:
            try:
                item["value"] = encode_value(value)
            except InvalidMessage as exc:
                error = exc
        if error is not None:
            item["error"] = encode_error(error)
            if call.reply is not None and call.reply.state == "dropped":
                item["dropped"] = True  # cancelled while queued here: it never started
        # Its mailbox's room is read once per hand-over, for the last outcome of it.
        self.outbox.send(conn.id, item, supersedes=call.id, room_of=branch)

    def _refuse(
        self, conn: _Conn, envelope_id: str, error: BaseException, *, dropped: bool = False
    ) -> None:
        call = conn.calls.pop(envelope_id, None)
        if call is not None:
            if call.answered:
                return
            call.answered = True
        item: dict[str, Any] = {"k": "refused", "id": envelope_id, "error": encode_error(error)}
        if dropped:
            item["dropped"] = True
        self._send(conn, item)

    def _drop(self, conn: _Conn, envelope_id: str) -> None:
        """Answer a cancelled envelope that never started (the caller's reply says so)."""
        cancelled = TurnCancelled("caller", "dropped before it started")
        self._refuse(conn, envelope_id, cancelled, dropped=True)

    # ------------------------------------------------------------ cancellation

    def _cancel(self, conn: _Conn, item: dict[str, Any]) -> None:
        envelope_id = item.get("id")
        call = conn.calls.get(envelope_id)  # type: ignore[arg-type]
        if call is None:
            if not isinstance(envelope_id, str):
                return
            # Overtook its envelope, or came after its answer (a caller cancelling what
            # it had not heard of yet): remembered, the oldest forgotten past the bound,
            # most likely one of the second kind (an early one is used in moments).
            if len(conn.cancelled) >= MAX_REMEMBERED_CANCELS:
                del conn.cancelled[next(iter(conn.cancelled))]
            conn.cancelled[envelope_id] = None
            return
        if call.mode == "stream":
            if not cancel_stream(call):
                self._drop(conn, call.id)
            return
        if call.reply is None:  # still waiting in the intake for room
            if call.scope is not None:
                call.scope.cancel()
            else:
                self._drop(conn, call.id)
            return
        call.reply.cancel("caller")  # a queued one is answered at once, by its hosted reply

    def _credit(self, conn: _Conn, item: dict[str, Any]) -> None:
        call = conn.calls.get(item.get("id"))  # type: ignore[arg-type]
        n = item.get("n")
        if call is not None and isinstance(n, int) and not isinstance(n, bool) and n > 0:
            call.credit += n
            if call.credit_changed is not None:
                call.credit_changed.set()

    def _close_stream(self, conn: _Conn, item: dict[str, Any]) -> None:
        call = conn.calls.get(item.get("id"))  # type: ignore[arg-type]
        if call is not None and call.mode == "stream":
            call.closing = call.closing or "close"
            if call.credit_changed is not None:
                call.credit_changed.set()
            if call.receiving is not None:
                call.receiving.cancel()

    # ------------------------------------------------------------ signals

    def on_stopped(self, signal: Signal) -> None:
        """A hosted branch stopped: a crash goes to the connections supervising it."""
        if not isinstance(signal, BranchStopped) or signal.reason != "crash":
            return
        crashed = {"k": "crashed", "b": signal.branch_name, "error": signal.error or ""}
        for conn in self._conns.values():
            if signal.branch_name in conn.supervised:
                self._send(conn, crashed)

    def on_signal(self, signal: Signal) -> None:
        """Any signal of a hosted branch, to the connections watching (observed only
        while one does: a host nobody watches builds no signal it need not)."""
        data = {"k": "signal", "signal": unstructure(signal)}
        for conn in self._conns.values():
            if conn.watching:
                self._send(conn, data)

    def _watch(self, conn: _Conn, watching: bool) -> None:
        if watching == conn.watching:
            return
        conn.watching = watching
        self._watchers += 1 if watching else -1
        session = self.session
        if session is None:
            return
        if watching and self._watchers == 1:
            session.observe(Signal, handler=self.on_signal)
        elif not watching and self._watchers == 0:
            session.unobserve(self.on_signal)

    # ------------------------------------------------------------ outbound

    def post(self, call: Call, item: dict[str, Any]) -> None:
        """Send ``item`` on ``call``'s connection (for its stream's forwarder)."""
        conn = self._conns.get(call.conn)
        if conn is not None:
            self._send(conn, item)

    def _send(self, conn: _Conn, item: dict[str, Any]) -> None:
        if conn.id in self._conns:  # else forgotten: nobody is listening
            self.outbox.send(conn.id, item)


def _command(data: Any, decoded: dict[str, WorkCommand]) -> WorkCommand:
    """An envelope's command: its codec text (or, from an older caller, its codec object).

    The same text twice in one batch (a busy caller's repeated command) is
    decoded once: commands are frozen values, as a caller sending one command
    object twice shares it.

    Raises:
        InvalidMessage: it is not a well-formed work command.
    """
    if not isinstance(data, str):
        return structure(data, WorkCommand)
    command = decoded.get(data)
    if command is None:
        command = decoded[data] = structure(loads_text(data, "envelope.cmd"), WorkCommand)
    return command
