"""Durable branch conversations: projections, messages and the turn journal in SQLite."""

from .journal import StoredTurn
from .sqlite import SCHEMA_VERSION, BranchStore, StoredBranch

__all__ = ["SCHEMA_VERSION", "BranchStore", "StoredBranch", "StoredTurn"]
