"""Durable branch conversations: projections, messages, the turn and flow journals in SQLite."""

from ._tables import MAX_ROW_BYTES, MAX_SEQ
from .flows import StoredFlow, flow_key
from .journal import StoredTurn
from .sqlite import SCHEMA_VERSION, BranchStore, StoredBranch

__all__ = [
    "MAX_ROW_BYTES",
    "MAX_SEQ",
    "SCHEMA_VERSION",
    "BranchStore",
    "StoredBranch",
    "StoredFlow",
    "StoredTurn",
    "flow_key",
]
