"""``pride serve`` and a client that goes away before it is answered.

The server runs in the test's process (`conftest.in_process`), so its log
records and signals reach the test.
"""

from __future__ import annotations

import functools
import logging

import httpx
import pytest
import trio
import trio.testing

from pride import Branch, RunFailed, ScriptedModel, Session, tool
from pride.llm import ModelRequest, ToolCall

from .conftest import TOKEN, in_process


async def test_a_client_gone_mid_body_is_no_server_error(caplog: pytest.LogCaptureFixture) -> None:
    """A client that left while its body was arriving was answered 500 and logged as
    a bug of the server (an error with a traceback, counted as a 500 in
    ``/metrics``): a network's ordinary event alarmed whoever watches the logs.
    Nothing is answered to a client gone, and nothing is logged as failing
    (hypercorn itself answers the truncated request 400). A raw socket sends
    half a body, then closes its side."""
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


async def test_a_resolve_whose_client_leaves_is_followed_to_its_cancellation() -> None:
    """A sent turn waiting for approval, continued by ``POST .../resolve`` whose
    client left while the approved call ran, was cancelled (``RunFailed``), yet
    ``GET /v1/turns/{turn_id}`` said ``suspended`` with its pending call for as
    long as the server ran, though nothing waited and resolving again was a 404.
    It says ``failed``, cancelled by its caller."""
    running = trio.Event()

    @tool(requires_approval=True)
    async def launch(target: str) -> str:
        """Launch at a target: it never lands."""
        running.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    def script(request: ModelRequest) -> str | ToolCall:
        if request.messages[-1].get("role") == "tool":
            return "launched"
        return ToolCall(name="launch", arguments={"target": "moon"}, id="call-1")

    async with Session("gone") as session:
        await session.spawn(Branch(name="pilot", tools=[launch], chat_model=ScriptedModel(script)))
        failed = trio.Event()
        session.observe(RunFailed, handler=lambda _: failed.set())
        async with in_process(session) as (_, url):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(base_url=url, headers=headers) as http:
                body = {"command": {"type": "Run", "instruction": "go"}}
                turn_id = (await http.post("/v1/branches/pilot/send", json=body)).json()["turn_id"]
                await trio.testing.wait_all_tasks_blocked()  # the turn stopped for approval
                assert (await http.get(f"/v1/turns/{turn_id}")).json()["state"] == "suspended"
                decisions = {"decisions": {"call-1": {"type": "Approve"}}}
                async with trio.open_nursery() as nursery:
                    resolve = functools.partial(http.post, json=decisions)
                    nursery.start_soon(resolve, f"/v1/turns/{turn_id}/resolve")
                    await running.wait()
                    nursery.cancel_scope.cancel()  # the client leaves: its request closes
                with trio.fail_after(10):
                    await failed.wait()
                await trio.testing.wait_all_tasks_blocked()  # the server is done with it
                followed = (await http.get(f"/v1/turns/{turn_id}")).json()
                assert (await http.get("/v1/approvals")).json()["approvals"] == []
    assert followed["state"] == "failed", followed
    assert followed["error"]["type"] == "TurnCancelled", followed
