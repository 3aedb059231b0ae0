"""What a store reads of conversations: the branches it holds, a page of their names,
one branch's projection and messages, and what restoring a branch needs.

`BranchStore` runs each read in one read transaction on its read connection
(see `pride.store.sqlite`); the SQL is in `pride.store._tables`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import UUID

import attrs

from ..errors import InvalidMessage, StoreError
from ..messages import RoledMessage, structure
from ..messages.codec import parse_json
from ._bounds import RowTooLarge, unread
from ._tables import (
    check_seq,
    list_branches,
    list_names,
    load_branch,
    load_conversation,
    load_restore,
    turn_branch,
)
from .journal import StoredTurn

__all__ = ["Reads", "StoredBranch"]


@attrs.frozen
class StoredBranch:
    """One stored branch as ``pride inspect`` lists it.

    ``updated_at`` is when the branch was last stored or its rows committed, to
    within a second: a commit moves it only once it is that old."""

    name: str
    branch_id: str
    message_count: int
    updated_at: float


class Reads:
    """The conversation-reading half of [`BranchStore`][pride.store.BranchStore] (a base class)."""

    path: Path
    max_row_bytes: int
    _next_seq: dict[str, int]
    _writer: Any

    async def _read(self, what: str, function: Any, *args: Any) -> Any:
        raise NotImplementedError

    async def flush(self, branch_name: str | None = None) -> None:
        raise NotImplementedError

    async def branches(self) -> list[StoredBranch]:
        """Every stored branch, by name."""
        rows = await self._read("listing the branches of", list_branches)
        return [StoredBranch(*row) for row in rows]

    async def names(
        self, prefix: str = "", *, after: str | None = None, limit: int = 100
    ) -> list[str]:
        """A page of the stored branch names starting with ``prefix``, in name order:
        the first ``limit`` after ``after`` (a name of the previous page; None: from
        the start). One range query on the name index, however many are stored.

        Raises:
            ValueError: ``limit`` is not a positive int.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        low = prefix if after is None or after < prefix else after
        names: list[str] = await self._read(
            "listing the branch names of", list_names, prefix, low, after is not None, limit
        )
        return names

    async def turn_holder(self, turn_id: str) -> str | None:
        """The name of the branch whose unfinished turn ``turn_id`` is, or None."""
        found: str | None = await self._read(
            "reading the turn journal of", turn_branch, turn_id, self.max_row_bytes
        )
        return found

    async def load(self, name: str) -> dict[str, Any] | None:
        """The stored projection of ``name`` with its messages, or None.

        The result has the ``to_dict`` shape (``messages`` as collections and
        progression) and can be passed to ``Branch.from_dict``.

        Raises:
            StoreError: a stored row does not read back (a damaged file).
        """
        found = await self._rows(name, load_branch)
        if found is None:
            return None
        header, rows = found
        projection = self._parse(name, "its projection", header)
        if not isinstance(projection, dict):
            raise StoreError(f"{self.path}: the projection of branch {name!r} is not an object")
        collections = [self._parse(name, f"message row {seq}", data) for seq, data in rows]
        try:
            order = [item["id"] for item in collections]
        except (TypeError, KeyError):
            raise StoreError(f"{self.path}: a message of branch {name!r} has no id") from None
        self._distinct(name, [seq for seq, _ in rows], [_id_key(key) for key in order])
        projection["messages"] = {"collections": collections, "progression": {"order": order}}
        return projection

    async def restore(self, name: str) -> tuple[str | None, list[RoledMessage], list[StoredTurn]]:
        """What restoring ``name`` needs, read in one snapshot (one trip to a worker
        thread): its stored branch id (None: not stored), its messages in order,
        and its unfinished turns. A stored branch is registered too (`register`),
        unless the store is read-only; what this store still has queued of
        ``name`` is committed first, so that it is read back, and numbered
        after (a branch spawned again while its last rows waited for a commit).

        Raises:
            StoreError: a stored row does not read back (a damaged file), or
                the commit of what was queued of ``name`` failed.
        """
        if self._writer is not None:
            await self.flush(name)
        branch_id, rows, turns = await self._rows(name, load_restore)
        if branch_id is not None and not _is_uuid(branch_id):
            raise StoreError(f"{self.path}: the id of branch {name!r} is not a UUID")
        messages = [self._message(name, seq, data) for seq, data in rows]
        self._distinct(name, [seq for seq, _ in rows], [message.id for message in messages])
        if branch_id is not None and self._writer is not None:
            self._next_seq[name] = rows[-1][0] + 1 if rows else 0
        return branch_id, messages, turns

    async def _rows(self, name: str, function: Any) -> Any:
        """``function(db, name, max_row_bytes)`` read in one snapshot; a row over the
        bound is refused with a `StoreError` naming it, its size and the fix."""
        try:
            return await self._read(
                f"reading branch {name!r} from", function, name, self.max_row_bytes
            )
        except RowTooLarge as exc:
            what = f"{exc.what} of branch {name!r}"
            raise StoreError(
                f"{self.path}: {unread(what, exc.size, self.max_row_bytes)}, or delete the branch"
            ) from None

    def _message(self, name: str, seq: Any, data: Any) -> RoledMessage:
        if not isinstance(data, str) or not isinstance(seq, int):
            raise StoreError(f"{self.path}: message row {seq} of branch {name!r} is damaged")
        check_seq(self.path, name, seq)
        try:
            message: RoledMessage = structure(parse_json(data), RoledMessage)
        except InvalidMessage as exc:
            raise StoreError(
                f"{self.path}: message row {seq} of branch {name!r} does not read back: {exc}"
            ) from None
        return message

    async def load_messages(self, name: str) -> list[RoledMessage]:
        """The stored messages of ``name``, in order (empty if unknown).

        Raises:
            StoreError: a stored row is not a message (a damaged file).
        """
        found = await self._rows(name, load_conversation)
        if found is None:
            return []
        messages: list[RoledMessage] = []
        for seq, data in found[1]:
            try:
                messages.append(structure(parse_json(data), RoledMessage))
            except InvalidMessage as exc:
                raise StoreError(
                    f"{self.path}: message row {seq} of branch {name!r} does not read back: {exc}"
                ) from None
        self._distinct(name, [seq for seq, _ in found[1]], [message.id for message in messages])
        return messages

    def _distinct(self, name: str, seqs: list[Any], ids: list[Any]) -> None:
        """Refuse a conversation holding two messages with one id (``seqs[i]`` is the
        row of ``ids[i]``): ``Branch.from_dict`` refuses it, and a branch restored
        with it would serve the message twice and no longer load its own projection.

        Raises:
            StoreError: naming the store, the branch and both rows.
        """
        if len(set(ids)) == len(ids):  # the common case: one pass, no lookups
            return
        first: dict[Any, Any] = {}
        for seq, key in zip(seqs, ids, strict=True):
            if key in first:
                raise StoreError(
                    f"{self.path}: message rows {first[key]} and {seq} of branch {name!r} "
                    f"hold one message id ({key}): the file was altered or damaged; save the "
                    "branch again from a good copy, or delete it"
                )
            first[key] = seq

    def _parse(self, name: str, what: str, text: Any) -> Any:
        if not isinstance(text, str):
            raise StoreError(f"{self.path}: {what} of branch {name!r} is not text")
        try:
            return parse_json(text)
        except InvalidMessage as exc:
            raise StoreError(
                f"{self.path}: {what} of branch {name!r} does not read back: {exc}"
            ) from None


def _id_key(value: Any) -> Any:
    """A stored message id as ``from_dict`` compares it: its UUID when it is one."""
    try:
        return UUID(value)
    except (TypeError, ValueError, AttributeError):
        return value if isinstance(value, str | int | float | bool | None) else repr(value)


def _is_uuid(value: Any) -> bool:
    try:
        UUID(value)
    except (TypeError, ValueError, AttributeError):
        return False
    return True
