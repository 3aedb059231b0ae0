"""No API key ever appears in to_dict(), repr(), logs or exception text."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

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


async def _call(model: iModel, *, stream: bool) -> None:
    """``REQUEST`` sent to ``model``, plain or streamed to its end."""
    if stream:
        async with model.stream(REQUEST) as chunks:
            async for _ in chunks:
                pass
    else:
        await model.invoke(REQUEST)


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


#: A key of no provider's shape: only its own value can find it in a text.
PLAIN_KEY = "Zq8Lm3Xv7Tp2Rk9Wd4Hs6Jn1Bc5Fg0Ay8Ue3Io7Pl"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_key_echoed_across_the_message_cut_is_not_shown_in_part(stream, caplog):
    """A provider message is cut at 500 characters; it was cut before the key was
    looked for, so a key echoed across the cut was shown up to it (27 of its 42
    characters here), in the error and in the log of its retry."""
    caplog.set_level(logging.DEBUG)
    echoed = "x" * 450 + " Authorization: Bearer " + PLAIN_KEY
    script = [Fault.status(500, body={"error": {"message": echoed}})] * 2
    async with openai_server(script) as server:
        async with iModel(
            "openai/gpt-4o", base_url=server.base_url, api_key=PLAIN_KEY, retry=FAST
        ) as model:
            with pytest.raises(ServerError) as caught:
                await _call(model, stream=stream)
    assert "Bearer [redacted]" in str(caught.value)
    assert PLAIN_KEY[:8] not in _all_text(caught.value)
    assert PLAIN_KEY[:8] not in caplog.text


async def test_a_key_echoed_in_an_error_event_across_the_cut_is_not_shown_in_part():
    """The same cut, for an error a provider reports inside a 200 event stream."""
    echoed = "x" * 450 + " Authorization: Bearer " + PLAIN_KEY
    event = f"data: {json.dumps({'error': {'type': 'invalid_request_error', 'message': echoed}})}"
    raw = Fault.raw(event + "\n\n", content_type="text/event-stream")
    async with openai_server([raw]) as server:
        async with iModel(
            "openai/gpt-4o", base_url=server.base_url, api_key=PLAIN_KEY, retry=FAST
        ) as model:
            with pytest.raises(ProviderError) as caught:
                async with model.stream(REQUEST) as chunks:
                    async for _ in chunks:
                        pass
    assert "Bearer [redacted]" in str(caught.value)
    assert PLAIN_KEY[:8] not in _all_text(caught.value)


@asynccontextmanager
async def answering_with(answer: bytes) -> AsyncIterator[str]:
    """A real TCP listener on 127.0.0.1 that reads each request whole and answers
    it with exactly ``answer`` (bytes no well-behaved server sends), then hangs up.

    Yields the base URL.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            received = b""
            while b"\r\n\r\n" not in received:
                received += await stream.receive_some(65536)
            head, _, body = received.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                body += await stream.receive_some(65536)
            await stream.send_all(answer)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, serve, listeners)
        yield f"http://127.0.0.1:{port}/v1"
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("stream", [False, True])
async def test_a_key_echoed_in_a_broken_response_head_is_not_in_the_chained_errors(stream, caplog):
    """A response head httpx cannot parse is a ProviderConnectionError chained to
    httpx's error, whose own message (and its causes') quotes the bytes: the key a
    server echoed there was in every traceback of the error, and in the log."""
    caplog.set_level(logging.DEBUG)
    answer = b"HTTP/1.1 200 OK\r\nX-Echo Bearer " + PLAIN_KEY.encode() + b"\r\n\r\n"
    async with answering_with(answer) as base_url:
        async with iModel(
            "openai/gpt-4o", base_url=base_url, api_key=PLAIN_KEY, retry=FAST
        ) as model:
            with pytest.raises(ProviderConnectionError) as caught:
                await _call(model, stream=stream)
    text = _all_text(caught.value)
    assert "illegal header line" in text and "[redacted]" in text
    assert PLAIN_KEY not in text
    # pride's own log; httpcore's DEBUG trace quotes its exception as it is.
    ours = [record.getMessage() for record in caplog.records if record.name.startswith("pride")]
    assert ours and not [message for message in ours if PLAIN_KEY in message]
