"""``pride serve`` and a client that goes away before its request is whole.

The server runs in the test's process (`conftest.in_process`), so its log
records reach ``caplog``; a raw socket sends half a body, then closes its side.
"""

from __future__ import annotations

import logging

import httpx
import pytest
import trio

from pride import Branch, ScriptedModel, Session

from .conftest import TOKEN, in_process


async def test_a_client_gone_mid_body_is_no_server_error(caplog: pytest.LogCaptureFixture) -> None:
    """A client that left while its body was arriving was answered 500 and logged as
    a bug of the server (an error with a traceback, counted as a 500 in
    ``/metrics``): a network's ordinary event alarmed whoever watches the logs.
    Nothing is answered to a client gone, and nothing is logged as failing
    (hypercorn itself answers the truncated request 400)."""
    async with Session("gone") as session:
        await session.spawn(Branch(name="writer", chat_model=ScriptedModel(lambda _: "hi")))
        async with in_process(session) as (_, url):
            host, port = url.removeprefix("http://").rsplit(":", 1)
            stream = await trio.open_tcp_stream(host, int(port))
            async with stream:
                head = (
                    f"POST /v1/branches/writer/ask HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
                    "Content-Length: 1000\r\n\r\n"
                )
                await stream.send_all(head.encode() + b'{"command": ')
                await stream.send_eof()  # gone before the rest of the body
                while await stream.receive_some():  # until the server closes (after its app)
                    pass
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                metrics = (await http.get("/metrics")).text
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert failures == [], [r.getMessage() for r in failures]
    asks = [line for line in metrics.splitlines() if "/v1/branches/{name}/ask" in line]
    assert asks and not [line for line in asks if 'status="500"' in line], asks
