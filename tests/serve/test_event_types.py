"""``GET /v1/events?types=...``: each named signal class once, and a bad name refused.

The server runs in the test's process (`conftest.in_process`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

from pride import Branch, ChatAndRecord, ScriptedModel, Session

from .conftest import TOKEN, in_process


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[tuple[Session, httpx.AsyncClient]]:
    async with Session("events") as session:
        await session.spawn(Branch(name="echo", chat_model=ScriptedModel(lambda r: "ok")))
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
                yield session, http


async def test_a_type_named_twice_streams_each_signal_once() -> None:
    """``types=RunEnd,RunEnd,RunStart``: two turns give RunStart, RunEnd, RunStart,
    RunEnd (a signal sent once per naming would have come in pairs)."""
    seen: list[str] = []
    async with serving() as (session, http), trio.open_nursery() as nursery:
        subscribed, four = trio.Event(), trio.Event()

        async def listen() -> None:
            query = "/v1/events?types=RunEnd,RunEnd,%20RunStart"
            async with aconnect_sse(http, "GET", query) as source:
                assert source.response.status_code == 200
                subscribed.set()  # the subscription is made before the headers
                async for event in source.aiter_sse():
                    if event.event in ("RunStart", "RunEnd"):
                        assert json.loads(event.data)["type"] == event.event
                        seen.append(event.event)
                        if len(seen) == 4:
                            four.set()

        nursery.start_soon(listen)
        await subscribed.wait()
        for text in ("one", "two"):
            assert await session.ask("echo", ChatAndRecord(text)) == "ok"
        with trio.fail_after(10):
            await four.wait()
        nursery.cancel_scope.cancel()
    assert seen == ["RunStart", "RunEnd", "RunStart", "RunEnd"]


@pytest.mark.parametrize(
    ("types", "named"),
    [
        ("RunEnd,Bogus,RunEnd", "'Bogus'"),
        ("RunEnd,SIGNAL_SCHEMA_VERSION", "'SIGNAL_SCHEMA_VERSION'"),
        ("RunEnd,Command", "'Command'"),  # a pride class, but no signal
        ("RunEnd,,RunStart", "''"),
    ],
)
async def test_an_unknown_type_is_400_naming_it(types: str, named: str) -> None:
    async with serving() as (_, http):
        refused = await http.get(f"/v1/events?types={types}")
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "InvalidMessage", error
    assert named in error["message"] and "query.types" in error["message"], error
