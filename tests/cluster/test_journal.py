"""The host's envelope journal: ids seen before are reported, across batches and reopenings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pride import StoreError
from pride.cluster._journal import EnvelopeJournal


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
