"""API keys never leak: not in serialised branches, logs, signals, errors or reprs.

A branch with a distinctive fake key runs turns against the loopback server
(OpenAI-compatible and Anthropic endpoints) down every failure path, with
the key given explicitly or taken from the environment, and with a provider
that echoes the key back in its error body. Then everything a user could
print, store or ship is searched for the key.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import pytest

import pride
from pride import Branch, ChatAndRecord, Session
from pride.llm import RetryPolicy, iModel
from pride.messages import Command, codec
from pride.testing import Fault, openai_server
from tests.reliability.invariants import InvariantChecker

KEY = "sk-PRIDE-ISSUE10-f00dface-0badc0de-5ec12e7"
KEY_PARTS = ("f00dface", "0badc0de", "5ec12e7")  # a fragment must not leak either
TIMEOUT = 0.5
"""The model's timeout on the timeout path: far below its slow replies (5 s)."""
RETRY = RetryPolicy(max_retries=1, base_delay=0.001, max_delay=0.01, jitter=0)

PATHS = {
    "401": [Fault.status(401)],
    "401 echoing the key": [
        Fault.status(401, body={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    ],
    "429": [Fault.status(429, retry_after=0)] * 2,
    "500": [Fault.status(500)] * 2,
    "500 echoing the key": [Fault.status(500, body=f"upstream rejected Bearer {KEY}")] * 2,
    "transport error": [Fault.cut_stream()] * 2,
    "malformed": [Fault.malformed_json()],
    "malformed stream": [Fault.malformed_sse()],
    "timeout": [Fault.slow_first_byte(5.0)] * 2,
    "success": ["fine"],
}


def everything_text(exc: BaseException | None) -> str:
    """What a traceback shows (the chained causes too), plus repr and attributes."""
    if exc is None:
        return ""
    return "".join(traceback.format_exception(exc)) + repr(exc) + repr(vars(exc))


def assert_no_key(where: str, text: str) -> None:
    for secret in (KEY, *KEY_PARTS):
        assert secret not in text, f"the API key leaked into {where}"


@pytest.mark.parametrize("source", ["explicit", "environment"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("path", list(PATHS))
async def test_the_key_appears_nowhere(
    path: str,
    provider: str,
    source: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    """Across a run down one failure path: no key in to_dict (every mode), logs at
    DEBUG, signals, the caller's exception, reprs or the dumped call log."""
    caplog.set_level(logging.DEBUG)
    name = "openai/gpt-4.1-mini" if provider == "openai" else "anthropic/claude-sonnet-4"
    if source == "environment":
        monkeypatch.setenv("OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY", KEY)
    checker = InvariantChecker()
    error: BaseException | None = None
    async with openai_server([*PATHS[path], "next"]) as server:
        model = iModel(
            name,
            base_url=server.base_url,
            api_key=KEY if source == "explicit" else None,
            retry=RETRY,
            # Only the timeout path may time out. Its window must still hold the
            # branch's next call ("again") on a loaded machine: 0.1 s did not.
            timeout=TIMEOUT if path == "timeout" else 30.0,
        )
        async with Session(name="secrets") as session:
            session.observe(handler=checker.dispatch)
            branch = await session.spawn(Branch(name="keeper", chat_model=model))
            try:
                if path == "malformed stream":
                    async with pride.stream(branch, ChatAndRecord("hi")) as items:
                        async for _ in items:
                            pass
                else:
                    await branch.chat_and_record("hi")
            except pride.ProviderError as exc:
                error = exc
            await branch.chat_and_record("again")
            sent = [request.headers for request in server.requests]
    assert (error is None) == (path == "success")
    # The key did travel where it belongs: the request headers.
    assert any(KEY in " ".join(headers.values()) for headers in sent)

    assert_no_key("the caller's exception", everything_text(error))
    assert_no_key("signals", "\n".join(codec.to_json(signal) for signal in checker.signals))
    assert_no_key("signal reprs", "\n".join(repr(signal) for signal in checker.signals))
    assert_no_key("log records", "\n".join(r.getMessage() for r in caplog.records))
    assert_no_key(
        "logged exceptions",
        "\n".join(everything_text(r.exc_info[1]) for r in caplog.records if r.exc_info),
    )
    for mode in ("python", "json", "db"):
        projection = branch.to_dict(
            mode,  # type: ignore[arg-type]
            include_request_options=True,
            include_logs=True,
            include_log_config=True,
            include_processor_config=True,
        )
        assert_no_key(f"to_dict({mode!r})", json.dumps(projection, default=repr))
    assert_no_key("repr", repr(branch) + repr(model) + repr(model.to_dict()))
    assert_no_key("the call log", json.dumps(branch.logs.to_list(), default=repr))
    dumped = branch.dump_logs(tmp_path / "logs.jsonl", clear=False)
    assert_no_key("the dumped call log", dumped.read_text())
    assert_no_key("a clone", json.dumps(branch.clone().to_dict("json")))


async def test_issue14_a_decoded_command_picks_only_among_the_branch_s_models(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decoded from JSON, a model field names one of the branch's models or fails with
    InvalidMessage; the same command built in process still makes the model it names
    (the application's own code is trusted), key and all."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    async with openai_server(lambda body: f"from {body['model']}") as server:

        def at_server(name: str) -> iModel:
            return iModel(f"openai/{name}", base_url=server.base_url, retry=RETRY)

        elsewhere = {"provider": "openai", "model": "elsewhere", "base_url": server.base_url}
        async with Branch(chat_model=at_server("main"), parse_model=at_server("aux")) as branch:
            for name in ("openai/aux", "aux", "openai/main"):
                decoded = codec.from_json(
                    json.dumps({"type": "Chat", "instruction": "hi", "chat_model": name}),
                    Command,
                )
                assert await pride.ask(branch, decoded) == f"from {name.split('/')[-1]}"
            decoded = codec.from_json('{"type": "Chat", "chat_model": "openai/other"}', Command)
            with pytest.raises(pride.InvalidMessage) as info:
                await pride.ask(branch, decoded)
            assert info.value.path == "Chat.chat_model"
            assert "offers: openai/aux, openai/main" in str(info.value)
            assert await branch.chat("hi", chat_model=elsewhere) == "from elsewhere"
    assert [request.body["model"] for request in server.requests] == [
        "aux",
        "aux",
        "main",
        "elsewhere",
    ]
    assert KEY in server.requests[-1].headers["authorization"]
