"""Sessions and the branch store: restore conversations on spawn, persist as they grow,
and resume the turns a crash interrupted.

A session given a [`BranchStore`][pride.store.BranchStore] wires each member that has
a stable name (one given by code, so the same across process restarts):

* on spawn, a stored conversation with that name is restored into the branch
  (its id and messages; models, tools and providers are wired by code); the
  branch gets its turn journal (`pride.durable.journal`), with the unfinished
  turns the store holds for it;
* a branch the store does not hold yet is stored (whole) once it has a
  message to store: the end of a turn that recorded some, or a message
  recorded between turns. So a branch whose first turn fails (no API key, a
  provider down) leaves no empty conversation behind; a later turn that
  succeeds stores it. One the journal holds an unfinished turn of (a crash
  during its first turn) is stored at once, so that turn is resumed; so is
  one whose first turn stopped for approval (the turn waits in the store);
* every recorded message is queued for the store: at once between turns,
  and at the turn's end for the messages of a turn (so a commit made
  mid-turn, for the journal or for another branch, never stores half a turn:
  the stored conversation is always one of whole turns, and a turn that
  stops for approval leaves none of its messages behind); a history changed
  otherwise (cleared, system message replaced) is queued as a rewrite;
* every turn ends with one commit of what is queued (a turn barrier): its
  messages and its journal entry's end in one transaction, before its
  terminal signal and before its caller is answered, so a crash loses at
  most the turn in flight, and that one is in the journal;
* once a restored branch runs, each turn a crash interrupted is sent to it
  as a [`Resume`][pride.Resume] before any other work (or, by the branch's
  [`Durability`][pride.Durability] policy, abandoned); the session's
  ``on_resume`` handlers get the envelopes (`recover`).

This is also the API a host process uses to take over a store's branches
(a restarted Ray host): ``Session(store=path)``, spawn the branches by name,
and every unfinished turn is resumed, its result going to the ``on_resume``
handlers (with the ``tag`` its first sender gave it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any
from uuid import UUID

import attrs

from ..actors import Reply
from ..actors.turn import TurnState
from ..branch import Branch
from ..messages import Resume, RoledMessage
from ..store import BranchStore
from .commit import CommitBarrier
from .journal import BranchJournal, Durability

__all__ = ["Persistence", "journal_of"]

log = logging.getLogger("pride.session")


@attrs.frozen
class _Rewrite:
    """A history rewritten during a turn: its messages as they were then."""

    messages: list[RoledMessage]


class Persistence:
    """The wiring between one store and the members of one session."""

    def __init__(
        self, store: BranchStore, durability: Durability | None = None, *, label: str = "a session"
    ) -> None:
        self.store = store
        self.durability = durability if durability is not None else Durability()
        self.label = label
        """Who persists through it, for errors (``session 'name'``)."""
        self._wired: dict[Branch, tuple[Any, Any, Any]] = {}

    async def restore_or_register(
        self,
        branch: Branch,
        durability: Durability | None = None,
        *,
        activity: Callable[[], None] | None = None,
    ) -> bool:
        """Restore ``branch``'s conversation and unfinished turns from the store, and
        persist it from now on (a new branch once it has something to store).

        Returns True if a stored conversation was restored. Branches without
        a stable name are left alone (their names change between runs).
        ``activity`` is called at the end of each of its turns and ``Act``
        steps (a virtual branch's idle clock).

        Raises:
            StoreError: the store cannot be read, or another session persists
                a branch of that name through it (`BranchStore.claim`).
        """
        if not branch.stable_name or branch in self._wired:
            return False
        self.store.claim(branch.name, self, self.label)
        try:
            return await self._restore(branch, durability, activity)
        except BaseException:
            self.store.release(branch.name, self)
            raise

    async def _restore(
        self,
        branch: Branch,
        durability: Durability | None,
        activity: Callable[[], None] | None,
    ) -> bool:
        store = self.store
        stored_id, messages, unfinished = await store.restore(branch.name)
        stored = stored_id is not None
        journal = BranchJournal(branch.name, store, durability or self.durability)
        if stored_id is not None:
            branch.id = UUID(stored_id)
            branch.id_str = str(branch.id)
            branch.messages.clear(keep_system=False)
            for message in messages:
                branch.messages.append(message)
        for turn in unfinished:
            waiting = journal.adopt(turn)
            if waiting is not None and waiting.problem is not None:
                log.warning(
                    "branch %r: unfinished turn %s cannot be resumed (%s); it will be abandoned",
                    branch.name,
                    waiting.turn_id,
                    waiting.problem,
                )
        if stored:
            log.info(
                "restored branch %r: %d messages, %d unfinished turns",
                branch.name,
                len(messages),
                len(journal.waiting),
            )
        elif unfinished:  # a crash during its first turn: it exists from now on
            await store.save(branch)
        branch.actor.journal = journal
        self._wire(branch, stored=stored or bool(unfinished), activity=activity)
        return stored

    def recover(self, branch: Branch) -> list[Reply]:
        """Queue a ``Resume`` for each turn of ``branch`` a crash interrupted.

        Called once the branch's actor runs, before any other work can reach
        it. By the branch's policy the turn is resumed, or abandoned (so is a
        turn whose journal entry cannot be replayed). Returns the envelopes,
        each tagged as its turn's first envelope was; those the mailbox has no
        room for yet wait in line for it, in order, ahead of any later sender.
        """
        journal = journal_of(branch)
        if journal is None:
            return []
        replies = []
        for waiting in journal.interrupted():
            if waiting.command is None:
                command = Resume(waiting.turn_id, abandon=waiting.problem)
            elif journal.durability.resume == "abandon":
                reason = (
                    f"the process stopped during the turn, and branch {branch.name!r} abandons "
                    "such turns (Durability(resume='abandon'))"
                )
                command = Resume(waiting.turn_id, abandon=reason)
            else:
                command = Resume(waiting.turn_id)
            reply = Reply(branch, command, tag=waiting.tag)
            # In line for room when the mailbox is full (more turns than it holds):
            # nothing else is queued yet, and each of them is answered.
            branch.line_up(reply)
            log.info(
                "branch %r: %s turn %s",
                branch.name,
                "abandoning" if command.abandon else "resuming",
                waiting.turn_id,
            )
            replies.append(reply)
        return replies

    def _wire(self, branch: Branch, *, stored: bool, activity: Callable[[], None] | None) -> None:
        store = self.store
        held: list[RoledMessage | _Rewrite] = []  # the running turn's, until its end
        new = not stored  # not in the store yet: stored whole once it has something
        rewritten = False  # held has a _Rewrite

        def drain() -> None:
            nonlocal new, rewritten
            if new:
                new = False
                rewritten = False
                held.clear()
                store.queue_save(branch)  # its projection and every message so far
                return
            if not rewritten:  # the common case: the turn's messages, in one call
                store.append_all(branch.name, held)  # type: ignore[arg-type]
            else:
                rewritten = False
                for item in held:
                    if isinstance(item, _Rewrite):
                        store.rewrite(branch.name, item.messages)
                    else:
                        store.append(branch.name, item)
            held.clear()

        def persist(branch: Branch, message: RoledMessage) -> None:
            if branch.actor.turn is not None:
                held.append(message)
                return
            if new:
                drain()  # the message is in branch.messages already: it goes with them
                return
            if held:
                drain()
            store.append(branch.name, message)

        def rewrite(branch: Branch) -> None:
            nonlocal rewritten
            if branch.actor.turn is not None:
                held.append(_Rewrite(list(branch.messages)))
                rewritten = True
                return
            if new:
                drain()
                return
            held.clear()  # the whole history goes anyway
            rewritten = False
            store.rewrite(branch.name, list(branch.messages))

        def stage(state: TurnState | None) -> None:  # None: after an Act
            nonlocal new, rewritten
            if activity is not None:
                activity()
            if state is not None and state.suspended:
                held.clear()  # the turn was rolled back: its messages come again on resume
                rewritten = False
                if new:  # a turn of it waits in the store (for approval): it exists now
                    new = False
                    store.queue_save(branch)
            elif held:
                drain()

        # This branch's rows only: a commit that failed elsewhere fails the turns
        # whose rows it held, not this one's.
        after_commit: Callable[[Callable[[Any], None]], bool] = partial(
            store.after_commit, branch.name
        )
        if activity is not None:  # the idle clock restarts when the turn is answered too

            def after_commit(done: Callable[[Any], None]) -> bool:
                def committed(failure: Any) -> None:
                    activity()
                    done(failure)

                return store.after_commit(branch.name, committed)

        commit = CommitBarrier(stage, after_commit, partial(store.flush, branch.name))
        branch.add_message_listener(persist)
        branch.add_rewrite_listener(rewrite)
        branch.actor.add_turn_barrier(commit)
        self._wired[branch] = (persist, rewrite, commit)

    def check_rename(self, branch: Branch, name: str) -> None:
        """Refuse to rename a member this persists (``Branch.name`` asks, through
        its session, before the name changes).

        The store keeps the conversation, its next message number and its
        journaled turns under the branch's name, and the rows of a turn in
        flight are already queued (or being committed) under it: renamed, the
        branch's next turns would be written under the new name, onto another
        stored conversation of that name, and answered before their commit.

        Raises:
            ValueError: ``branch`` is persisted here and ``name`` is not its name.
        """
        if branch in self._wired and name != branch.name:
            raise ValueError(
                f"branch {branch.name!r} cannot be renamed {name!r}: it is stored under its "
                f"name in {self.store.path}; remove it from its session first (the store "
                "keeps the conversation under the old name) or give the name when it is built"
            )

    def unwire(self, branch: Branch) -> None:
        """Stop persisting ``branch`` (it left the session)."""
        listeners = self._wired.pop(branch, None)
        if listeners is None:
            return
        persist, rewrite, commit = listeners
        self.store.release(branch.name, self)
        branch.remove_message_listener(persist)
        branch.remove_rewrite_listener(rewrite)
        branch.actor.remove_turn_barrier(commit)
        journal = journal_of(branch)
        if journal is not None and journal.backend is self.store:
            # Its unfinished turns stay in the store; in memory they go with the store.
            branch.actor.journal = None


def journal_of(branch: Branch) -> BranchJournal | None:
    """The journal ``branch``'s actor keeps, if it keeps one.

    The actor knows its journal only by the protocol it needs
    (`pride.actors.journaling.BranchRecord`); pride's one journal class is
    `BranchJournal`, so this only tells the type checker what it is.
    """
    journal = branch.actor.journal
    assert journal is None or isinstance(journal, BranchJournal)
    return journal
