"""Errors that say where to look (issue 20, point 5).

Before: an HTTP 404 printed ``BadRequest: openai: HTTP 404:`` (no URL, no
body, and not a bad request); a server that accepted and never answered was
silent for minutes. Now every ProviderError names the endpoint URL (never the
key or a query string) and the provider's own message; a 404 says which URL
answered and what is likely wrong; a stall says how long nothing came; and a
model tells an ``on_retry`` callback about each retry while it waits.
All against real loopback listeners.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

import pride
from pride.errors import (
    AuthenticationFailed,
    BadRequest,
    EndpointNotFound,
    MalformedResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeout,
    RateLimited,
    ServerError,
)
from pride.llm import ModelRequest, RetryNotice, RetryPolicy, ScriptedModel, iModel
from pride.testing import Fault, openai_server

KEY = "sk-test-messages-0123456789abcdef"
FAST = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0)
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], system="s")
both_formats = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def _name(provider: str) -> str:
    return "openai/gpt-4.1-mini" if provider == "openai" else "anthropic/claude-sonnet-4"


def _model(base_url: str, provider: str = "openai", **kwargs) -> iModel:
    kwargs.setdefault("retry", FAST)
    return iModel(_name(provider), base_url=base_url, api_key=KEY, **kwargs)


@asynccontextmanager
async def silent_listener() -> AsyncIterator[str]:
    """A real TCP listener on 127.0.0.1 that accepts connections and never reads or answers.

    Yields the base URL; connections are held open until the block ends.
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    held: list[trio.SocketStream] = []

    async def accept() -> None:
        while True:
            held.append(await listeners[0].accept())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(accept)
        try:
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            nursery.cancel_scope.cancel()
            for stream in held:
                stream.socket.close()
            for listener in listeners:
                listener.socket.close()


# -- 404 ------------------------------------------------------------------------------------


@both_formats
async def test_a_404_names_the_url_that_answered_and_the_likely_cause(provider):
    """A base URL without /v1 gets a 404 from the server: EndpointNotFound, not BadRequest."""
    async with openai_server() as server:
        base_url = server.root_url  # missing its /v1
        async with _model(base_url, provider) as model:
            with pytest.raises(EndpointNotFound) as caught:
                await model.invoke(REQUEST)
    error = caught.value
    route = "/chat/completions" if provider == "openai" else "/messages"
    assert error.url == base_url + route
    message = str(error)
    assert f"HTTP 404 from POST {base_url}{route}" in message
    assert "no route for POST " + route in message  # the server's own words
    assert "base URL or the model name is likely wrong" in message
    assert _name(provider).split("/")[1] in message
    assert not isinstance(error, BadRequest) and isinstance(error, ProviderError)
    assert (error.status, error.provider) == (404, provider)
    assert server.request_count == 1  # not retried
    assert pride.EndpointNotFound is EndpointNotFound


async def test_an_unknown_model_404_quotes_the_provider():
    """OpenAI's model_not_found body is quoted; the model name is named."""
    body = {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    async with openai_server([Fault.status(404, body=body)]) as server:
        async with iModel("openai/gpt-9", base_url=server.base_url, api_key=KEY) as model:
            with pytest.raises(EndpointNotFound) as caught:
                await model.invoke(REQUEST)
    assert "The model `gpt-9` does not exist" in str(caught.value)
    assert caught.value.provider_message.startswith("The model `gpt-9`")
    assert "check the model name 'gpt-9'" in str(caught.value)


async def test_a_not_found_error_inside_a_stream_is_endpoint_not_found():
    """Anthropic's in-stream not_found_error maps to EndpointNotFound, with the URL."""
    error = '{"type": "error", "error": {"type": "not_found_error", "message": "model: nope"}}'
    events = f"event: error\ndata: {error}\n\n"
    async with openai_server([Fault.raw(events, content_type="text/event-stream")]) as server:
        async with _model(server.base_url, "anthropic") as model:
            with pytest.raises(EndpointNotFound, match="model: nope") as caught:
                async with model.stream(REQUEST) as stream:
                    async for _ in stream:
                        pass
    assert caught.value.url == server.base_url + "/messages"


# -- every provider error names its URL and the provider's words, never the key ------------

FAULTS = {
    "400": (Fault.status(400, body={"error": {"message": f"bad field (key {KEY})"}}), BadRequest),
    "401": (Fault.status(401), AuthenticationFailed),
    "429": (Fault.status(429, retry_after=0), RateLimited),
    "500": (Fault.status(500), ServerError),
    "not JSON": (Fault.malformed_json(), MalformedResponse),
    "cut body": (Fault.cut_stream(), ProviderConnectionError),
    "slow": (Fault.slow_first_byte(5.0), ProviderTimeout),
}


@pytest.mark.parametrize("case", list(FAULTS))
async def test_every_provider_error_names_the_url_never_the_key(case):
    """Status, transport, timeout and unreadable replies: URL in the message and .url."""
    fault, kind = FAULTS[case]
    async with openai_server([fault] * 4) as server:
        async with _model(server.base_url, timeout=0.2, retry=RetryPolicy.never()) as model:
            with pytest.raises(kind) as caught:
                await model.invoke(REQUEST)
    error = caught.value
    url = server.base_url + "/chat/completions"
    assert error.url == url and url in str(error), str(error)
    assert error.provider == "openai"
    assert KEY not in str(error) and KEY not in repr(error.args)
    if error.status is not None:
        assert f"HTTP {error.status}" in str(error)
        assert error.provider_message and error.provider_message in str(error)


async def test_credentials_and_queries_in_the_base_url_are_never_shown():
    """A base_url carrying user:password@ or ?key= is shown as scheme, host and path only."""
    async with openai_server([Fault.status(500)]) as server:
        port = server.base_url.split(":")[2].split("/")[0]
        base = f"http://me:hunter2secret@127.0.0.1:{port}/v1?api-key={KEY}"
        async with _model(base, retry=RetryPolicy.never()) as model:
            with pytest.raises(ServerError) as caught:
                await model.invoke(REQUEST)
    error = caught.value
    assert error.url == f"http://127.0.0.1:{port}/v1/chat/completions"
    assert "hunter2secret" not in str(error) and KEY not in str(error)
    assert server.request_count == 1


async def test_a_missing_key_names_the_variable_and_the_endpoint(monkeypatch):
    """No key: AuthenticationFailed names OPENAI_API_KEY and the URL, before any request."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with openai_server(["never"]) as server:
        async with iModel("openai/gpt-4.1-mini", base_url=server.base_url) as model:
            with pytest.raises(AuthenticationFailed) as caught:
                await model.invoke(REQUEST)
    assert "OPENAI_API_KEY" in str(caught.value)
    assert caught.value.url == server.base_url + "/chat/completions"
    assert server.request_count == 0


# -- a stalled server -----------------------------------------------------------------------


@both_formats
async def test_a_server_that_never_answers_says_how_long_nothing_came(provider):
    """Accepted, never answered: ProviderTimeout naming the URL and the timeout, per attempt."""
    notices: list[RetryNotice] = []
    with trio.fail_after(10):
        async with silent_listener() as base_url:
            retry = RetryPolicy(max_retries=1, base_delay=0.001, jitter=0)
            async with _model(
                base_url, provider, timeout=0.2, retry=retry, on_retry=notices.append
            ) as model:
                with pytest.raises(ProviderTimeout) as caught:
                    await model.invoke(REQUEST)
    message = str(caught.value)
    route = "/chat/completions" if provider == "openai" else "/messages"
    assert f"POST {base_url}{route} sent nothing for 0.2 s (ReadTimeout)" in message
    assert "larger timeout=" in message
    [notice] = notices
    assert (notice.retry, notice.max_retries, notice.status) == (1, 1, None)
    assert notice.message.endswith(
        "no answer in time from " + base_url + route + "; retry 1 of 1 in 0.0 s"
    )


async def test_a_stream_that_stalls_mid_reply_says_so():
    """A stream that stops sending after some text: ProviderTimeout after timeout, not a hang."""
    with trio.fail_after(10):
        async with openai_server(
            [Fault.stall_stream(after_chunks=3, reply="word " * 20)]
        ) as server:
            async with _model(server.base_url, timeout=0.2) as model:
                with pytest.raises(ProviderTimeout, match=r"sent nothing for 0\.2 s"):
                    async with model.stream(REQUEST) as stream:
                        async for _ in stream:
                            pass
                await server.wait_for_disconnects(1)


# -- retry notices ---------------------------------------------------------------------------


@both_formats
async def test_each_retry_is_told_to_on_retry_with_status_attempt_and_wait(provider):
    """503 then 429 then a reply: two notices, in order, with what the user needs."""
    notices: list[RetryNotice] = []
    script = [Fault.status(503), Fault.status(429, retry_after=0.01), "finally"]
    async with openai_server(script) as server:
        async with _model(server.base_url, provider, on_retry=notices.append) as model:
            assert (await model.invoke(REQUEST)).text == "finally"
    url = server.base_url + ("/chat/completions" if provider == "openai" else "/messages")
    assert [(n.status, n.retry, n.max_retries) for n in notices] == [(503, 1, 3), (429, 2, 3)]
    assert [type(n.error) for n in notices] == [ServerError, RateLimited]
    assert notices[1].delay == 0.01
    assert all(n.url == url and n.provider == provider for n in notices)
    assert notices[0].message == (
        f"{_name(provider)}: HTTP 503 (loopback: simulated HTTP 503) from {url}; "
        "retry 1 of 3 in 0.0 s"
    )
    assert model.statistics().retries == 2


async def test_a_streamed_call_tells_on_retry_too():
    """Streams retry before their first delta, and say so."""
    notices: list[RetryNotice] = []
    async with openai_server([Fault.status(500), "streamed"]) as server:
        async with _model(server.base_url, on_retry=notices.append) as model:
            async with model.stream(REQUEST) as stream:
                text = "".join([delta async for delta in stream])
    assert text == "streamed" and [n.status for n in notices] == [500]


async def test_a_failing_on_retry_callback_is_logged_not_fatal(caplog):
    """The callback raising does not break the call it observes."""

    def broken(notice: RetryNotice) -> None:
        raise RuntimeError("observer bug")

    model = ScriptedModel([ServerError("busy", status=503), "ok"], retry=FAST, on_retry=broken)
    with caplog.at_level(logging.INFO, logger="pride.llm"):
        assert (await model.invoke(REQUEST)).text == "ok"
    assert "the on_retry callback failed" in caplog.text
    assert "retry 1 of 3" in caplog.text  # the notice is logged as well


async def test_on_retry_is_kept_by_copy_and_left_out_of_to_dict():
    """A callback is code: copies keep it, serialisation does not carry it."""
    seen: list[RetryNotice] = []
    model = iModel("openai/m", api_key=KEY, on_retry=seen.append)
    assert "on_retry" not in model.to_dict()
    assert model.copy().on_retry is model.on_retry
    assert iModel.from_dict(model.to_dict()).on_retry is None
    with pytest.raises(ValueError, match="on_retry"):
        iModel.from_dict({**model.to_dict(), "on_retry": None})
