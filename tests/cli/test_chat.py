"""``pride chat``: a REPL on one branch, driven through its standard input."""

from __future__ import annotations

import signal
from pathlib import Path

from pride.testing import openai_server
from tests.cli.driver import CLI, HeldModel, cli_env, contents


async def _chat(*args: str, lines: list[str], env: dict[str, str]) -> CLI:
    """Run ``pride chat`` over ``lines`` (then end of input); return the finished process."""
    async with CLI.start("chat", *args, env=env) as cli:
        for line in lines:
            await cli.send(line)
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()
    return cli


async def test_without_a_model_it_runs_on_the_echo_model_and_says_so(tmp_path: Path) -> None:
    """With no model configured the echo model answers, and the banner says so."""
    store = tmp_path / "chat.db"
    cli = await _chat(
        "--store", str(store), "--name", "ada", lines=["hello", "/save", "/quit"], env=cli_env()
    )
    out = "\n".join(cli.stdout)
    assert "running on the scripted echo model" in out
    assert "ada> echo: hello" in out
    assert f"saved 'ada': 2 messages in {store}" in out


async def test_two_sessions_save_load_and_clone_a_conversation(tmp_path: Path) -> None:
    """A turn saved in one run is loaded in the next, which sends the whole history."""
    store = tmp_path / "chat.db"
    async with openai_server(HeldModel()) as server:
        env = cli_env(OPENAI_API_KEY="test-key")
        model = ("--model", "openai/test-model", "--base-url", server.base_url)
        first = await _chat(
            *model,
            "--store",
            str(store),
            "--system",
            "Be brief.",
            lines=["first turn", "/save", "/clone", "on the fork", "/quit"],
            env=env,
        )
        out = "\n".join(first.stdout)
        assert "chat> re: first turn" in out
        assert "saved 'chat': 3 messages" in out
        assert "forked 'chat' into 'chat-2'" in out
        assert "chat-2> re: on the fork" in out
        assert "running on the scripted echo model" not in out

        second = await _chat(
            *model,
            "--store",
            str(store),
            "--name",
            "scratch",
            lines=[
                "/load chat",
                "second turn",
                "fail now",
                "/load nowhere",
                "still here?",
                "/help",
            ],
            env=env,
        )
    out = "\n".join(second.stdout)
    errors = "\n".join(second.stderr)
    assert "now on 'chat': 3 messages" in out
    assert "chat> re: second turn" in out
    assert "error: BadRequest" in errors
    assert "no conversation 'nowhere'" in errors
    assert "chat> re: still here?" in out
    assert "/clone" in out  # the help text
    second_turn = next(r.body for r in server.requests if contents(r.body)[-1] == "second turn")
    assert contents(second_turn) == ["Be brief.", "first turn", "re: first turn", "second turn"]
    assert second_turn["stream"] is True
    fork_turn = next(r.body for r in server.requests if contents(r.body)[-1] == "on the fork")
    assert contents(fork_turn)[:3] == ["Be brief.", "first turn", "re: first turn"]


async def test_ctrl_c_interrupts_the_reply_and_the_repl_goes_on(tmp_path: Path) -> None:
    """SIGINT during a streaming reply cancels that turn only; the next line is answered."""
    model = HeldModel()
    async with openai_server(model) as server:
        env = cli_env(OPENAI_API_KEY="test-key")
        args = ("chat", "--model", "openai/test-model", "--base-url", server.base_url)
        async with CLI.start(*args, env=env) as cli:
            await cli.send("slow answer please")
            await cli.wait_event(model.held, "the model request")
            cli.process.send_signal(signal.SIGINT)
            await cli.until(lambda: "[interrupted]" in "\n".join(cli.stdout), "the interruption")
            await cli.send("hello again")
            await cli.until(lambda: "chat> re: hello again" in cli.stdout, "the next reply")
            await cli.close_stdin()
            assert await cli.exit_code() == 0
        model.release.set()


async def test_issue14_escape_sequences_in_a_reply_never_reach_the_terminal() -> None:
    """A model reply holding terminal escape sequences (retitle, clear, OSC 52 clipboard
    write) is printed with them made visible, streamed or not."""
    reply = "see \x1b]52;c;ZXZpbA==\x07 and \x1b[2J\x9b31m done"
    async with openai_server(lambda body: reply) as server:
        env = cli_env(OPENAI_API_KEY="test-key")
        model = ("--model", "openai/test-model", "--base-url", server.base_url)
        cli = await _chat(*model, lines=["hi", "/quit"], env=env)
    out = "\n".join(cli.stdout)
    assert not any(char in out for char in "\x1b\x07\x9b"), repr(out)
    assert "see \\x1b]52;c;ZXZpbA==\\x07 and \\x1b[2J\\x9b31m done" in out


async def test_each_answer_is_followed_by_its_usage_and_cost() -> None:
    """After every answer pride chat shows the turn's tokens and cost, and the running total."""
    async with openai_server(HeldModel()) as server:
        env = cli_env(OPENAI_API_KEY="test-key")
        model = ("--model", "openai/gpt-4.1-mini", "--base-url", server.base_url)
        cli = await _chat(*model, lines=["one", "two", "/quit"], env=env)
    out = "\n".join(cli.stdout)
    lines = [line for line in cli.stdout if "tokens (" in line]
    assert len(lines) == 2, out
    first, second = lines
    assert "in," in first and " out)" in first and "$" in first  # gpt-4.1-mini is priced
    assert "; so far: " in second
    spent, total = (part.split(" tokens")[0].strip(" [") for part in second.split("; so far: "))
    assert int(total.replace(",", "")) > int(spent.replace(",", ""))
