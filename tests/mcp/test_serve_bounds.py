"""``pride mcp --http``'s bounds, like ``pride serve``'s ``--max-concurrent`` and
``--max-watchers``: a real ``serve_mcp`` on a free loopback port, driven by pride's
own MCP client and by raw httpx as a greedy client would.

Before: a server had no bound of its own on calls (each call past a busy branch's
mailbox waited in a handler task, as many as the client sent), none on GET
streams, and the SDK's 10,000 sessions (about 70 KB each, kept 30 minutes idle:
a probe opened 2,000 and grew the process by 143 MB).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing
from mcp import types

from pride import Branch, RunStart, ScriptedModel, Session
from pride.llm import ModelRequest
from pride.mcp import serve_mcp

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def _reply(request: ModelRequest) -> str:
    text = str(request.messages[-1]["content"])
    if text == "slow":
        await trio.sleep_forever()  # held until its client cancels it
    return f"echo: {text}"


def _initialize() -> dict[str, Any]:
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "greedy", "version": "1"}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}


async def _session_id(client: httpx.AsyncClient, url: str) -> str:
    response = await client.post(url, json=_initialize(), headers=ACCEPT)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    headers = {**ACCEPT, "mcp-session-id": session_id}
    done = await client.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202, done.text
    return session_id


@pytest.fixture
async def served(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Session, str]]:
    bounds: dict[str, Any] = getattr(request, "param", {})
    async with Session() as session:
        await session.spawn(Branch(name="helper", chat_model=ScriptedModel(_reply)))
        async with trio.open_nursery() as nursery:
            serving = functools.partial(serve_mcp, session, ["helper"], http=0, **bounds)
            url = await nursery.start(serving)
            yield session, url
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("served", [{"max_concurrent": 1, "queue_wait": 0.2}], indirect=True)
async def test_a_call_past_max_concurrent_is_refused_naming_the_bound(
    served: tuple[Session, str],
) -> None:
    """One call holds the one place (its turn runs until cancelled); the next call,
    waiting 0.2 s for a place, is an error result naming ``--max-concurrent`` and no
    turn of its own; once the first is cancelled its place serves the next call."""
    session, url = served
    started = trio.Event()
    session.observe(RunStart, handler=lambda _: started.set())
    client = await session.spawn_mcp("client", url=url)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.call_tool, "ask_helper", {"instruction": "slow"})
            await started.wait()
            refused = await client.call_tool("ask_helper", {"instruction": "hi"})
            nursery.cancel_scope.cancel()
        assert refused.isError
        [text] = refused.content
        assert isinstance(text, types.TextContent)
        assert text.text == "1 calls are being served (--max-concurrent); try again shortly"
        answered = await client.call_tool("ask_helper", {"instruction": "again"})
    assert not answered.isError
    [text] = answered.content
    assert isinstance(text, types.TextContent) and text.text == "echo: again"


@pytest.mark.parametrize("served", [{"max_watchers": 1, "queue_wait": 0.2}], indirect=True)
async def test_a_get_stream_past_max_watchers_is_503_and_calls_still_serve(
    served: tuple[Session, str],
) -> None:
    """One client's GET stream holds the one watcher place; another's GET is 503 with
    Retry-After naming ``--max-watchers``, and its tool calls are served meanwhile:
    idle streams hold places of their own, never a call's."""
    _, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        with trio.fail_after(10):
            first = await _session_id(client, url)
            second = await _session_id(client, url)
            sse = {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}
            async with client.stream("GET", url, headers={**sse, "mcp-session-id": first}) as held:
                assert held.status_code == 200
                refused = await client.get(url, headers={**sse, "mcp-session-id": second})
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "1"
                assert "1 GET streams are open (--max-watchers)" in refused.text
                call = {"name": "ask_helper", "arguments": {"instruction": "hi"}}
                answer = await client.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                    headers={**ACCEPT, "mcp-session-id": second},
                )
                assert answer.status_code == 200
                assert "echo: hi" in answer.text


@pytest.mark.parametrize("served", [{"max_sessions": 2}], indirect=True)
async def test_a_session_past_max_sessions_is_503_and_the_open_ones_serve(
    served: tuple[Session, str],
) -> None:
    """Two sessions open; a third initialize is 503 and holds nothing; the two serve on."""
    _, url = served
    async with httpx.AsyncClient(timeout=10) as client:
        with trio.fail_after(10):
            first = await _session_id(client, url)
            await _session_id(client, url)
            refused = await client.post(url, json=_initialize(), headers=ACCEPT)
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert (
                error["message"] == "2 MCP sessions are open (--max-sessions); one must end first"
            )
            listed = await client.post(
                url,
                json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
                headers={**ACCEPT, "mcp-session-id": first},
            )
            assert listed.status_code == 200 and "ask_helper" in listed.text


@pytest.mark.parametrize(
    ("bound", "value"),
    [("max_concurrent", 0), ("max_watchers", True), ("max_sessions", 1.5), ("queue_wait", -1)],
)
async def test_a_bound_that_is_not_a_positive_count_is_refused_naming_it(
    bound: str, value: object
) -> None:
    async with Session() as session:
        await session.spawn(Branch(name="helper", chat_model=ScriptedModel(["hi"])))
        with pytest.raises(ValueError, match=bound):
            await serve_mcp(session, ["helper"], http=0, **{bound: value})


@pytest.mark.parametrize("served", [{"queue_wait": 0}], indirect=True)
async def test_a_queue_wait_of_0_takes_a_free_place_at_once(
    served: tuple[Session, str],
) -> None:
    """``queue_wait=0`` means "a free place at once, else refused", never "refused":
    with every place free a call is answered and a GET stream opens.

    Before: the wait ran under a deadline already past, and trio's acquire checks
    for cancellation before it takes even a free place, so every call was refused
    with ``--max-concurrent`` and every GET stream was 503."""
    session, url = served
    client = await session.spawn_mcp("client", url=url)
    with trio.fail_after(10):
        answered = await client.call_tool("ask_helper", {"instruction": "hi"})
        assert not answered.isError, answered.content
        [text] = answered.content
        assert isinstance(text, types.TextContent) and text.text == "echo: hi"
        async with httpx.AsyncClient(timeout=10) as raw:
            session_id = await _session_id(raw, url)
            sse = {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}
            headers = {**sse, "mcp-session-id": session_id}
            async with raw.stream("GET", url, headers=headers) as stream:
                assert stream.status_code == 200


class _Heard(logging.Handler):
    """Sets an event once a record of ``pride.mcp`` says ``words`` (the client's log
    is how it says what it does about a refused GET stream)."""

    def __init__(self, *words: str) -> None:
        super().__init__(logging.DEBUG)
        self.events = {word: trio.Event() for word in words}
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.records.append(text)
        for word, event in self.events.items():
            if word in text:
                event.set()


@contextlib.contextmanager
def _hearing(*words: str) -> Iterator[_Heard]:
    logger = logging.getLogger("pride.mcp")
    heard, level = _Heard(*words), logger.level
    logger.addHandler(heard)
    logger.setLevel(logging.DEBUG)
    try:
        yield heard
    finally:
        logger.removeHandler(heard)
        logger.setLevel(level)


_REFUSED = "GET stream was refused 1 time(s) as busy"
_OPENED = "the GET stream opened after 1 refusal(s)"


@pytest.mark.parametrize("served", [{"max_watchers": 1, "queue_wait": 0}], indirect=True)
async def test_pride_s_client_asks_again_for_a_get_stream_refused_with_503(
    served: tuple[Session, str],
) -> None:
    """A greedy client holds the one GET stream place; pride's own client is
    refused 503 (``Retry-After: 1``), says so, waits, and asks again: once the
    place is free its stream opens (and holds the place: another GET is 503).

    Before: the refused stream was logged at debug level and never asked for
    again, so the client went without the server's notices for good."""
    _, url = served
    sse = {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}
    with _hearing(_REFUSED, _OPENED) as heard, trio.fail_after(10):
        async with httpx.AsyncClient(timeout=10) as raw, Session() as clients:
            greedy = await _session_id(raw, url)
            async with raw.stream("GET", url, headers={**sse, "mcp-session-id": greedy}) as held:
                assert held.status_code == 200
                await clients.spawn_mcp("client", url=url)
                await heard.events[_REFUSED].wait()
            await heard.events[_OPENED].wait()
            other = await _session_id(raw, url)
            refused = await raw.get(url, headers={**sse, "mcp-session-id": other})
            assert refused.status_code == 503, refused.text
    [warning] = [text for text in heard.records if _REFUSED in text]
    assert "--max-watchers" in warning and "asking again in 1 s" in warning


@pytest.mark.parametrize("served", [{"max_watchers": 1, "queue_wait": 0}], indirect=True)
async def test_a_client_waiting_to_ask_again_for_its_get_stream_closes_at_once(
    served: tuple[Session, str],
) -> None:
    """Closed while it waits to ask again for a refused GET stream, the client's
    handle closes at once (well within the wait) and asks no more."""
    _, url = served
    sse = {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}
    with _hearing(_REFUSED) as heard, trio.fail_after(10):
        async with httpx.AsyncClient(timeout=10) as raw:
            greedy = await _session_id(raw, url)
            async with raw.stream("GET", url, headers={**sse, "mcp-session-id": greedy}) as held:
                assert held.status_code == 200
                async with Session() as clients:
                    await clients.spawn_mcp("client", url=url)
                    await heard.events[_REFUSED].wait()
                    closing = trio.current_time()
                assert trio.current_time() - closing < 0.5
    assert not [text for text in heard.records if "refused; again" in text]


def _said(heard: _Heard, words: str) -> list[str]:
    return [text for text in heard.records if words in text]


@pytest.mark.parametrize("served", [{"max_concurrent": 1, "queue_wait": 0}], indirect=True)
async def test_calls_refused_in_a_flood_log_the_first_ten_then_a_count_a_minute(
    served: tuple[Session, str], autojump_clock: trio.testing.MockClock
) -> None:
    """A client calling in a loop past ``--max-concurrent`` gets each call refused,
    and the log says the first ten, then counts the rest once a minute. Before,
    each refusal was a warning: a flood of calls was a flood of the log."""
    _, url = served
    started = trio.Event()
    served[0].observe(RunStart, handler=lambda _: started.set())

    async def ask(raw: httpx.AsyncClient, session_id: str, instruction: str) -> str:
        arguments = {"name": "ask_helper", "arguments": {"instruction": instruction}}
        message = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": arguments}
        headers = {**ACCEPT, "mcp-session-id": session_id}
        return (await raw.post(url, json=message, headers=headers)).text

    with _hearing() as heard:
        async with (
            httpx.AsyncClient(timeout=None) as raw,
            Session() as clients,
            trio.open_nursery() as nursery,
        ):
            client = await clients.spawn_mcp("client", url=url)
            session_id = await _session_id(raw, url)
            # Held until cancelled (pride's client tells the server so): the one place.
            nursery.start_soon(client.call_tool, "ask_helper", {"instruction": "slow"})
            await started.wait()
            for _ in range(25):
                assert "--max-concurrent" in await ask(raw, session_id, "hi")
            await trio.sleep(61)
            assert "--max-concurrent" in await ask(raw, session_id, "hi")
            nursery.cancel_scope.cancel()
    refused = _said(heard, "MCP: refused a call of 'ask_helper'")
    assert len(refused) == 10
    assert "further calls refused (--max-concurrent) are counted, every 60 s" in refused[-1]
    [counted] = _said(heard, "more calls refused")
    assert counted == "16 more calls refused (--max-concurrent) in the last 61 s (26 in all)"


@pytest.mark.parametrize("served", [{"max_watchers": 1, "queue_wait": 0}], indirect=True)
async def test_get_streams_refused_in_a_flood_log_the_first_ten_then_a_count_a_minute(
    served: tuple[Session, str], autojump_clock: trio.testing.MockClock
) -> None:
    """The same for GET streams past ``--max-watchers``: each is 503, and the log
    says the first ten, then counts the rest once a minute."""
    _, url = served
    sse = {"accept": "text/event-stream", "mcp-protocol-version": "2025-06-18"}
    with _hearing() as heard:
        async with httpx.AsyncClient(timeout=None) as raw:
            greedy = await _session_id(raw, url)
            other = {**sse, "mcp-session-id": await _session_id(raw, url)}
            async with raw.stream("GET", url, headers={**sse, "mcp-session-id": greedy}) as held:
                assert held.status_code == 200
                for _ in range(25):
                    assert (await raw.get(url, headers=other)).status_code == 503
                await trio.sleep(61)
                assert (await raw.get(url, headers=other)).status_code == 503
    refused = _said(heard, "refused a GET stream (503)")
    assert len(refused) == 10
    assert "further GET streams refused (--max-watchers) are counted" in refused[-1]
    [counted] = _said(heard, "more GET streams refused")
    assert counted == "16 more GET streams refused (--max-watchers) in the last 61 s (26 in all)"
