"""Durable branch conversations: projections and messages in SQLite."""

from .sqlite import SCHEMA_VERSION, BranchStore, StoredBranch

__all__ = ["SCHEMA_VERSION", "BranchStore", "StoredBranch"]
