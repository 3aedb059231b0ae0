"""The host's envelope journal: ids seen before are reported, across batches and reopenings."""

from __future__ import annotations

import gc
import sqlite3
from pathlib import Path

import psutil
import pytest

from pride import StoreError
from pride.cluster.host.journal import EnvelopeJournal


def test_ids_recorded_before_are_reported_and_new_ones_are_not(tmp_path: Path) -> None:
    journal = EnvelopeJournal(tmp_path / "journal.db")
    first = [(f"e{i}", "b") for i in range(1200)]  # more than one lookup statement holds
    assert journal.record(first) == set()
    again = [("e5", "b"), ("new", "b"), ("e1100", "b")]
    assert journal.record(again) == {"e5", "e1100"}
    journal.note_turns([("new", "turn-1")])
    journal.close()
    reopened = EnvelopeJournal(tmp_path / "journal.db")  # a restarted host
    assert reopened.record([("new", "b"), ("e0", "b"), ("fresh", "b")]) == {"new", "e0"}
    assert reopened.turn_of("new") == "turn-1"
    assert reopened.turn_of("fresh") is None
    reopened.close()


def test_a_lone_envelope_and_a_batch_with_a_replay_are_recorded_once(tmp_path: Path) -> None:
    # One ask at a time takes the one-statement path; a batch holding a replayed id
    # is rolled back and done again with a lookup: both must leave every id recorded
    # once, and what was recorded before (its turn id) as it was.
    journal = EnvelopeJournal(tmp_path / "journal.db")
    assert journal.record([("lone", "b")]) == set()
    assert journal.record([("lone", "b")]) == {"lone"}
    journal.note_turns([("lone", "turn-lone")])
    assert journal.record([("a", "b"), ("lone", "b"), ("c", "b")]) == {"lone"}
    assert journal.turn_of("lone") == "turn-lone"
    assert journal.record([("a", "b")]) == {"a"}
    assert journal.record([("c", "b"), ("d", "b")]) == {"c"}
    assert journal.record([("twice", "b"), ("twice", "b")]) == set()  # the caller's to notice
    assert journal.record([("twice", "b"), ("e", "b")]) == {"twice"}
    journal.close()
    reopened = EnvelopeJournal(tmp_path / "journal.db")
    ids = ["lone", "a", "c", "d", "twice", "e"]
    assert reopened.record([(i, "b") for i in ids]) == set(ids)
    reopened.close()


def test_a_foreign_file_is_refused_not_adopted(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO journal_meta VALUES ('application', 'something-else');"
    )
    db.close()
    with pytest.raises(StoreError, match="not a pride envelope journal"):
        EnvelopeJournal(path)
    (tmp_path / "garbage.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError):
        EnvelopeJournal(tmp_path / "garbage.db")


@pytest.mark.parametrize("damage", ["not sqlite", "a truncated journal"])
def test_a_journal_file_that_is_refused_is_not_left_open(tmp_path: Path, damage: str) -> None:
    """The connection to a file the journal refuses is closed before the StoreError: a
    connection is freed only by the garbage collector (it is in a reference cycle with
    its statement cache), so one left to it kept the damaged file open until a
    collection (Python 3.13 reports it, as a ResourceWarning)."""
    path = tmp_path / "journal.db"
    if damage == "not sqlite":
        path.write_bytes(b"this is not sqlite" * 100)
    else:
        journal = EnvelopeJournal(path)
        journal.record([("e1", "b")])
        journal.close()
        path.write_bytes(path.read_bytes()[:200])
    gc.disable()  # the collector would close it, at a time of its own
    try:
        with pytest.raises(StoreError, match="envelope journal"):
            EnvelopeJournal(path)
        assert str(path) not in {opened.path for opened in psutil.Process().open_files()}
    finally:
        gc.enable()
