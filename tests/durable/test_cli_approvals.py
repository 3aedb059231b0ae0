"""Issue 19 point 4: ``pride inspect`` lists unfinished turns; ``pride chat`` asks y/n
on a call that needs approval, resolves it, and shows the turn's answer.

Every ``pride`` here is a real subprocess on a real store file; the terminal
test runs ``pride chat`` on a pseudo-terminal, read through pyte.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from uuid import uuid4

import pytest
import trio

from pride import ApprovalRequired, Operate, Session
from pride.store import BranchStore
from tests.cli.driver import CLI, ROOT, cli_env
from tests.durable import mailer_app
from tests.durable.support import records
from tests.terminal import Terminal

AGENT = "tests.durable.mailer_app:agent"


async def _suspend(store: Path, instruction: str) -> ApprovalRequired:
    """Leave a turn of ``mailer`` suspended for approval in ``store`` (in process)."""
    async with Session(store=store) as session:
        branch = await session.spawn(mailer_app.agent())
        with pytest.raises(ApprovalRequired) as info:
            await session.ask(branch, Operate(instruction, actions=True))
    return info.value


async def _pride(*args: str, lines: Sequence[str] = (), **env: str) -> CLI:
    """Run ``pride *args`` over ``lines`` (then end of input) to its exit."""
    async with CLI.start(*args, env=cli_env(**env)) as cli:
        for line in lines:
            await cli.send(line)
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()
    return cli


async def test_issue19_inspect_lists_suspended_and_interrupted_turns(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    stopped = await _suspend(store, "email bob and wire 5")
    interrupted, damaged = str(uuid4()), str(uuid4())
    async with BranchStore(store) as writer:  # what a crash mid-turn leaves, and worse
        await writer.register("mailer")
        command = json.dumps({"type": "Operate", "instruction": "email ann", "actions": True})
        writer.journal_begin("x\x1b[2J", interrupted, command)
        writer.journal_begin("mailer", damaged, '{"type": "NoSuchCommand"}')
        await writer.flush()

    cli = await _pride("inspect", str(store))
    out = "\n".join(cli.stdout)
    assert "unfinished turns" in out
    [suspended] = [line for line in cli.stdout if str(stopped.turn_id) in line]
    assert "suspended: waits for approval" in suspended and "Operate" in suspended
    assert 'call_email: send_email({"to": "bob"})' in suspended
    assert 'call_wire: wire_money({"amount": 5})' in out
    [crashed] = [line for line in cli.stdout if interrupted in line]
    assert "interrupted: resumes when its branch is restored" in crashed
    assert "\x1b" not in out and "x\\x1b[2J" in crashed  # shown, not obeyed
    [bad] = [line for line in cli.stdout if damaged in line]
    assert "cannot be resumed" in bad

    one = await _pride("inspect", str(store), "mailer")
    assert "mailer: 0 messages" in one.stdout[0]
    listed = "\n".join(one.stdout)
    assert str(stopped.turn_id) in listed and interrupted not in listed  # that branch's only


async def test_issue36_inspect_shows_the_characters_a_waiting_call_hides(
    tmp_path: Path,
) -> None:
    """``pride inspect`` lists what a suspended turn waits on, to be decided on: a
    right-to-left override or a tag character in its arguments shows as an escape."""
    store = tmp_path / "store.db"
    await _suspend(store, "mail to bob\u202egpj.exe\U000e0041")
    cli = await _pride("inspect", str(store))
    out = "\n".join(cli.stdout)
    assert "bob\\u202egpj.exe\\U000e0041" in out, out
    assert "\u202e" not in out and "\U000e0041" not in out


async def test_issue19_chat_asks_about_each_call_and_shows_the_answer(tmp_path: Path) -> None:
    store = tmp_path / "chat.db"
    lines = ["email bob and wire 5", "perhaps", "y", "n", "too much", "/quit"]
    cli = await _pride(
        "chat", "--agent", AGENT, "--store", str(store), lines=lines, PRIDE_TEST_DIR=str(tmp_path)
    )
    out = "\n".join(cli.stdout)
    assert "tools: lookup, send_email, wire_money" in cli.stdout[0]
    # The agent's own model, said in words (issue 35: it read "on scripted/scripted").
    assert "branch 'mailer' on a scripted model, store" in cli.stdout[0], cli.stdout[0]
    assert 'approve send_email({"to": "bob"})? [y/n]' in out
    assert 'approve wire_money({"amount": 5})? [y/n]' in out
    assert "please answer y or n" in "\n".join(cli.stderr)
    assert 'mailer> done: sent to bob; {"error": "denied: too much"}' in out
    # Approved: ran once. Denied: never.
    assert records(tmp_path, "tools.jsonl") == [{"tool": "send_email", "arguments": {"to": "bob"}}]
    async with BranchStore(store, read_only=True) as reader:
        assert await reader.unfinished_turns() == []
        messages = await reader.load_messages("mailer")
    assert messages[-1].text == 'done: sent to bob; {"error": "denied: too much"}'


async def test_issue36_chat_shows_the_characters_a_call_hides_before_asking(
    tmp_path: Path,
) -> None:
    """A call's arguments are the model's text, and a person approves what they see: a
    right-to-left override (U+202E) shows ``bob@example.org<RLO>gpj.exe`` as ``exe.jpg``, a
    zero-width space, an isolate or a Unicode tag character (invisible ASCII) shows as
    nothing. The question shows each as an escape, so what is approved is what runs."""
    hidden = "bob@example.org\u202egpj.exe\u200b\U000e0041\u2066x"
    lines = [f"mail to {hidden}", "n", "", "/quit"]
    cli = await _pride("chat", "--agent", AGENT, "--store", str(tmp_path / "chat.db"), lines=lines)
    out = "\n".join(cli.stdout)
    escaped = "bob@example.org\\u202egpj.exe\\u200b\\U000e0041\\u2066x"
    question = out[out.index("approve send_email(") : out.index("[y/n]")]
    assert " ".join(question.split()) == f'approve send_email({{"to": "{escaped}"}})?', out
    for character in ("\u202e", "\u200b", "\U000e0041", "\u2066"):
        assert character not in out


async def test_issue19_a_turn_left_waiting_in_chat_is_asked_about_by_the_next(
    tmp_path: Path,
) -> None:
    """End of input at the question leaves the turn waiting in the store; the next
    ``pride chat`` on it asks again at start, and the approved call runs once."""
    store = tmp_path / "chat.db"
    env = {"PRIDE_TEST_DIR": str(tmp_path)}
    first = await _pride(
        "chat", "--agent", AGENT, "--store", str(store), lines=["email bob"], **env
    )
    assert "is left waiting for approval" in "\n".join(first.stdout)
    assert records(tmp_path, "tools.jsonl") == []

    listed = await _pride("inspect", str(store))
    assert any("suspended: waits for approval" in line for line in listed.stdout)

    second = await _pride("chat", "--agent", AGENT, "--store", str(store), lines=["y"], **env)
    out = "\n".join(second.stdout)
    assert "of an earlier session waits for approval" in out
    assert "mailer> done: sent to bob" in out
    assert records(tmp_path, "tools.jsonl") == [{"tool": "send_email", "arguments": {"to": "bob"}}]


async def test_issue19_chat_refuses_a_bad_agent(tmp_path: Path) -> None:
    async with CLI.start("chat", "--agent", "tests.durable.mailer_app:build", env=cli_env()) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    assert "pride chat: --agent: tests.durable.mailer_app:build failed: TypeError" in cli.stderr[0]
    async with CLI.start("chat", "--agent", AGENT, "--name", "x", env=cli_env()) as cli:
        await cli.close_stdin()
        assert await cli.exit_code() == 2
    assert "do not go with --agent" in "\n".join(cli.stderr)


async def test_issue19_chat_asks_in_a_terminal(tmp_path: Path) -> None:
    """On a terminal the question waits on its line for a person's keys."""
    command = [sys.executable, "-m", "pride.cli", "chat", "--agent", AGENT]
    env = cli_env(PRIDE_TEST_DIR=str(tmp_path))
    async with Terminal.run(command, rows=24, columns=100, env=env, cwd=ROOT) as terminal:
        await terminal.until(lambda: any("you>" in row for row in terminal.rows), "the prompt")
        await terminal.type("email bob\r")
        question = 'approve send_email({"to": "bob"})? [y/n]'
        await terminal.until(lambda: any(question in row for row in terminal.rows), "the question")
        await terminal.type("y\r")
        await terminal.until(
            lambda: any("mailer> done: sent to bob" in row for row in terminal.rows), "the answer"
        )
        await terminal.type("/quit\r")
        await terminal.drain()
    with trio.fail_after(5):
        assert await terminal.process.wait() == 0
    assert records(tmp_path, "tools.jsonl") == [{"tool": "send_email", "arguments": {"to": "bob"}}]


async def test_issue19_chat_decides_a_waiting_turn_before_a_new_line(tmp_path: Path) -> None:
    """A conversation loaded with a turn waiting (here: /load of a stored branch) asks
    about it when a line is typed, instead of failing every line with ApprovalPending."""
    store = tmp_path / "chat.db"
    await _suspend(store, "email bob")
    cli = await _pride(
        "chat",
        "--store",
        str(store),
        lines=["/load mailer", "hello", "n", "no thanks"],
        PRIDE_TEST_DIR=str(tmp_path),
    )
    out = "\n".join(cli.stdout)
    assert "that line was not sent: a turn of this branch waits for approval" in out
    assert 'approve send_email({"to": "bob"})? [y/n]' in out
    assert "mailer> " in out and "error" not in "\n".join(cli.stderr).lower()
    assert records(tmp_path, "tools.jsonl") == []
    async with BranchStore(store, read_only=True) as reader:
        assert await reader.unfinished_turns() == []
        messages = await reader.load_messages("mailer")
    assert [m.role for m in messages] == ["user", "assistant"]  # the turn, then it ended
    assert messages[0].text.startswith("email bob")
