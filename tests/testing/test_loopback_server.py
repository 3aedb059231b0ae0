"""Tests for pride.testing's loopback server, driven with plain httpx."""

from __future__ import annotations

import logging

import httpx
import httpx_sse
import pytest
import trio

from pride.llm import ScriptedReply, ToolCall, Usage
from pride.testing import Fault, RecordedRequest, openai_server

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


async def _post(server, body=CHAT, path="/chat/completions", **kwargs) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(server.base_url + path, json=body, **kwargs)


async def test_binds_to_loopback_and_reports_its_urls():
    """base_url is http://127.0.0.1:PORT/v1 and root_url drops the /v1."""
    async with openai_server() as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url == server.root_url + "/v1"


async def test_echo_by_default_and_requests_are_recorded():
    """With no script the server echoes; each request is recorded with its headers."""
    async with openai_server() as server:
        response = await _post(server, headers={"Authorization": "Bearer t"})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "echo: hello"
    assert server.requests == [
        RecordedRequest("POST", "/v1/chat/completions", server.requests[0].headers, CHAT)
    ]
    assert server.requests[0].headers["authorization"] == "Bearer t"
    assert server.request_count == 1


async def test_script_items_are_served_in_order_and_can_be_added():
    """A list script is consumed in order; add() appends more items."""
    async with openai_server(["one"]) as server:
        server.add("two", ToolCall("f", {"x": 1}, id="call_7"))
        texts = [(await _post(server)).json()["choices"][0]["message"] for _ in range(3)]
    assert [t["content"] for t in texts[:2]] == ["one", "two"]
    assert texts[2]["tool_calls"][0] == {
        "id": "call_7",
        "type": "function",
        "function": {"name": "f", "arguments": '{"x": 1}'},
    }


async def test_an_exhausted_script_answers_400_and_logs(caplog):
    """Past the end of the script the server answers 400 saying so."""
    with caplog.at_level(logging.WARNING, logger="pride.testing"):
        async with openai_server(["only"]) as server:
            await _post(server)
            response = await _post(server)
    assert response.status_code == 400
    assert "script exhausted: it has 1 items and this is request 2" in response.text
    assert "script exhausted" in caplog.text


async def test_callables_receive_the_json_body():
    """A callable script (sync or async) is called with each request's JSON body."""

    async def reply(body):
        await trio.sleep(0)
        return "got " + body["messages"][-1]["content"]

    async with openai_server(reply) as server:
        response = await _post(server)
    assert response.json()["choices"][0]["message"]["content"] == "got hello"
    async with openai_server([lambda body: body["model"]]) as server:
        assert (await _post(server)).json()["choices"][0]["message"]["content"] == "m"


async def test_a_failing_callable_answers_500_and_is_recorded(caplog):
    """An exception in a script callable becomes HTTP 500, is logged and kept in errors."""

    def broken(body):
        raise ValueError("script bug")

    with caplog.at_level(logging.ERROR, logger="pride.testing"):
        async with openai_server(broken) as server:
            response = await _post(server)
    assert response.status_code == 500 and "script bug" in response.text
    assert [type(e) for e in server.errors] == [ValueError]
    assert "the script failed for request 1" in caplog.text
    with pytest.raises(TypeError, match="callable"):
        server.add("x")


async def test_a_bad_script_item_answers_500_and_the_server_keeps_serving(caplog):
    """An item of the wrong type is reported (500, errors, log); later items still work."""
    with caplog.at_level(logging.ERROR, logger="pride.testing"):
        async with openai_server([42, "fine"]) as server:
            bad = await _post(server)
            good = await _post(server)
    assert bad.status_code == 500 and "not int" in bad.text
    assert good.json()["choices"][0]["message"]["content"] == "fine"
    assert [type(e) for e in server.errors] == [TypeError]


async def test_unknown_routes_are_404():
    """Only the two chat routes exist."""
    async with openai_server() as server:
        response = await _post(server, path="/embeddings")
    assert response.status_code == 404 and "no route" in response.json()["error"]["message"]


async def test_usage_from_the_script_is_reported():
    """A ScriptedReply's usage appears in OpenAI and Anthropic wire shapes."""
    usage = Usage(
        100, 20, cached_tokens=30, cost_usd=0.01, cache_write_tokens=10, reasoning_tokens=5
    )
    reply = ScriptedReply("x", usage=usage)
    async with openai_server([reply, reply]) as server:
        openai_usage = (await _post(server)).json()["usage"]
        anthropic_usage = (await _post(server, path="/messages")).json()["usage"]
    assert openai_usage == {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 30},
        "completion_tokens_details": {"reasoning_tokens": 5},
        "cost": 0.01,
    }
    assert anthropic_usage == {
        "input_tokens": 60,
        "output_tokens": 20,
        "cache_read_input_tokens": 30,
        "cache_creation_input_tokens": 10,
    }


async def test_streams_are_chunked_server_sent_events():
    """A streaming request gets chunked text/event-stream, chunk_size characters per event."""
    body = {**CHAT, "stream": True}
    async with openai_server(["abcdefghij"], chunk_size=3) as server, httpx.AsyncClient() as client:
        url = server.base_url + "/chat/completions"
        async with httpx_sse.aconnect_sse(client, "POST", url, json=body) as source:
            assert source.response.headers["transfer-encoding"] == "chunked"
            data = [event.data async for event in source.aiter_sse()]
    assert data[-1] == "[DONE]"
    assert len(data) == 1 + 4 + 1 + 1  # role, 4 text chunks, finish, [DONE] (no usage asked)


async def test_status_faults_carry_retry_after_and_custom_bodies():
    """Fault.status sets the code, Retry-After and the body."""
    script = [Fault.status(429, retry_after=3), Fault.status(503, body="plain text")]
    async with openai_server(script) as server:
        limited = await _post(server)
        unavailable = await _post(server, path="/messages")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "3"
    assert limited.json()["error"]["type"] == "rate_limit_exceeded"
    assert (unavailable.status_code, unavailable.text) == (503, "plain text")


def test_fault_status_requires_an_error_code():
    """Fault.status is for statuses >= 400."""
    with pytest.raises(ValueError, match=">= 400"):
        Fault.status(200)


async def test_an_exception_in_the_block_propagates_unwrapped():
    """Leaving the server block with an error raises that error, not an exception group."""
    with pytest.raises(KeyError):
        async with openai_server():
            raise KeyError("mine")


async def test_the_server_stops_when_the_block_ends():
    """After the block, nothing listens on the port any more."""
    async with openai_server() as server:
        base_url = server.base_url
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.post(base_url + "/chat/completions", json=CHAT)


async def test_keep_alive_serves_several_requests_on_one_connection():
    """Requests reuse one HTTP/1.1 connection."""
    limits = httpx.Limits(max_connections=1)
    async with openai_server() as server, httpx.AsyncClient(limits=limits) as client:
        for _ in range(3):
            response = await client.post(server.base_url + "/chat/completions", json=CHAT)
            assert response.status_code == 200
        assert response.http_version == "HTTP/1.1"
    assert server.request_count == 3


async def test_recording_can_be_turned_off():
    """record=False keeps only the count."""
    async with openai_server(record=False) as server:
        await _post(server)
    assert server.requests == [] and server.request_count == 1
