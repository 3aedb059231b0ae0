"""Event streams and turns do not share their places.

A ``GET /v1/events`` stream is open for as long as its client likes, and
mostly idle; a turn's request ends with its turn. When both took places of
``--max-concurrent``, a token holder who opened that many idle event streams
made every ask wait and get 503. Watchers now have their own bound,
``--max-watchers``: neither kind can starve the other. The server runs in the
test's process (`conftest.in_process`), on a real loopback socket.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from pride import Branch, RunStart, ScriptedModel, Session
from pride.llm import ModelRequest
from pride.serve import ServeOptions

from .conftest import TOKEN, in_process

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


async def _script(request: ModelRequest) -> str:
    last = request.messages[-1].get("content")
    if last == "hang":
        await trio.sleep_forever()
    return f"echo: {last}"


def agent(name: str) -> Branch:
    """A branch that echoes its instruction, or waits until cancelled for ``hang``."""
    return Branch(name=name, chat_model=ScriptedModel(_script, keep_calls=0))


def work(instruction: str) -> dict[str, Any]:
    return {"command": {"type": "ChatAndRecord", "instruction": instruction}}


@contextlib.asynccontextmanager
async def watching(http: httpx.AsyncClient) -> AsyncIterator[httpx.Response]:
    """An open ``GET /v1/events`` whose answer has begun (its status and headers)."""
    async with http.stream("GET", "/v1/events") as response:
        yield response


async def test_idle_event_streams_never_take_the_places_of_turns() -> None:
    """As many idle event streams as ``--max-concurrent`` left no place for a turn:
    an ask waited, then was 503; it is answered now."""
    async with Session("watchers") as session:
        await session.spawn(agent("writer"))
        options = ServeOptions(port=0, max_concurrent=2, queue_wait=0.2)
        async with (
            in_process(session, options) as (_, url),
            httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=10) as http,
            watching(http) as first,
            watching(http) as second,
        ):
            assert first.status_code == second.status_code == 200
            answer = await http.post("/v1/branches/writer/ask", json=work("through"))
            assert answer.status_code == 200, answer.text
            assert answer.json()["result"] == "echo: through"


async def test_turns_holding_every_place_never_keep_a_watcher_out() -> None:
    """Turns holding every place of ``--max-concurrent`` refused an event stream (503);
    a watcher's place is its own, so it opens and sees the turns' signals."""
    async with Session("watchers") as session:
        await session.spawn(agent("writer"))
        await session.spawn(agent("reader"))
        options = ServeOptions(port=0, max_concurrent=1, queue_wait=0.2)
        async with (
            in_process(session, options) as (_, url),
            httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=10) as http,
            trio.open_nursery() as holders,
        ):
            busy = trio.Event()
            session.observe(RunStart, handler=lambda _: busy.set())
            holders.start_soon(partial(http.post, "/v1/branches/writer/ask", json=work("hang")))
            await busy.wait()
            refused = await http.post("/v1/branches/reader/ask", json=work("x"))
            assert refused.status_code == 503, refused.text  # the one turn place is taken
            async with watching(http) as events:
                assert events.status_code == 200
            holders.cancel_scope.cancel()


async def test_past_max_watchers_an_event_stream_is_503_with_retry_after() -> None:
    """Past ``--max-watchers`` an event stream waits briefly for a place, then is 503
    with ``Retry-After`` naming the option; asks are served meanwhile, and a watcher
    that leaves gives its place to the next."""
    async with Session("watchers") as session:
        await session.spawn(agent("writer"))
        options = ServeOptions(port=0, max_concurrent=1, max_watchers=1, queue_wait=0.5)
        async with (
            in_process(session, options) as (_, url),
            httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=10) as http,
        ):
            async with watching(http) as first:
                assert first.status_code == 200
                refused = await http.get("/v1/events")
                assert refused.status_code == 503, refused.text
                assert int(refused.headers["retry-after"]) >= 1
                error = refused.json()["error"]
                assert error["type"] == "Overloaded"
                assert "--max-watchers" in error["message"]
                answer = await http.post("/v1/branches/writer/ask", json=work("meanwhile"))
                assert answer.status_code == 200, answer.text
                metrics = (await http.get("/metrics")).text
                assert "pride_http_watchers 1" in metrics
                assert "pride_http_in_flight 0" in metrics
            # The first gives its place back once its server side sees the disconnect:
            # waited for by its figure, not by a time.
            while "pride_http_watchers 0" not in (await http.get("/metrics")).text:
                await trio.testing.wait_all_tasks_blocked()
            async with watching(http) as again:
                assert again.status_code == 200


def test_max_watchers_must_be_at_least_one() -> None:
    """A bound of no watchers at all is refused, naming the option."""
    with pytest.raises(ValueError, match="max_watchers"):
        ServeOptions(max_watchers=0)


async def _metric(http: httpx.AsyncClient, line: str) -> None:
    """Wait until ``line`` is among the server's metrics (its own figure, not a time)."""
    while line not in (await http.get("/metrics")).text:
        await trio.testing.wait_all_tasks_blocked()


async def test_a_watcher_that_hangs_up_while_waiting_for_a_place_holds_none() -> None:
    """With the one watcher place taken, a second event stream waits for it (a long
    ``queue_wait``) and its client hangs up meanwhile. When the first leaves, the place
    does not stay with the gone client: the stream that took it sees the hang-up and
    gives it back, and a third watcher opens."""
    async with Session("watchers") as session:
        await session.spawn(agent("writer"))
        options = ServeOptions(port=0, max_watchers=1, queue_wait=30.0)
        async with (
            in_process(session, options) as (_, url),
            httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=10) as http,
        ):
            with trio.fail_after(5):  # a bound on the test, not a synchronisation
                async with watching(http) as first:
                    assert first.status_code == 200
                    async with (
                        httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as gone,
                        trio.open_nursery() as waiting,
                    ):
                        waiting.start_soon(partial(gone.get, "/v1/events"))
                        await trio.testing.wait_all_tasks_blocked()  # it waits for the place
                        waiting.cancel_scope.cancel()  # its client hangs up
                    await trio.testing.wait_all_tasks_blocked()
                    await _metric(http, "pride_http_watchers 1")
                await _metric(http, "pride_http_watchers 0")
                async with watching(http) as third:
                    assert third.status_code == 200
