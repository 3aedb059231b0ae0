"""Issue 36, a note: a store that cannot be written at open says why, not that it is
"not a SQLite database".

A full disk cannot be made here (no tiny filesystem, no tmpfs to fill), so each
failure is provoked as honestly as this machine allows: SQLite's own SQLITE_FULL
error comes from a database of the test's whose page count SQLite itself caps,
and a real ``pride run`` meets a real write failure under a file-size limit
(``RLIMIT_FSIZE``: the kernel refuses to grow the store's files, and SQLite
reports a disk I/O error, as it does for a failing disk).
"""

from __future__ import annotations

import resource
import sqlite3
import sys
from pathlib import Path

import pytest
import trio

from pride.store._file import open_failure
from tests.cli.driver import ROOT, cli_env


def _real_full_error(tmp_path: Path) -> sqlite3.OperationalError:
    """The error SQLite raises when a database cannot grow: SQLITE_FULL, from SQLite."""
    db = sqlite3.connect(tmp_path / "capped.db")
    try:
        db.execute("PRAGMA max_page_count=2")
        with pytest.raises(sqlite3.OperationalError) as info:
            for index in range(10):
                db.execute(f"CREATE TABLE t{index} (x TEXT)")
                db.execute(f"INSERT INTO t{index} VALUES (?)", ("x" * 3000,))
    finally:
        db.close()
    error = info.value
    assert error.sqlite_errorname == "SQLITE_FULL", error
    return error


def test_issue36_sqlite_s_full_error_says_the_disk_is_full(tmp_path: Path) -> None:
    """SQLITE_FULL at open is the disk (or the file) being full, said so, with the fix."""
    error = open_failure(tmp_path / "store.db", _real_full_error(tmp_path))
    text = str(error)
    assert "the disk is full" in text and "free some space" in text
    assert "not a SQLite database" not in text


def test_issue36_a_file_that_is_not_a_database_is_still_said_to_be_one(tmp_path: Path) -> None:
    """The old message stays for what it was for: a file that is not a database."""
    path = tmp_path / "text.db"
    path.write_bytes(b"not a database at all, " * 100)
    db = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.DatabaseError) as info:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    finally:
        db.close()
    assert "is not a SQLite database" in str(open_failure(path, info.value))


def _capped() -> None:
    """In the child: files may not grow past 8 KiB (Python ignores SIGXFSZ, so a
    write past it fails with EFBIG instead of killing the process)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
async def test_issue36_pride_run_on_a_store_it_cannot_grow_says_why(tmp_path: Path) -> None:
    """A real ``pride run`` whose store cannot grow: it exits 2 saying the write failed
    and that the disk may be full, not that the file is not a database."""
    with trio.fail_after(30):
        done = await trio.run_process(
            [
                sys.executable,
                "-m",
                "pride.cli",
                "run",
                "tests.cli.app:lavish",
                "--store",
                str(tmp_path / "store.db"),
                "--exit-on-eof",
                "--no-status",
            ],
            stdin=b"",
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env=cli_env(),
            preexec_fn=_capped,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert "disk I/O error" in stderr and "full" in stderr, stderr
    assert "not a SQLite database" not in stderr, stderr
