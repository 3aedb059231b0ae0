"""What ``pride serve`` keeps in memory per request: nothing, once it is answered.

These tests run the server in the test's own process (`pride.serve.Server`
on a real hypercorn socket on loopback, driven by httpx), so tracemalloc
sees what it holds.
"""

from __future__ import annotations

import gc
import re
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

import pride.serve
from pride import Branch, ScriptedModel, Session

from .conftest import TOKEN, in_process


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of an in-process server whose one agent, ``writer``, says hi."""
    async with Session("memory") as session:
        await session.spawn(
            Branch(name="writer", chat_model=ScriptedModel(lambda _: "hi", keep_calls=0))
        )
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as client:
                yield client


async def test_a_chat_completion_leaves_nothing_behind(http: httpx.AsyncClient) -> None:
    """Each ``POST /v1/chat/completions`` runs on a transient clone, removed once
    answered; the server kept the clone's last turn (for ``GET /v1/branches``,
    which never shows a clone) forever, ~370 bytes a request, so a server behind a
    chat UI grew without bound. 400 requests now leave under 64 KiB in all (that leak
    alone would be 144 KiB of them)."""
    body = {"model": "writer", "messages": [{"role": "user", "content": "hello"}]}

    async def complete(count: int) -> None:
        for _ in range(count):
            answer = await http.post("/v1/chat/completions", json=body)
            assert answer.status_code == 200, answer.text

    await complete(50)  # warm every path: imports, caches sized on first use
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        await complete(400)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    # Not counted: trio's deadline heap keeps the scopes of deadlines not yet due
    # (a body's 30 s) and prunes them in bulk, and re's cache is bounded.
    ignored = [tracemalloc.Filter(False, trio.__file__.rsplit("/", 1)[0] + "/*")]
    ignored.append(tracemalloc.Filter(False, re.__file__))
    stats = after.filter_traces(ignored).compare_to(before.filter_traces(ignored), "lineno")
    grown = sum(stat.size_diff for stat in stats)
    assert grown <= 64 * 1024, stats[:10]


async def test_virtual_branches_passivated_leave_nothing_behind(tmp_path: Path) -> None:
    """Each name ``kind/KEY`` a request uses is a virtual branch of its own, activated for
    it and passivated later (here at once: ``max_active=1``), leaving the process's
    memory. The server kept each one's last turn and turn start (for ``GET
    /v1/branches``, which shows live branches only) forever, ~200 bytes of its own per
    name, so clients naming ever new keys grew it without bound. The server's own
    allocations now stay flat over 12 new names (they grew by 12 records, about 1.6 KB)."""
    async with Session("virtual", store=tmp_path / "s.db") as session:
        await session.virtual("user", _user, max_active=1)
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:

                async def ask(keys: range) -> None:
                    for key in keys:
                        answer = await http.post(
                            f"/v1/branches/user%2Fk{key}/ask",
                            json={"command": {"type": "Chat", "instruction": "x"}},
                        )
                        assert answer.status_code == 200, answer.text

                # Traced from before the warm-up, so what is in flight at each snapshot
                # (the last request's, the live branch's) is counted in both.
                tracemalloc.start()
                try:
                    await ask(range(2))  # warm every path
                    gc.collect()
                    before = tracemalloc.take_snapshot()
                    await ask(range(2, 14))
                    gc.collect()
                    after = tracemalloc.take_snapshot()
                finally:
                    tracemalloc.stop()
    serve = [tracemalloc.Filter(True, str(Path(pride.serve.__file__).parent / "*"))]
    stats = after.filter_traces(serve).compare_to(before.filter_traces(serve), "lineno")
    grown = sum(stat.size_diff for stat in stats)
    assert grown <= 768, stats[:10]


def _user(key: str) -> Branch:
    return Branch(chat_model=ScriptedModel(lambda _: "hi", keep_calls=0))
