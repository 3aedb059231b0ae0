"""Virtual branches: every ``kind/key`` name addressable, only the active ones in memory.

The model is in docs/virtual.md; the invariants this module keeps:

* one activation per name at a time; envelopes for a name that is not live
  wait in its `Activation` queue and reach the mailbox in arrival order;
  a failed activation answers them all (``ActivationFailed``), keeping nothing;
* a branch is passivated only when idle: no turn, empty mailbox, nothing
  waiting for a commit, for ``passivate_after`` since its last activity (the
  last envelope routed to it by name, the end of its last turn, the commit
  that answered it); found busy at its deadline, it gets a fresh one;
* with ``max_active``, a slot per live branch: an activation takes a free one,
  or the least recently used idle branch's, or waits for one in arrival order;
* a crash (or a sibling's restart) passivates: the work queued behind it goes
  to the next activation, afresh from the store; a shutdown passivates all;
* a passivated name holds nothing here: no record, no task frame, no closure.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import trio

from ..actors import ask
from ..actors.reply import Reply
from ..actors.turn import await_bounded
from ..actors.waits import serving_branch
from ..branch import Branch
from ..errors import (
    ActivationFailed,
    BranchClosed,
    MailboxFull,
    PrideError,
    ReentrancyError,
    StoreError,
    UnknownBranch,
    VirtualKindError,
)
from ..messages import Act, BranchActivated, BranchPassivated
from ._virtual_kinds import (
    DEFAULT_PASSIVATE_AFTER,
    MAX_KEY_LENGTH,
    PENDING_LIMIT,
    Activation,
    Kind,
    Live,
    Members,
    PassivationReason,
    VirtualRef,
    make_kind,
)

if TYPE_CHECKING:
    from ._child import Child

__all__ = ["DEFAULT_PASSIVATE_AFTER", "VirtualRef", "Virtuals"]

log = logging.getLogger("pride.session")


class Virtuals:
    """A session's kinds of virtual branches, their live branches and activations.

    Args:
        members: the session's membership (adopts and removes the branches).
    """

    def __init__(self, members: Members) -> None:
        self._members = members
        self._kinds: dict[str, Kind] = {}
        self._activating: dict[str, Activation] = {}
        self._passivating: dict[str, trio.Event] = {}
        self._wake = trio.Event()  # the reaper's: a deadline may have moved earlier
        self._reaper: trio.Nursery | None = None  # the nursery the reaper runs in
        self._closing = False  # set by Session.stop
        self.activations = 0
        self.passivations = 0
        self.failed_activations = 0
        self.activation_time = 0.0

    @property
    def closing(self) -> bool:
        """True once the session is stopping (by its own stop, a parent's or a
        failure): nothing activates any more, and queued work is not handed on."""
        return self._closing or self._members.supervisor.stopping

    @closing.setter
    def closing(self, value: bool) -> None:
        self._closing = value

    # ------------------------------------------------------------ kinds

    @property
    def active(self) -> int:
        """Live virtual branches, over every kind."""
        return sum(len(kind.live) for kind in self._kinds.values())

    def register(
        self,
        kind: str,
        factory: Callable[[str], Any],
        *,
        passivate_after: float,
        max_active: int | None,
    ) -> None:
        """Register ``kind`` (see ``Session.virtual``) and start the reaper.

        Raises:
            VirtualKindError: a bad name or option, or the kind is taken.
        """
        members = self._members
        if members.persistence is None:
            raise VirtualKindError(
                f"session {members.name!r} has no store, and virtual branches live in one: "
                "give the session a store, Session(store='conversations.db')"
            )
        made = make_kind(kind, factory, passivate_after, max_active)  # checks the name first
        if kind in self._kinds:
            raise VirtualKindError(f"session {members.name!r} already has a kind {kind!r}")
        self._kinds[kind] = made
        self._wake.set()
        self._ensure_reaper()

    def _ensure_reaper(self) -> None:
        """Run the reaper in the supervisor's nursery of this run (a restarted
        session has a new one, and its old reaper ended with the old)."""
        nursery = self._members.supervisor.nursery
        if nursery is not None and self._reaper is not nursery:
            self._reaper = nursery
            nursery.start_soon(self._reap, name=f"virtual branches of {self._members.name}")

    def _kind(self, name: str) -> Kind | None:
        """The registered kind of ``name`` (whatever its key), or None."""
        kind_name, slash, _ = name.partition("/")
        return self._kinds.get(kind_name) if slash else None

    def kind_of(self, name: Any) -> tuple[Kind, str] | None:
        """The registered kind ``name`` belongs to and its key, or None.

        Raises:
            UnknownBranch: the name has a registered kind but its key is empty,
                too long or holds a control character (it designates nothing).
        """
        if not self._kinds or not isinstance(name, str):
            return None
        kind_name, slash, key = name.partition("/")
        kind = self._kinds.get(kind_name) if slash else None
        if kind is None:
            return None
        if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
            raise UnknownBranch(
                name,
                f"session {self._members.name!r} (a key is 1 to {MAX_KEY_LENGTH} "
                "printable characters)",
            )
        return kind, key

    def live_branch(self, name: str) -> Branch | None:
        """The live branch of ``name`` (not one being passivated), if any."""
        kind = self._kind(name) if self._kinds else None
        live = kind.live.get(name) if kind is not None else None
        return live.branch if live is not None else None

    def claims(self, name: str) -> bool:
        """True when ``name`` has a registered kind (only activation may use it)."""
        return bool(self._kinds) and self._kind(name) is not None

    def route(self, name: str) -> Branch | VirtualRef | None:
        """Where a send to ``name`` goes: its live branch (its use noted), else
        its `VirtualRef`; None when ``name`` is not virtual.

        Raises:
            UnknownBranch: the name has a registered kind but a malformed key.
        """
        found = self.kind_of(name)
        if found is None:
            return None
        kind = found[0]
        live = kind.live.get(name)
        if live is None or name in self._activating:
            return VirtualRef(self, name)
        self._touch(kind, name, live)
        return live.branch

    def ref(self, name: str) -> VirtualRef | None:
        """The `VirtualRef` of ``name``, if it is virtual here."""
        return VirtualRef(self, name) if self.kind_of(name) is not None else None

    def _busy(self, name: str, live: Live) -> bool:
        """Busy: a turn runs (or a stream is open), work is queued, or rows of it
        wait for a commit (its last turn is not answered yet)."""
        persistence = self._members.persistence
        return live.busy() or (persistence is not None and persistence.store.holds(name))

    def _touch(self, kind: Kind, name: str, live: Live) -> None:
        live.last_active = trio.current_time()
        kind.live.move_to_end(name)

    # ------------------------------------------------------------ delivery

    async def deliver(self, name: str, envelope: Reply) -> None:
        """See `VirtualRef.deliver`."""
        while True:
            routed = self.route(name)
            if isinstance(routed, Branch):
                envelope.branch = routed
                await routed.deliver(envelope)
                return
            activation = self._queue(name)
            if len(activation.pending) < PENDING_LIMIT:
                activation.pending.append(envelope)
                return
            await activation.done.wait()  # full: wait for room in the branch's mailbox

    async def activate(self, name: str) -> Branch:
        """The live branch of ``name``, activated first if it is not live.

        Raises:
            UnknownBranch: ``name`` is not of a registered kind.
            ActivationFailed: the activation failed.
            BranchClosed: the session is stopping.
        """
        routed = self.route(name)
        if routed is None:
            raise UnknownBranch(name, f"session {self._members.name!r} (no such virtual kind)")
        if isinstance(routed, Branch):
            await trio.lowlevel.checkpoint()
            return routed
        activation = self._queue(name)
        await activation.done.wait()
        if activation.branch is None:
            assert activation.error is not None
            raise activation.error
        return activation.branch

    def deliver_nowait(self, name: str, envelope: Reply) -> None:
        """See `VirtualRef.deliver_nowait`."""
        routed = self.route(name)
        if isinstance(routed, Branch):
            envelope.branch = routed
            routed.deliver_nowait(envelope)
            return
        activation = self._activating.get(name)
        if activation is not None and len(activation.pending) >= PENDING_LIMIT:
            raise MailboxFull(name, PENDING_LIMIT)
        self._queue(name).pending.append(envelope)

    def _queue(self, name: str) -> Activation:
        """The activation of ``name`` under way, or a new one (its task started)."""
        activation = self._activating.get(name)
        if activation is not None:
            return activation
        if self.closing:
            raise BranchClosed(name, f"session {self._members.name!r} is stopping")
        nursery = self._members.supervisor.nursery
        if nursery is None:
            raise BranchClosed(name, f"session {self._members.name!r} is not running")
        found = self.kind_of(name)
        assert found is not None
        self._ensure_reaper()
        activation = self._activating[name] = Activation()
        nursery.start_soon(self._activate, found[0], found[1], name, activation)
        return activation

    # ------------------------------------------------------------ activation

    async def _activate(self, kind: Kind, key: str, name: str, activation: Activation) -> None:
        """Activate ``name`` and hand it the envelopes waiting, in order."""
        started = trio.current_time()
        branch: Branch | None = None
        slot = False
        try:
            passivating = self._passivating.get(name)
            if passivating is not None:  # its last life ends first (its rows flushed)
                await passivating.wait()
            await self._take_slot(kind)
            slot = True
            branch, restored = await self._start(kind, key, name)
        except Exception as exc:
            if slot:
                kind.release()
            self.failed_activations += 1
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("virtual branch %r could not be activated: %s", name, reason)
            error = ActivationFailed(name, reason)
            error.__cause__ = exc
            self._fail_pending(name, activation, error)
            return
        except BaseException:  # cancelled: the session is going away
            if slot:
                kind.release()
            self._fail_pending(
                name, activation, BranchClosed(name, f"session {self._members.name!r} stopped")
            )
            raise
        elapsed = trio.current_time() - started
        self.activations += 1
        self.activation_time += elapsed
        kind.live[name] = Live(branch, trio.current_time())
        if len(kind.live) == 1:
            self._wake.set()  # the reaper had nothing of this kind to wait for
        try:
            while activation.pending:  # new arrivals queue behind: mailbox order holds
                envelope = activation.pending.popleft()
                if not envelope.done:
                    envelope.branch = branch
                    try:
                        await branch.deliver(envelope)
                    except PrideError as exc:  # it stopped meanwhile (a crash)
                        envelope.fail(exc)
        finally:
            activation.branch = branch
            self._fail_pending(name, activation, BranchClosed(name, "its activation ended"))
        await self._announce(
            BranchActivated(
                branch_id=branch.id, branch_name=name, restored=restored, elapsed=elapsed
            )
        )

    def _fail_pending(self, name: str, activation: Activation, error: Exception) -> None:
        if self._activating.get(name) is activation:
            del self._activating[name]
        if not activation.done.is_set():
            activation.error = error
            activation.done.set()
        while activation.pending:
            envelope = activation.pending.popleft()
            if not envelope.done:
                envelope.fail(error)

    async def _start(self, kind: Kind, key: str, name: str) -> tuple[Branch, bool]:
        """Build ``name``'s branch with the factory, restore it and start it."""
        built = await kind.build(key)
        if self.closing:
            raise BranchClosed(name, f"session {self._members.name!r} is stopping")
        built.name = name
        built.stable_name = True  # named by code: the store keys its conversation on it
        touch = self._activity(kind, name)
        restored = await self._members.adopt([built], "temporary", activity=touch)
        return built, restored

    def _activity(self, kind: Kind, name: str) -> Callable[[], None]:
        """What the branch's commit barrier calls at the end of each turn and Act."""

        def touch() -> None:
            live = kind.live.get(name)
            if live is None:
                return
            self._touch(kind, name, live)
            if kind.starved():  # activations wait for a slot: this one may make room
                nursery = self._members.supervisor.nursery
                if nursery is not None and not self.closing:
                    nursery.start_soon(self._offer, kind, name)

        return touch

    async def _take_slot(self, kind: Kind) -> None:
        """Take one of ``kind``'s ``max_active`` slots for an activation: a free one,
        else the slot of the least recently used idle branch (passivated for it),
        else wait, in arrival order, for a branch to become idle or go."""
        slots = kind.slots
        if slots is None:
            return
        while True:
            try:
                slots.acquire_nowait()
                return
            except trio.WouldBlock:
                pass
            victim = self._idle_victim(kind)
            if victim is None:  # every live one is busy: wait for one to be done
                await slots.acquire()
                return
            await self.passivate(victim, "max_active")  # frees a slot (for the first waiting)

    async def _offer(self, kind: Kind, name: str) -> None:
        """Passivate ``name`` for a waiting activation if it is idle once the turn
        that just ended is answered (its commit's bookkeeping done)."""
        await trio.lowlevel.checkpoint()
        live = kind.live.get(name)
        if live is None or not kind.starved() or self.closing:
            return
        if name not in self._activating and not self._busy(name, live):
            await self.passivate(name, "max_active")

    def _idle_victim(self, kind: Kind) -> str | None:
        """The least recently used idle live branch of ``kind``, if any."""
        for name, live in kind.live.items():
            if name not in self._activating and not self._busy(name, live):
                return name
        return None

    # ------------------------------------------------------------ passivation

    async def passivate(self, name: str, reason: PassivationReason = "manual") -> bool:
        """Passivate ``name`` if it is live; return whether it was.

        ``manual``: its queued work is served first (an empty ``Act`` waits
        behind it), and new envelopes wait for the passivation to end (then
        activate it again). The others only pick idle branches.
        """
        found = self.kind_of(name)
        if found is None:
            raise UnknownBranch(name, f"session {self._members.name!r} (no such virtual kind)")
        kind = found[0]
        ongoing = self._passivating.get(name)
        if ongoing is not None:
            await ongoing.wait()
            return False
        live = kind.live.get(name)
        if live is None:
            await trio.lowlevel.checkpoint()
            return False
        if serving_branch() is live.branch:  # from its own turn: it would wait on itself
            raise ReentrancyError([name, name])
        del kind.live[name]
        branch = live.branch
        with self._passivation(name):
            try:
                if reason == "manual":
                    # What was queued before the passivation is served first (closed
                    # meanwhile: the remove below finds it stopped).
                    with contextlib.suppress(PrideError):
                        await ask(branch, Act(()))
                await self._members.remove(branch)
                await self._flush(name)
            finally:
                kind.release()
        self.passivations += 1
        await self._announce(BranchPassivated(branch_id=branch.id, branch_name=name, reason=reason))
        return True

    async def stopped(self, child: Child, reason: str) -> None:
        """The supervisor stopped ``child`` (a shutdown, a crash, a sibling's restart,
        a ``Stop`` someone sent): if it is a live virtual branch, it is passivated."""
        branch = child.actor
        if not isinstance(branch, Branch) or self.live_branch(branch.name) is not branch:
            return
        kind = self._kind(branch.name)
        assert kind is not None
        name = branch.name
        del kind.live[name]
        kind.release()
        # Work queued behind the crash (or a sibling's restart) goes to the next
        # activation, in order; at shutdown it is answered BranchClosed.
        queued = [] if self.closing else branch.actor.hand_over(branch, "it was passivated")
        members = self._members
        members.release(child)
        if child in members.supervisor.children:
            members.supervisor.children.remove(child)
        with self._passivation(name):  # the next activation waits for its commit
            # Queued now, before the commit below lets other tasks run: whatever is
            # sent from now on queues behind it, as it would have behind the crash.
            for envelope in queued:
                try:
                    self.deliver_nowait(name, envelope)
                except PrideError as exc:  # its queue is full, or the session stopped
                    envelope.fail(exc)
            await self._flush(name)
        self.passivations += 1
        why: PassivationReason = "crash" if reason == "crash" else "shutdown"
        await self._announce(BranchPassivated(branch_id=branch.id, branch_name=name, reason=why))

    @contextlib.contextmanager
    def _passivation(self, name: str) -> Iterator[None]:
        """``name`` is being passivated for the block: an activation of it, and
        another passivation, wait for the block's end (its rows committed)."""
        done = self._passivating[name] = trio.Event()
        try:
            yield
        finally:
            del self._passivating[name]
            done.set()

    async def _flush(self, name: str) -> None:
        """Commit what ``name`` still has queued, and let the store forget it."""
        persistence = self._members.persistence
        if persistence is None:
            return
        try:
            await persistence.store.flush(name)
        except StoreError as exc:  # the rows stay queued, retried by the next commit
            log.error("virtual branch %r: passivated with rows not yet stored: %s", name, exc)
            return
        persistence.store.forget(name)

    async def _reap(self) -> None:
        """Passivate idle branches as their deadlines come, for the session's life.

        It holds no branch while it waits (a passivated one must be unreachable):
        the deadline and the names are found by helpers that return.
        """
        while True:
            self._wake = trio.Event()
            with trio.move_on_at(
                min((k.deadline() for k in self._kinds.values()), default=math.inf)
            ):
                await self._wake.wait()
            if self.closing:
                return
            for kind in list(self._kinds.values()):
                while name := kind.next_expired(trio.current_time(), self._unavailable):
                    await self.passivate(name, "idle")
                    if self._closed():  # (a call: mypy would narrow the property for good)
                        return

    def _unavailable(self, name: str, live: Live) -> bool:
        return name in self._activating or self._busy(name, live)

    def _closed(self) -> bool:
        return self.closing

    async def _announce(self, signal: Any) -> None:
        pending = self._members.observer.dispatch(signal)
        if pending is not None:
            await await_bounded(pending, f"subscribers of {type(signal).__name__}", log)
