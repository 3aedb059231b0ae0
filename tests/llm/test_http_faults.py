"""Every loopback fault ends in the right exception or a counted, successful retry.

These run on the real clock (MockClock's autojump would jump time while
sockets wait) with millisecond backoff delays.
"""

from __future__ import annotations

import json

import pytest
import trio

from pride.errors import (
    AuthenticationFailed,
    BadRequest,
    MalformedResponse,
    ProviderConnectionError,
    ProviderTimeout,
    RateLimited,
    ServerError,
)
from pride.llm import ModelRequest, RetryPolicy, iModel
from pride.testing import Fault, openai_server

KEY = "sk-test-faults-0123456789abcdef"
FAST = RetryPolicy(base_delay=0.001, max_delay=0.01, jitter=0)
LONG = "word " * 40
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}])
ANTHROPIC_REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], system="s")


def _model(server, provider: str = "openai", **kwargs) -> iModel:
    kwargs.setdefault("retry", FAST)
    name = "openai/gpt-4.1-mini" if provider == "openai" else "anthropic/claude-sonnet-4"
    return iModel(name, base_url=server.base_url, api_key=KEY, **kwargs)


def _request(provider: str) -> ModelRequest:
    return REQUEST if provider == "openai" else ANTHROPIC_REQUEST


async def _read(model: iModel, request: ModelRequest) -> tuple[list[str], str]:
    async with model.stream(request) as stream:
        deltas = [delta async for delta in stream]
    return deltas, stream.response.text


both_formats = pytest.mark.parametrize("provider", ["openai", "anthropic"])


@both_formats
@pytest.mark.parametrize("status", [429, 500, 503])
async def test_a_retryable_status_is_retried_until_success(provider, status):
    """429, 500 and 503 are retried; the call succeeds on the next attempt."""
    script = [Fault.status(status), Fault.status(status), "recovered"]
    async with openai_server(script) as server:
        async with _model(server, provider) as model:
            reply = await model.invoke(_request(provider))
    assert reply.text == "recovered"
    assert server.request_count == 3
    assert model.statistics().retries == 2


@both_formats
async def test_retries_end_with_the_last_error_carrying_status_and_message(provider):
    """After max_retries the typed error is raised with the status and provider text."""
    script = [Fault.status(503)] * 3
    async with openai_server(script) as server:
        async with _model(
            server, provider, retry=RetryPolicy(max_retries=2, base_delay=0.001)
        ) as m:
            with pytest.raises(ServerError) as caught:
                await m.invoke(_request(provider))
    assert server.request_count == 3
    assert caught.value.status == 503
    assert caught.value.provider_message == "loopback: simulated HTTP 503"
    assert caught.value.provider == provider
    assert m.statistics().failures == 1


async def test_retry_after_is_honoured():
    """A 429's Retry-After delays the retry by at least that long."""
    script = [Fault.status(429, retry_after=0.2), "ok"]
    async with openai_server(script) as server:
        async with _model(server) as model:
            start = trio.current_time()
            reply = await model.invoke(REQUEST)
            elapsed = trio.current_time() - start
    assert reply.text == "ok" and server.request_count == 2
    assert elapsed >= 0.2


async def test_a_rate_limit_that_outlasts_the_deadline_is_raised_at_once():
    """Retry-After beyond the retry deadline gives RateLimited without waiting."""
    script = [Fault.status(429, retry_after=120), "never"]
    async with openai_server(script) as server:
        async with _model(server, retry=RetryPolicy(deadline=60.0)) as model:
            with pytest.raises(RateLimited) as caught:
                await model.invoke(REQUEST)
    assert caught.value.retry_after == 120.0 and caught.value.status == 429
    assert server.request_count == 1


@both_formats
@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, AuthenticationFailed),
        (403, AuthenticationFailed),
        (400, BadRequest),
        (422, BadRequest),
    ],
)
async def test_other_4xx_are_not_retried(provider, status, error):
    """401/403 and other 4xx fail at once, after exactly one attempt."""
    async with openai_server([Fault.status(status), "never"]) as server:
        async with _model(server, provider) as model:
            with pytest.raises(error) as caught:
                await model.invoke(_request(provider))
    assert server.request_count == 1
    assert caught.value.status == status


async def test_a_slow_first_byte_times_out_and_is_retried():
    """No byte within the timeout is ProviderTimeout, retried up to max_retries."""
    script = [Fault.slow_first_byte(5.0), Fault.slow_first_byte(5.0)]
    async with openai_server(script) as server:
        retry = RetryPolicy(max_retries=1, base_delay=0.001)
        async with _model(server, timeout=0.1, retry=retry) as model:
            with pytest.raises(ProviderTimeout, match="timeout"):
                await model.invoke(REQUEST)
    assert server.request_count == 2


async def test_a_slow_first_byte_within_the_timeout_succeeds():
    """A delay shorter than the timeout is just a slow reply."""
    async with openai_server([Fault.slow_first_byte(0.05, reply="late but fine")]) as server:
        async with _model(server, timeout=5.0) as model:
            assert (await model.invoke(REQUEST)).text == "late but fine"
    assert server.request_count == 1


async def test_a_body_cut_short_is_a_connection_error_and_retried():
    """A plain reply cut mid-body is ProviderConnectionError; the retry succeeds."""
    async with openai_server([Fault.cut_stream(), "whole"]) as server:
        async with _model(server) as model:
            assert (await model.invoke(REQUEST)).text == "whole"
    assert server.request_count == 2


@both_formats
async def test_a_stream_cut_before_any_text_is_retried(provider):
    """A stream cut before the first delta is retried transparently."""
    async with openai_server(
        [Fault.cut_stream(after_chunks=1, reply=LONG), "second try"]
    ) as server:
        async with _model(server, provider) as model:
            deltas, text = await _read(model, _request(provider))
    assert text == "second try" and "".join(deltas) == "second try"
    assert server.request_count == 2


@both_formats
async def test_a_stream_cut_after_text_was_delivered_is_not_retried(provider):
    """Once a delta went out, a cut raises ProviderConnectionError with no retry."""
    delivered: list[str] = []
    async with openai_server([Fault.cut_stream(after_chunks=5, reply=LONG), "x"]) as server:
        async with _model(server, provider) as model:
            with pytest.raises(ProviderConnectionError):
                async with model.stream(_request(provider)) as stream:
                    async for delta in stream:
                        delivered.append(delta)
    assert delivered and LONG.startswith("".join(delivered))
    assert server.request_count == 1
    assert model.statistics().failures == 1


async def test_malformed_json_is_not_retried():
    """An unreadable 200 body is MalformedResponse after one attempt."""
    async with openai_server([Fault.malformed_json(), "never"]) as server:
        async with _model(server) as model:
            with pytest.raises(MalformedResponse, match="not JSON"):
                await model.invoke(REQUEST)
    assert server.request_count == 1


@both_formats
async def test_malformed_sse_is_not_retried(provider):
    """An event whose data is not JSON is MalformedResponse after one attempt."""
    async with openai_server([Fault.malformed_sse(), "never"]) as server:
        async with _model(server, provider) as model:
            with pytest.raises(MalformedResponse, match="stream event is not JSON"):
                await _read(model, _request(provider))
    assert server.request_count == 1


async def test_a_json_reply_to_a_stream_request_is_malformed():
    """A non-SSE content type on a streaming call is MalformedResponse."""
    async with openai_server([Fault.raw({"choices": []})]) as server:
        async with _model(server) as model:
            with pytest.raises(MalformedResponse, match="not an event stream"):
                await _read(model, REQUEST)


@both_formats
async def test_an_error_status_on_a_stream_is_retried_or_raised(provider):
    """Streaming calls map statuses like plain ones: 429 retried, 401 raised."""
    async with openai_server([Fault.status(429), "streamed", Fault.status(401)]) as server:
        async with _model(server, provider) as model:
            _, text = await _read(model, _request(provider))
            with pytest.raises(AuthenticationFailed):
                await _read(model, _request(provider))
    assert text == "streamed" and server.request_count == 3


async def test_an_error_chunk_inside_an_openai_stream_is_raised():
    """An OpenAI `{"error": ...}` chunk in a 200 stream becomes the matching error."""
    events = (
        'data: {"choices": [{"index": 0, "delta": {"content": "par"}}]}\n\n'
        'data: {"error": {"type": "rate_limit_exceeded", "message": "slow down"}}\n\n'
    )
    async with openai_server([Fault.raw(events, content_type="text/event-stream")]) as server:
        async with _model(server) as model:
            with pytest.raises(RateLimited, match="slow down"):
                await _read(model, REQUEST)
    assert server.request_count == 1  # text was delivered, so no retry


async def test_a_stream_ending_without_done_is_a_connection_error():
    """A stream that stops before [DONE] or a finish reason is incomplete."""
    events = 'data: {"choices": [{"index": 0, "delta": {"content": "half"}}]}\n\n'
    async with openai_server([Fault.raw(events, content_type="text/event-stream")]) as server:
        async with _model(server) as model:
            with pytest.raises(ProviderConnectionError, match="before the reply was complete"):
                await _read(model, REQUEST)


async def test_connection_refused_is_a_connection_error_after_retries():
    """Nothing listening is ProviderConnectionError, after max_retries retries."""
    async with openai_server() as server:
        base_url = server.base_url
    async with iModel("openai/m", base_url=base_url, api_key=KEY, retry=FAST) as model:
        with pytest.raises(ProviderConnectionError, match="connection failed"):
            await model.invoke(REQUEST)
    assert model.statistics().retries == 3


async def test_a_bad_url_scheme_is_not_retried():
    """A base_url httpx cannot use fails at once with a plain ProviderError."""
    from pride.errors import ProviderError

    async with iModel("acme/m", base_url="ftp://nowhere/v1", api_key=KEY, retry=FAST) as model:
        with pytest.raises(ProviderError, match="cannot send"):
            await model.invoke(REQUEST)
    assert model.statistics().retries == 0


@both_formats
async def test_leaving_a_stream_early_closes_the_connection(provider):
    """break out of a stream: the server sees the client hang up; nothing is left in flight."""
    async with openai_server([Fault.stall_stream(after_chunks=4, reply=LONG)]) as server:
        async with _model(server, provider) as model:
            async with model.stream(_request(provider)) as stream:
                async for _ in stream:
                    break
            with trio.fail_after(5):
                await server.wait_for_disconnects(1)
            assert model.statistics().in_flight == 0
            assert model.statistics().failures == 0


async def test_cancelling_a_stream_closes_the_connection():
    """A cancelled stream read hangs up promptly and the cancellation propagates."""
    async with openai_server([Fault.stall_stream(after_chunks=4, reply=LONG)]) as server:
        async with _model(server) as model:
            got: list[str] = []
            with trio.move_on_after(0.2) as scope:
                async with model.stream(REQUEST) as stream:
                    async for delta in stream:
                        got.append(delta)
            assert scope.cancelled_caught and got
            with trio.fail_after(5):
                await server.wait_for_disconnects(1)
    assert model.statistics().in_flight == 0


async def test_an_exception_in_the_stream_block_closes_the_connection():
    """An error raised by the caller inside the block propagates and hangs up."""
    async with openai_server([Fault.stall_stream(after_chunks=4, reply=LONG)]) as server:
        async with _model(server) as model:
            with pytest.raises(KeyError):
                async with model.stream(REQUEST) as stream:
                    async for _ in stream:
                        raise KeyError("mine")
            with trio.fail_after(5):
                await server.wait_for_disconnects(1)


async def test_the_retry_deadline_bounds_retrying():
    """With a tiny total deadline no retry starts."""
    async with openai_server([Fault.status(500), "never"]) as server:
        policy = RetryPolicy(base_delay=0.5, deadline=0.1)
        async with _model(server, retry=policy) as model:
            with pytest.raises(ServerError):
                await model.invoke(REQUEST)
    assert server.request_count == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic", "responses"])
async def test_a_stream_held_open_after_its_end_still_delivers_its_reply(provider, autojump_clock):
    """A server that sends a whole stream, its end marker included ([DONE],
    message_stop, response.completed), and then keeps the connection open without
    ending the body: the reply is complete, so it is delivered. pride read on to the
    end of the body for the connection's reuse, without bound, so the call waited
    for the model's timeout and failed with ProviderTimeout (the text streamed, the
    turn lost). Now what comes after the end is read for AFTER_END_TIMEOUT at most.

    MockClock: no other timer runs (no timeout, no call_timeout), so whenever its
    autojump fires the grace after the end, the reply is the same.
    """
    kwargs = {"openai_api": "responses"} if provider == "responses" else {}
    fault = Fault.stall_stream(after_chunks=10_000, reply="all of it")
    async with openai_server([fault]) as server:
        async with _model(
            server,
            "openai" if provider == "responses" else provider,
            timeout=None,
            call_timeout=None,
            **kwargs,
        ) as model:
            with trio.fail_after(60):  # virtual seconds: the old wait jumps here at once
                deltas, text = await _read(model, _request(provider))
        await server.wait_for_disconnects(1)  # the held connection was dropped
    assert text == "all of it" == "".join(deltas)
    assert model.statistics().failures == 0


async def test_a_stream_opening_with_a_byte_order_mark_loses_no_text():
    """A chat-completions stream whose body starts with a UTF-8 byte order mark: its
    first event (the first words of the reply) was dropped, the reply read short."""
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello"}}]},
        {"choices": [{"index": 0, "delta": {"content": " world"}, "finish_reason": "stop"}]},
    ]
    data = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    raw = Fault.raw(b"\xef\xbb\xbf" + data.encode(), content_type="text/event-stream")
    async with openai_server([raw]) as server:
        async with _model(server) as model:
            deltas, text = await _read(model, REQUEST)
    assert text == "Hello world" and deltas == ["Hello", " world"]
