"""``pride chat`` says where to look when the provider fails, and why a reply is late.

Issue 20, point 5: a 404 printed ``BadRequest: openai: HTTP 404:`` and a
server that accepted and never answered kept the REPL silent for minutes.
Real subprocesses against the real loopback server.
"""

from __future__ import annotations

from pride.testing import Fault, openai_server
from tests.cli.driver import CLI, cli_env


async def _chat(*args: str, lines: list[str]) -> CLI:
    async with CLI.start(
        "chat", *args, env=cli_env(OPENAI_API_KEY="sk-test-chat-0123456789")
    ) as cli:
        for line in lines:
            await cli.send(line)
        await cli.close_stdin()
        assert await cli.exit_code() == 0, cli.transcript()
    return cli


async def test_a_404_names_the_url_and_the_likely_cause() -> None:
    """A base URL without /v1: one error line naming the URL that answered 404; the REPL goes on."""
    async with openai_server() as server:
        cli = await _chat(
            "--model", "openai/test-model", "--base-url", server.root_url, lines=["hello", "/quit"]
        )
    errors = "\n".join(cli.stderr)
    assert (
        f"error: EndpointNotFound: openai: HTTP 404 from POST {server.root_url}/chat/completions"
        in errors
    )
    assert "the base URL or the model name is likely wrong" in errors
    assert "check the model name 'test-model'" in errors
    assert "BadRequest" not in errors and "Traceback" not in errors
    assert "sk-test-chat" not in errors


async def test_a_stalled_attempt_is_shown_and_retried_within_the_timeout() -> None:
    """--timeout 0.3: the silent first attempt is reported as a retry notice, the retry answers."""
    script = [Fault.slow_first_byte(30.0), "recovered"]
    async with openai_server(script) as server:
        cli = await _chat(
            "--model",
            "openai/test-model",
            "--base-url",
            server.base_url,
            "--timeout",
            "0.3",
            lines=["hello", "/quit"],
        )
    errors = "\n".join(cli.stderr)
    url = f"{server.base_url}/chat/completions"
    assert f"[openai/test-model: no answer in time from {url}; retry 1 of 3 in" in errors
    assert "chat> recovered" in "\n".join(cli.stdout)
    assert server.request_count == 2
