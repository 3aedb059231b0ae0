"""What a host says back to a caller's connection, read as the hostile input it is.

The host numbers its answer batches per connection; they arrive on two paths
(a delivery's return and the long poll) in any order, and `Answers` applies
them in number order. Each item is checked before it touches anything: a
batch or item of the wrong shape, of an unknown kind, or for an envelope
never sent is logged and dropped; an envelope whose own answer is unusable (a
result that does not decode, a stream item for an ask, more stream items
than credited, a malformed turn id) fails with `InvalidMessage`; a host that
leaves a gap no later answer fills (`MAX_HELD_ANSWERS` batches waiting) is
treated as lost.

`Mailboxes` is this caller's view of the remote mailboxes, kept from the
same answers: an ack, and the last outcome for a branch in each batch, say
how much room its mailbox had when the host handed the batch over, and the
caller counts what it sent since (``send_nowait`` raises `MailboxFull` from it).
That room is only refreshed by answers to this caller's own envelopes: once
none is unfinished, the last room heard may be as old as its last answer
(other callers' work waited then), so it no longer refuses anything here; the
host decides (its refusal fails the reply with `MailboxFull`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

from ...errors import InvalidMessage, MailboxFull
from ...messages import Signal, structure
from ..wire.encoding import decode_error, decode_value
from .envelope import Envelope

__all__ = [
    "MAX_HELD_ANSWERS",
    "AnsweredLink",
    "Answers",
    "Mailboxes",
    "answer_turn",
    "described_branches",
]

log = logging.getLogger("pride.cluster")

MAX_HELD_ANSWERS = 4096
"""Answer batches waiting for an earlier one before the host is treated as lost."""

_ANSWER_KINDS = frozenset({"ack", "start", "item", "refused", "done"})
_QUEUED_KINDS = frozenset({"ack", "start", "refused", "done"})  # the envelope left the count
_FINAL_KINDS = frozenset({"refused", "done"})  # nothing more comes for the envelope


class Mailboxes:
    """This caller's view of one host's mailboxes (see the module docstring)."""

    def __init__(self) -> None:
        self._room: dict[str, int] = {}
        self._capacity: dict[str, int] = {}
        self._outstanding: dict[str, int] = {}
        # Envelopes sent and not yet finished (done or refused): while there are
        # some, an answer with a fresh room is still to come.
        self._unfinished: dict[str, int] = {}

    def reset(self, capacities: dict[str, int]) -> None:
        """A new connection: the host's branches with their capacities, nothing sent yet."""
        self._room = dict(capacities)
        self._capacity = dict(capacities)
        self._outstanding.clear()
        self._unfinished.clear()

    def know(self, branch: str, capacity: int) -> None:
        """``branch`` has a mailbox of ``capacity`` (room unknown until an answer says)."""
        self._capacity[branch] = capacity
        self._room.setdefault(branch, capacity)

    def has_room(self, branch: str) -> bool:
        """True when this caller believes ``branch``'s mailbox has room for one more."""
        room = self._room.get(branch)
        return room is not None and self._outstanding.get(branch, 0) < room

    def check(self, branch: str, capacity: int | None) -> None:
        """Raise `MailboxFull` if this caller knows ``branch``'s mailbox is full."""
        room = self._room.get(branch)
        if (
            room is not None
            and self._outstanding.get(branch, 0) >= room
            and self._unfinished.get(branch, 0) > 0  # else that room may be stale for good
        ):
            raise MailboxFull(branch, capacity if capacity is not None else room)

    def sent(self, branch: str) -> None:
        """One more envelope for ``branch`` is on its way."""
        self._outstanding[branch] = self._outstanding.get(branch, 0) + 1
        self._unfinished[branch] = self._unfinished.get(branch, 0) + 1

    def heard(self, branch: str, room: Any, queued: bool, *, finished: bool = False) -> None:
        """An answer said ``room`` (if an int) and, if ``queued``, that one envelope
        sent left this caller's count (the host queued, refused or answered it);
        ``finished``: that envelope is done with (answered, refused or never sent)."""
        if isinstance(room, int) and not isinstance(room, bool):
            self._room[branch] = max(0, min(room, self._capacity.get(branch, room)))
        if queued:
            self._outstanding[branch] = max(0, self._outstanding.get(branch, 0) - 1)
        if finished:
            self._unfinished[branch] = max(0, self._unfinished.get(branch, 0) - 1)


class AnsweredLink(Protocol):
    """What answers are applied to (a `Link`): its host's name, the envelopes it
    has in flight, its view of the remote mailboxes, where signals and crashes
    go, and its loss."""

    @property
    def host(self) -> str: ...
    @property
    def envelopes(self) -> dict[str, Envelope]: ...
    @property
    def mailboxes(self) -> Mailboxes: ...
    @property
    def on_signal(self) -> Callable[[Any, Signal], None]: ...
    @property
    def on_crash(self) -> Callable[[str, str, str], None] | None: ...

    def lose(self, error: BaseException) -> None:
        """The host is lost: fail everything in flight."""
        ...


class Answers:
    """The numbered answers of one connection of ``link`` (see the module docstring)."""

    def __init__(self, link: AnsweredLink) -> None:
        self._link = link
        self._expected = 0  # the next batch to apply
        self._held: dict[int, list[dict[str, Any]]] = {}

    def reset(self) -> None:
        """A new connection: its numbering starts again."""
        self._expected = 0
        self._held.clear()

    def receive(self, batches: Any) -> None:
        """Apply the host's numbered answer batches in order, whichever path brought them.

        Raises:
            InvalidMessage: ``batches`` is not a list (nothing of it was taken).
        """
        link = self._link
        if not isinstance(batches, list):
            raise InvalidMessage([("answers", "expected a list of numbered batches")])
        for batch in batches:
            seq = batch.get("s") if isinstance(batch, dict) else None
            items = batch.get("items") if isinstance(batch, dict) else None
            if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(items, list):
                log.error("host %r sent a malformed answer batch %.200r", link.host, batch)
                continue
            if seq < self._expected or seq in self._held:
                log.warning("host %r sent answer batch %d again; dropped", link.host, seq)
                continue
            self._held[seq] = items
        if len(self._held) > MAX_HELD_ANSWERS:
            link.lose(
                InvalidMessage(
                    [("answers", f"{len(self._held)} batches wait for batch {self._expected}")]
                )
            )
            return
        while self._expected in self._held:
            items = self._held.pop(self._expected)
            # Passed before its items are applied: whatever one of them raises, the
            # later batches are not held behind this one for good.
            self._expected += 1
            for item in items:
                try:
                    self._take(item)
                except (InvalidMessage, KeyError, TypeError, AttributeError, ValueError) as exc:
                    log.error("host %r sent a bad item %.200r: %s", link.host, item, exc)
                except Exception:  # a bug on this side: the other items are still applied
                    log.exception("host %r: could not apply item %.200r", link.host, item)

    def _take(self, item: Any) -> None:
        link = self._link
        if not isinstance(item, dict):
            raise InvalidMessage([("item", "expected an object")])
        kind = item.get("k")
        if kind == "signal":
            link.on_signal(link, structure(item.get("signal"), Signal))
            return
        if kind == "crashed":
            branch, error = item.get("b"), item.get("error")
            if link.on_crash is not None and isinstance(branch, str):
                link.on_crash(link.host, branch, error if isinstance(error, str) else "")
            return
        if kind not in _ANSWER_KINDS:
            raise InvalidMessage([("item.k", f"unknown kind {kind!r}")])
        envelope_id = item.get("id")
        envelope = link.envelopes.get(envelope_id) if isinstance(envelope_id, str) else None
        if envelope is None:
            # Answered already (refused here, or failed with the connection), or never sent.
            log.warning(
                "host %r answered %s for envelope %.80r, never sent or answered already",
                link.host,
                kind,
                envelope_id,
            )
            return
        try:
            self._answer(envelope, kind, item)
        except Exception as exc:
            # The envelope's own answer is unusable (whatever applying it raised): its
            # caller hears it, typed, instead of waiting for an answer that came.
            log.error("host %r sent a bad %s for %s: %r", link.host, kind, envelope.id, exc)
            link.envelopes.pop(envelope.id, None)
            if kind not in _FINAL_KINDS:  # nothing more comes for it either
                link.mailboxes.heard(envelope.branch, None, False, finished=True)
            problem = exc if isinstance(exc, InvalidMessage) else None
            envelope.refused(problem or InvalidMessage([(f"answer.{kind}", str(exc))]))

    def _answer(self, envelope: Envelope, kind: str, item: dict[str, Any]) -> None:
        envelopes = self._link.envelopes
        self._link.mailboxes.heard(
            envelope.branch,
            item.get("room"),
            kind in _QUEUED_KINDS and not envelope.acked,
            finished=kind in _FINAL_KINDS,
        )
        if item.get("dropped") is True:
            envelope.dropped()
        if kind == "ack":
            envelope.ack()
        elif kind == "start":
            envelope.ack()
            envelope.started(answer_turn(item))
        elif kind == "item":
            envelope.item(decode_value(item.get("value"), "item"))
        elif kind == "refused":
            del envelopes[envelope.id]
            envelope.refused(decode_error(item.get("error")))
        else:  # done
            turn = answer_turn(item)
            if "error" in item:
                outcome: tuple[Any, BaseException | None] = (None, decode_error(item["error"]))
            else:
                outcome = (decode_value(item.get("value")), None)
            del envelopes[envelope.id]
            if turn is not None and envelope.reply.turn_id is None:
                envelope.reply.turn_id = turn
            envelope.finish(*outcome)


def answer_turn(item: dict[str, Any]) -> UUID | None:
    """The turn id an answer names, if it names a well-formed one.

    Raises:
        InvalidMessage: it names something that is not a turn id.
    """
    turn = item.get("turn")
    if turn is None:
        return None
    if not isinstance(turn, str):
        raise InvalidMessage([("answer.turn", "expected a turn id")])
    try:
        return UUID(turn)
    except ValueError:
        raise InvalidMessage([("answer.turn", f"{turn[:80]!r} is not a turn id")]) from None


def described_branches(info: Any, host: str) -> list[dict[str, Any]]:
    """The well-formed branch descriptions of a host's ``hello`` (others are logged, dropped).

    Each is ``{"name": str, "id": a UUID string, "capacity": int >= 0}``.
    """
    branches = info.get("branches") if isinstance(info, dict) else None
    if not isinstance(branches, list):
        log.error("host %r described no branch list: %.200r", host, info)
        return []
    described = []
    for entry in branches:
        try:
            name, capacity = entry["name"], entry["capacity"]
            UUID(entry["id"])
            if not isinstance(name, str) or isinstance(capacity, bool) or capacity < 0:
                raise TypeError("bad name or capacity")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.error("host %r described a branch badly (%s): %.200r", host, exc, entry)
            continue
        described.append(entry)
    return described
