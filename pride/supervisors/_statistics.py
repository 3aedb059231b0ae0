"""A session's statistics: members, queued work, turns and restarts over its tree.

Read from the parts a session holds, never kept on the side: the members
and their mailboxes from its membership (and each child session's), the
turn counts from its usage account (members count their turns there as
they end, up the whole tree), the restart events from its supervisors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ..budget.accounts import Account
    from ._membership import Membership

__all__ = ["SessionStatistics", "statistics_of"]


@attrs.frozen
class SessionStatistics:
    """A snapshot of a session and every session below it (see
    [`Session.statistics`][pride.supervisors.session.Session.statistics]).

    Attributes:
        branches: member branches in the tree.
        running: those whose actor is serving.
        sessions: child sessions in the tree.
        queued: work envelopes waiting in the members' mailboxes.
        turns_done: turns that ended with ``RunEnd``.
        turns_failed: turns that ended with ``RunFailed`` (cancellations included).
        restarts: restart events performed (a one_for_all restart counts once).
        turns_suspended: runs of turns that stopped for approval (``RunSuspended``,
            not counted as failed).
        virtual_active: live virtual branches (of this session's kinds; they
            count among ``branches`` too).
        activations: virtual branches activated so far.
        passivations: virtual branches passivated so far.
        failed_activations: activations that failed (``ActivationFailed``).
        activation_time: seconds spent activating, over all ``activations``
            (their mean is ``activation_time / activations``).
    """

    branches: int
    running: int
    sessions: int
    queued: int
    turns_done: int
    turns_failed: int
    restarts: int
    turns_suspended: int = 0
    virtual_active: int = 0
    activations: int = 0
    passivations: int = 0
    failed_activations: int = 0
    activation_time: float = 0.0


def statistics_of(members: Membership, account: Account) -> SessionStatistics:
    """The statistics of the session whose membership and account these are
    (the virtual branches' figures: this session's kinds only)."""
    branches, running, sessions, queued = _tally(members)
    virtuals = members.virtuals
    return SessionStatistics(
        branches,
        running,
        sessions,
        queued,
        account.turns_done,
        account.turns_failed,
        members.restarts(),
        account.turns_suspended,
        virtual_active=virtuals.active if virtuals is not None else 0,
        activations=virtuals.activations if virtuals is not None else 0,
        passivations=virtuals.passivations if virtuals is not None else 0,
        failed_activations=virtuals.failed_activations if virtuals is not None else 0,
        activation_time=virtuals.activation_time if virtuals is not None else 0.0,
    )


def _tally(members: Membership) -> tuple[int, int, int, int]:
    """Branches, running actors, child sessions and queued work, over the tree."""
    branches = running = sessions = queued = 0
    for branch in members.branches:
        branches += 1
        running += branch.running
        mailbox = branch.mailbox_statistics()
        queued += mailbox.queued if mailbox is not None and not mailbox.closed else 0
    for session in members.sessions:
        below = members.subtree(session)
        if below is None:
            continue
        sub_branches, sub_running, sub_sessions, sub_queued = _tally(below)
        branches += sub_branches
        running += sub_running
        sessions += 1 + sub_sessions
        queued += sub_queued
    return branches, running, sessions, queued
