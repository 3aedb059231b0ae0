"""No API key ever appears in to_dict(), repr(), logs or exception text."""

from __future__ import annotations

import logging
import traceback

import pytest

from pride.errors import (
    AuthenticationFailed,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
)
from pride.llm import ModelRequest, RetryPolicy, iModel
from pride.testing import Fault, openai_server

SECRET = "sk-proj-SECRETSECRET0123456789abcdefXYZ"
FAST = RetryPolicy(max_retries=1, base_delay=0.001, jitter=0)
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], system="s")


def _all_text(exc: BaseException) -> str:
    """Everything a traceback would show, chained causes included."""
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(vars(exc))


def test_repr_and_to_dict_never_show_the_key(monkeypatch):
    """An explicit key is masked in repr and absent from to_dict; env keys likewise."""
    model = iModel("openai/gpt-4o", api_key=SECRET)
    assert SECRET not in repr(model) and "'***'" in repr(model)
    assert SECRET not in str(model.to_dict()) and "api_key" not in model.to_dict()
    assert SECRET not in repr(model.copy()) and SECRET not in str(model.copy().to_dict())
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    from_env = iModel("anthropic/claude-sonnet-4")
    assert SECRET not in repr(from_env) and "$ANTHROPIC_API_KEY" in repr(from_env)
    assert SECRET not in str(from_env.to_dict())


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("script", "error"),
    [
        ([Fault.status(401)], AuthenticationFailed),
        ([Fault.status(429, retry_after=0)] * 2, RateLimited),
        ([Fault.status(500)] * 2, ServerError),
        ([Fault.malformed_json()], MalformedResponse),
        ([Fault.cut_stream()] * 2, ProviderConnectionError),
        ([Fault.slow_first_byte(5.0)] * 2, ProviderTimeout),
        (
            [Fault.status(401, body={"error": {"message": f"Incorrect API key: {SECRET}"}})],
            AuthenticationFailed,
        ),
        (
            [
                Fault.status(
                    400, body={"error": {"message": "bad key sk-proj-abc***************XYZ"}}
                )
            ],
            ProviderError,
        ),
    ],
)
async def test_no_key_in_errors_or_logs_across_failures(provider, script, error, caplog):
    """Each failure path yields an exception and logs that never contain the key."""
    caplog.set_level(logging.DEBUG)
    async with openai_server(script) as server:
        name = "openai/gpt-4o" if provider == "openai" else "anthropic/claude-sonnet-4"
        async with iModel(
            name, base_url=server.base_url, api_key=SECRET, retry=FAST, timeout=0.2
        ) as model:
            with pytest.raises(error) as caught:
                await model.invoke(REQUEST)
    assert server.requests[0].headers.get("authorization", "").endswith(SECRET) or (
        server.requests[0].headers.get("x-api-key") == SECRET
    )
    text = _all_text(caught.value)
    assert SECRET not in text
    assert "sk-proj-abc***" not in text
    assert SECRET not in caplog.text
    assert SECRET not in repr(model) and SECRET not in str(model.to_dict())


async def test_no_key_when_the_connection_is_refused(caplog):
    """A transport failure's chained httpx error carries a scrubbed request."""
    caplog.set_level(logging.DEBUG)
    async with openai_server() as server:
        base_url = server.base_url
    async with iModel("openai/gpt-4o", base_url=base_url, api_key=SECRET, retry=FAST) as model:
        with pytest.raises(ProviderConnectionError) as caught:
            await model.invoke(REQUEST)
    assert SECRET not in _all_text(caught.value)
    cause = caught.value.__cause__
    assert cause is not None
    assert cause.request.headers["authorization"] == "[redacted]"  # type: ignore[attr-defined]
    assert SECRET not in caplog.text


async def test_no_key_in_stream_errors(caplog):
    """Streaming failures are scrubbed the same way."""
    caplog.set_level(logging.DEBUG)
    body = {"error": {"message": f"key {SECRET} revoked"}}
    async with openai_server([Fault.status(401, body=body)]) as server:
        async with iModel("openai/gpt-4o", base_url=server.base_url, api_key=SECRET) as model:
            with pytest.raises(AuthenticationFailed) as caught:
                async with model.stream(REQUEST) as stream:
                    async for _ in stream:
                        pass
    assert SECRET not in _all_text(caught.value) and "[redacted]" in str(caught.value)
    assert SECRET not in caplog.text


async def test_missing_key_error_names_the_variable_not_a_value(monkeypatch):
    """The missing-key error says which variable to set and holds no key."""
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    async with iModel("groq/llama3") as model:
        with pytest.raises(AuthenticationFailed, match="GROQ_API_KEY") as caught:
            await model.invoke(REQUEST)
    assert caught.value.provider == "groq"
