"""The one bound on a stored row (``BranchStore(max_row_bytes=...)``), written and read.

Every row pride stores is JSON text it made: a message, a branch's projection,
a turn-journal entry or step, a flow's plan or event. One runaway value (a
tool returning hundreds of megabytes) would make one runaway row: written
whole, and read whole by every later load. So every row is measured against
one bound, here, whatever its table:

* **writing**: `oversize` measures the text about to be queued (or committed)
  and `refusal` is the [`StoreError`][pride.StoreError] that says so when it is
  over the bound; the row is not written, and the flush of whoever queued it
  fails with that error (`pride.store._batch`);
* **reading**: a query selects `size_of` a column (SQLite's ``length()`` of
  its bytes) and the column through `bounded`, which reads NULL in its place
  when it is over the bound: the text of a row over the bound never reaches
  the process. `unread` says what was not read, and the fix.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import StoreError

__all__ = ["RowTooLarge", "bounded", "cut", "oversize", "refusal", "size_of", "unread"]


def oversize(bound: int, *texts: str | None) -> int:
    """The size in UTF-8 bytes of ``texts`` (every column of one row, None for NULL,
    as the read side's `size_of` sums them) when together they are over ``bound``,
    else 0 (the common case, measured without encoding anything). A row whose
    characters alone pass ``bound`` is reported at its length in characters (a
    lower bound of its bytes: a runaway row is not encoded to be measured)."""
    # The short cuts of `utf8_size` hold for the row, not for each column: columns
    # each short enough to be taken at their length can be over the bound together.
    present = [text for text in texts if text is not None]
    length = sum(map(len, present))
    if length > bound:
        return length  # at least this many bytes: over, however they encode
    if length * 4 <= bound:
        return 0  # at most four bytes a character: under
    size = sum(len(text.encode("utf-8", errors="surrogatepass")) for text in present)
    return size if size > bound else 0


def refusal(path: Path, what: str, size: int, bound: int) -> StoreError:
    """The error refusing to store ``what``, a row of ``size`` bytes (`oversize`), in the
    store at ``path``: it names the row, its size, the bound and the fix."""
    return StoreError(
        f"{what} is at least {size:,} bytes as a row, more than max_row_bytes ({bound:,}) "
        f"of {path}: it is not stored; bound what the tool or model returns, or open the "
        "store with a larger BranchStore(path, max_row_bytes=...)"
    )


def size_of(column: str) -> str:
    """SQL: the size of ``column`` in bytes (0 for NULL), measured by SQLite."""
    return f"COALESCE(length(CAST({column} AS BLOB)), 0)"


def bounded(column: str, size: str | None = None, bound: str = "?") -> str:
    """SQL: ``column``, or NULL when ``size`` (SQL; default `size_of` the column) is
    over ``bound`` (SQL; default the query's next ``?`` parameter)."""
    return f"CASE WHEN {size or size_of(column)} > {bound} THEN NULL ELSE {column} END"


def cut(column: str, limit: int) -> str:
    """SQL: ``column``, or its first hundred characters and an ellipsis when it is over
    ``limit`` bytes (what an error may quote of a value it refuses, never all of it)."""
    shown = f"substr({column}, 1, 100) || '…'"
    return f"CASE WHEN {size_of(column)} > {limit} THEN {shown} ELSE {column} END"


def unread(what: str, size: int, bound: int) -> str:
    """What to say of ``what``, a stored row of ``size`` bytes over ``bound``, not read."""
    return (
        f"{what} holds {size:,} bytes, more than max_row_bytes ({bound:,}): it is not "
        "read; open the store with a larger BranchStore(path, max_row_bytes=...) to read it"
    )


class RowTooLarge(Exception):
    """A stored row of a branch over the reader's bound: ``what`` it is (``"message row
    3"``) and its ``size`` (bytes)."""

    def __init__(self, what: str, size: int) -> None:
        super().__init__(what, size)
        self.what = what
        self.size = size
