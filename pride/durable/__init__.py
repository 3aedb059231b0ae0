"""Durable turns: the turn journal, the commit a turn is handed over to, and a
session's wiring of its members to a store.

A branch's turns are journaled step by step (`pride.durable.journal`, its
stored form `pride.durable.records`) so that a turn stopped for approval, or
cut by a crash, runs again without repeating a step; a branch with a store
ends each turn with a commit that answers its caller once the turn is
durable (`pride.durable.commit`); a session gives each member with a stable
name its journal, its restored conversation and that commit
(`pride.durable.persistence`), and its waiting turns are found and resolved
(`pride.durable.approvals`). The actor runtime knows none of these classes:
it declares what it needs of them (`pride.actors.journaling`,
`pride.actors.actor.CommitHandover`), and this package implements it.
"""

from ..actors.journaling import install_journals
from .commit import CommitBarrier
from .journal import BranchJournal, Durability, JournalBackend, JournalRun
from .persistence import Persistence, journal_of
from .records import StepRecord, WaitingTurn

# A branch that may stop for approval without a store keeps its journal in memory.
install_journals(BranchJournal)

__all__ = [
    "BranchJournal",
    "CommitBarrier",
    "Durability",
    "JournalBackend",
    "JournalRun",
    "Persistence",
    "StepRecord",
    "WaitingTurn",
    "journal_of",
]
