"""A hostile provider cannot exhaust memory or time (issue 14, point 6).

Before: an endless SSE line grew RSS past 2 GiB, a 200 MB body was read whole
(900 MiB peak), and a body trickled one byte at a time never tripped the
per-read timeout. Every case here runs against the real loopback server,
whose endless faults repeat one preallocated piece (so its own memory stays
flat), and measures the peak of Python allocations with tracemalloc: a
deterministic bound, not a timing. Each test also has an outer
``trio.fail_after`` so that a regression fails instead of hanging.
"""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from pride.errors import (
    MalformedResponse,
    ProviderConnectionError,
    ProviderTimeout,
    ResponseTooLarge,
    ServerError,
)
from pride.llm import ModelRequest, ResponseLimits, RetryPolicy, iModel
from pride.testing import Fault, openai_server

KEY = "sk-test-bounds-0123456789abcdef"
REQUEST = ModelRequest(messages=[{"role": "user", "content": "hi"}], system="s")
MiB = 1024 * 1024
SMALL = ResponseLimits(max_body_bytes=MiB, max_event_bytes=256 * 1024, max_stream_bytes=2 * MiB)
both_formats = pytest.mark.parametrize("provider", ["openai", "anthropic"])


def _model(server, provider: str = "openai", **kwargs) -> iModel:
    kwargs.setdefault("retry", RetryPolicy.never())
    kwargs.setdefault("response_limits", SMALL)
    name = "openai/gpt-4.1-mini" if provider == "openai" else "anthropic/claude-sonnet-4"
    return iModel(name, base_url=server.base_url, api_key=KEY, **kwargs)


class Peak:
    """The peak of traced Python allocations inside the block, in bytes."""

    bytes = 0


@asynccontextmanager
async def peak_memory() -> AsyncIterator[Peak]:
    peak = Peak()
    tracemalloc.start()
    try:
        yield peak
    finally:
        _, peak.bytes = tracemalloc.get_traced_memory()
        tracemalloc.stop()


async def _read_stream(model: iModel) -> list[str]:
    deltas: list[str] = []
    async with model.stream(REQUEST) as stream:
        async for delta in stream:
            deltas.append(delta)
    return deltas


def test_the_default_limits_are_documented_figures():
    """32 MiB per body, 8 MiB per event or line, 64 MiB per stream; bad values refused."""
    limits = ResponseLimits()
    assert (limits.max_body_bytes, limits.max_event_bytes, limits.max_stream_bytes) == (
        32 * MiB,
        8 * MiB,
        64 * MiB,
    )
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_body_bytes"):
            ResponseLimits(max_body_bytes=bad)  # type: ignore[arg-type]
    assert iModel("openai/m", api_key="k").response_limits == limits


@both_formats
async def test_an_endless_body_stops_at_max_body_bytes_with_bounded_memory(provider):
    """A body that never ends: ResponseTooLarge after 1 MiB, the connection dropped."""
    with trio.fail_after(20):
        async with openai_server([Fault.endless_body()]) as server:
            async with _model(server, provider) as model:
                async with peak_memory() as peak:
                    with pytest.raises(ResponseTooLarge) as caught:
                        await model.invoke(REQUEST)
                await server.wait_for_disconnects(1)
    assert (caught.value.limit, caught.value.allowed) == ("max_body_bytes", MiB)
    assert "max_body_bytes=1,048,576" in str(caught.value) and server.base_url in str(caught.value)
    assert peak.bytes < 4 * MiB, f"peak {peak.bytes / MiB:.1f} MiB"
    assert server.request_count == 1  # too large is not retried


async def test_a_declared_length_past_the_bound_is_refused_before_reading():
    """content-length: 200 MB is refused from the head: almost nothing is read."""
    with trio.fail_after(20):
        async with openai_server([Fault.endless_body(content_length=200 * MiB)]) as server:
            async with _model(server) as model:
                async with peak_memory() as peak:
                    with pytest.raises(ResponseTooLarge, match="209,715,200 bytes"):
                        await model.invoke(REQUEST)
                await server.wait_for_disconnects(1)
    assert peak.bytes < MiB


async def test_the_default_body_bound_holds_a_200_mb_body_to_a_small_multiple():
    """With the default limits a 200 MB body costs about 2 x 32 MiB, not 900 MiB."""
    with trio.fail_after(60):
        async with openai_server([Fault.endless_body()]) as server:
            async with _model(server, response_limits=None) as model:
                async with peak_memory() as peak:
                    with pytest.raises(ResponseTooLarge, match="max_body_bytes"):
                        await model.invoke(REQUEST)
    assert peak.bytes < 3 * 32 * MiB, f"peak {peak.bytes / MiB:.1f} MiB"


@both_formats
async def test_an_endless_sse_line_stops_at_max_event_bytes(provider):
    """An event-stream line that never ends: ResponseTooLarge(max_event_bytes)."""
    with trio.fail_after(20):
        async with openai_server([Fault.endless_line()]) as server:
            async with _model(server, provider) as model:
                async with peak_memory() as peak:
                    with pytest.raises(ResponseTooLarge) as caught:
                        await _read_stream(model)
                await server.wait_for_disconnects(1)
    assert caught.value.limit == "max_event_bytes"
    assert peak.bytes < 2 * MiB, f"peak {peak.bytes / MiB:.1f} MiB"


async def test_one_event_of_many_data_lines_is_bounded_too():
    """Short data lines that never end an event still hit max_event_bytes."""
    body = "data: " + "y" * 1000 + "\n"
    fault = Fault.raw(body * 400, content_type="text/event-stream")  # 400 KB, one event
    async with openai_server([fault]) as server, _model(server) as model:
        with pytest.raises(ResponseTooLarge, match="an event of the stream"):
            await _read_stream(model)


@both_formats
async def test_endless_events_stop_at_max_stream_bytes(provider):
    """Valid deltas that never finish: the text delivered so far, then ResponseTooLarge."""
    delivered: list[str] = []
    with trio.fail_after(20):
        async with openai_server([Fault.endless_events()]) as server:
            limits = ResponseLimits(max_stream_bytes=512 * 1024)
            async with _model(server, provider, response_limits=limits) as model:
                async with peak_memory() as peak:
                    with pytest.raises(ResponseTooLarge) as caught:
                        async with model.stream(REQUEST) as stream:
                            async for delta in stream:
                                delivered.append(delta)
                await server.wait_for_disconnects(1)
    assert caught.value.limit == "max_stream_bytes" and caught.value.allowed == 512 * 1024
    assert delivered and set("".join(delivered).split()) == {"endless"}
    assert peak.bytes < 2 * MiB, f"peak {peak.bytes / MiB:.1f} MiB"
    assert model.statistics().failures == 1 and model.statistics().in_flight == 0


async def test_a_compressed_bomb_is_bounded_after_inflation():
    """32 MiB of zeros gzipped to ~32 KB: refused at 1 MiB inflated, memory stays small."""
    bomb = gzip.compress(b"0" * (32 * MiB))
    assert len(bomb) < 64 * 1024
    fault = Fault.raw(bomb, headers={"content-encoding": "gzip"})
    async with openai_server([fault]) as server, _model(server) as model:
        async with peak_memory() as peak:
            with pytest.raises(ResponseTooLarge, match="max_body_bytes"):
                await model.invoke(REQUEST)
    assert peak.bytes < 4 * MiB, f"peak {peak.bytes / MiB:.1f} MiB"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_replies_are_read(coding):
    """gzip, zlib-wrapped deflate and raw deflate bodies (plain and streamed) are inflated."""
    doc = {"choices": [{"index": 0, "message": {"content": "packed " * 5000}}], "model": "m"}
    events = "".join(
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': w}}]})}\n\n"
        for w in ["packed "] * 3000
    )
    events += 'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'

    def pack(data: bytes) -> bytes:
        if coding == "gzip":
            return gzip.compress(data)
        if coding == "deflate":
            return zlib.compress(data)
        deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return deflate.compress(data) + deflate.flush()

    header = {"content-encoding": "deflate" if coding == "raw-deflate" else coding}
    script = [
        Fault.raw(pack(json.dumps(doc).encode()), headers=header),
        Fault.raw(pack(events.encode()), content_type="text/event-stream", headers=header),
    ]
    async with openai_server(script) as server, _model(server) as model:
        assert (await model.invoke(REQUEST)).text == "packed " * 5000
        assert "".join(await _read_stream(model)) == "packed " * 3000
    assert server.requests[0].headers["accept-encoding"] == "gzip, deflate"


async def test_an_unasked_or_corrupt_coding_is_malformed():
    """A coding pride did not ask for (br) or a corrupt gzip body is MalformedResponse."""
    script = [
        Fault.raw(b"\x1b\x00", headers={"content-encoding": "br"}),
        Fault.raw(b"\x1f\x8b\x08\x00garbage", headers={"content-encoding": "gzip"}),
    ]
    async with openai_server(script) as server, _model(server) as model:
        with pytest.raises(MalformedResponse, match="'br' was not asked for"):
            await model.invoke(REQUEST)
        with pytest.raises(MalformedResponse, match="corrupt"):
            await model.invoke(REQUEST)


@both_formats
async def test_a_trickled_reply_cannot_outlast_call_timeout(provider):
    """One byte every 20 ms never trips the 5 s read timeout; call_timeout=0.5 s ends it."""
    reply = "trickled " * 50  # about 2 KB of JSON: 40 s at this pace
    with trio.fail_after(10):
        async with openai_server([Fault.trickle(reply, seconds=0.02)]) as server:
            async with _model(server, provider, timeout=5.0, call_timeout=0.5) as model:
                with pytest.raises(ProviderTimeout) as caught:
                    await model.invoke(REQUEST)
                await server.wait_for_disconnects(1)
    assert "call_timeout=0.5 s" in str(caught.value)
    assert caught.value.url is not None and caught.value.url in str(caught.value)


@both_formats
async def test_a_trickled_stream_cannot_outlast_call_timeout(provider):
    """A streamed reply trickled byte by byte fails at call_timeout, not after it ends."""
    with trio.fail_after(10):
        async with openai_server([Fault.trickle("trickled " * 50, seconds=0.01)]) as server:
            async with _model(server, provider, timeout=5.0, call_timeout=0.6) as model:
                with pytest.raises(ProviderTimeout, match=r"call_timeout=0\.6 s"):
                    await _read_stream(model)
                await server.wait_for_disconnects(1)
            assert model.statistics().in_flight == 0


async def test_a_trickle_within_call_timeout_is_just_slow():
    """A short reply trickled within the allowance is read whole."""
    async with openai_server([Fault.trickle("ok", seconds=0.0)]) as server:
        async with _model(server, call_timeout=30.0) as model:
            assert (await model.invoke(REQUEST)).text == "ok"


async def test_no_retry_starts_when_it_could_not_finish_before_call_timeout():
    """A 500 whose backoff would end past call_timeout is raised at once, not retried."""
    script = [Fault.status(500), "never"]
    async with openai_server(script) as server:
        retry = RetryPolicy(base_delay=2.0, jitter=0)
        async with _model(server, call_timeout=1.0, retry=retry) as model:
            with pytest.raises(ServerError):
                await model.invoke(REQUEST)
    assert server.request_count == 1


async def test_call_timeout_counts_from_admission_not_from_the_queue():
    """Time spent waiting for the rate limiter is not the provider's: it is not counted.

    Two calls of 0.4 s each through a concurrency limit of one: the second
    waits 0.4 s for its place, then takes 0.4 s, and fits its 0.7 s allowance.
    """
    script = [Fault.slow_first_byte(0.4, "first"), Fault.slow_first_byte(0.4, "second")]
    results: list[str] = []
    async with openai_server(script) as server:
        async with _model(server, call_timeout=0.7, concurrency_limit=1) as model:

            async def call() -> None:
                results.append((await model.invoke(REQUEST)).text)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                nursery.start_soon(call)
    assert sorted(results) == ["first", "second"]


async def test_a_stream_cut_by_call_timeout_is_not_retried():
    """The deadline has passed: the timeout is raised, no second request is made."""
    async with openai_server([Fault.trickle("word " * 200, seconds=0.0005), "x"]) as server:
        async with _model(server, call_timeout=0.5, retry=RetryPolicy(base_delay=0.001)) as m:
            with pytest.raises((ProviderTimeout, ProviderConnectionError)):
                await _read_stream(m)
    assert server.request_count == 1
