"""``pride inspect``: list a store's branches, print a conversation, refuse bad files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio
from typer.testing import CliRunner

from pride import Branch, Session
from pride.cli import app
from tests.helpers import echo_model


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store holding ``ada`` (a chat and a tool call) and an empty ``bob``."""
    path = tmp_path / "agents.db"

    async def fill() -> None:
        async with Session(store=path) as session:
            ada = await session.spawn(
                Branch(name="ada", system="Be kind.", chat_model=echo_model(), tools=[add])
            )
            await ada.chat_and_record("hello [there]")
            await ada.act({"function": "add", "arguments": {"a": 2, "b": 3}})
            bob = await session.spawn(Branch(name="bob", chat_model=echo_model()))
            assert session.store is not None  # a new branch is stored once it has a message:
            await session.store.save(bob)  # saved by hand, as an empty one

    trio.run(fill)
    return path


def _inspect(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["inspect", *args])
    return result.exit_code, result.stdout, result.stderr


def test_lists_every_branch_with_its_message_count(store: Path) -> None:
    """The table has one row per branch: name, id, message count, last update."""
    code, out, _ = _inspect(str(store))
    assert code == 0
    assert "last update" in out
    rows = {
        line.split()[1]: line for line in out.splitlines() if " ada " in line or " bob " in line
    }
    assert rows.keys() == {"ada", "bob"}
    assert " 5 " in rows["ada"]  # system, instruction, reply, tool call, tool result
    assert " 0 " in rows["bob"]


def test_prints_a_conversation_role_by_role(store: Path) -> None:
    """With a branch name, every message is printed with its role, text shown verbatim."""
    code, out, _ = _inspect(str(store), "ada")
    assert code == 0
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert lines == [
        "ada: 5 messages",
        "system Be kind.",
        "user hello [there]",
        "assistant re: hello [there]",
        'tool call add({"a": 2, "b": 3})',
        "tool result add -> 5",
    ]


def test_an_unknown_branch_is_an_error(store: Path) -> None:
    """Asking for a branch the store lacks exits 2 and lists what it has."""
    code, _, err = _inspect(str(store), "zed")
    assert code == 2
    assert "no branch 'zed'" in err and "ada, bob" in err


def test_a_missing_store_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    """A path with no file exits 2 without creating one."""
    path = tmp_path / "nothing.db"
    code, _, err = _inspect(str(path))
    assert code == 2
    assert "no store at" in err
    assert not path.exists()


def test_a_corrupt_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    """A file that is not SQLite exits 2 and keeps its bytes."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database" * 100)
    code, _, err = _inspect(str(path))
    assert code == 2
    assert "not a SQLite database" in err
    assert path.read_bytes() == b"these are my notes, not a database" * 100


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    """A SQLite file without pride's metadata exits 2 and is not modified."""
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    db.commit()
    db.close()
    before = path.read_bytes()
    code, _, err = _inspect(str(path))
    assert code == 2
    assert "another application" in err
    assert path.read_bytes() == before


def test_issue14_control_characters_in_a_store_never_reach_the_terminal(tmp_path: Path) -> None:
    """Escape sequences in stored text (a model's reply, a doctored file) are shown as
    visible escapes, never sent to the terminal: no title change, no cleared screen, no
    clipboard write (OSC 52)."""
    from pride import AssistantResponse, Instruction
    from pride.store import BranchStore

    path = tmp_path / "agents.db"
    hostile = "ada\x1b[31m"

    async def fill() -> None:
        async with BranchStore(path) as store:
            messages = [
                Instruction(instruction="hi \x1b]0;pwned\x07 \x1b[2J"),
                AssistantResponse(assistant_response="ok \x1b]52;c;ZXZpbA==\x07 \x9b31m"),
            ]
            await store.save_branch(hostile, "id", {}, messages)

    trio.run(fill)
    for args in ([str(path)], [str(path), hostile], [str(path), "nobody"]):
        code, stdout, stderr = _inspect(*args)
        for stream in (stdout, stderr):
            assert not any(char in stream for char in "\x1b\x07\x9b"), repr(stream)
    code, stdout, _ = _inspect(str(path), hostile)
    assert code == 0
    assert "\\x1b]52;c;ZXZpbA==" in stdout
