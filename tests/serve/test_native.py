"""The native API of ``pride serve``, driven over real HTTP by httpx (and httpx-sse).

One server subprocess serves the module (`served`); each test leaves it as
it found it.
"""

from __future__ import annotations

import json
import socket
from typing import Any
from uuid import UUID

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

from .conftest import SCOPED, TOKEN, Served


def work(instruction: str, kind: str = "ChatAndRecord", **fields: Any) -> dict[str, Any]:
    """A work request's body: ``{"command": {"type": kind, "instruction": ..., **fields}}``."""
    return {"command": {"type": kind, "instruction": instruction, **fields}}


@pytest.fixture
async def client(served: Served) -> Any:
    async with httpx.AsyncClient(base_url=served.url, headers=served.headers()) as http:
        yield http


async def test_health_needs_no_token_and_everything_else_does(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        assert (await http.get("/healthz")).json() == {"ok": True}
        assert (await http.get("/readyz")).json() == {"ok": True, "draining": False}
        for headers in (
            {},
            {"Authorization": "Bearer not-a-token-at-all"},
            {"Authorization": TOKEN},
        ):
            for method, path in (("GET", "/v1/branches"), ("POST", "/v1/branches/writer/ask")):
                answer = await http.request(method, path, headers=headers, json=work("hi"))
                assert answer.status_code == 401, (headers, path)
                assert answer.headers["www-authenticate"].startswith("Bearer")
                assert answer.json()["error"]["type"] == "Unauthorized"
        answer = await http.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
        assert answer.status_code == 200
        assert "/v1/branches/{name}/ask" in answer.json()["paths"]


async def test_an_ask_answers_its_result_and_turn_id(client: httpx.AsyncClient) -> None:
    answer = await client.post("/v1/branches/writer/ask", json=work("hello"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True and body["result"] == "echo: hello"
    UUID(body["turn_id"])
    page = (await client.get("/v1/branches/writer/messages?offset=1&limit=2")).json()
    assert page["total"] >= 3 and page["offset"] == 1 and len(page["messages"]) == 2


async def test_a_token_reaches_only_its_scope(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, headers=served.headers(SCOPED)) as http:
        assert (await http.post("/v1/branches/support-1/ask", json=work("x"))).status_code == 200
        hidden = await http.post("/v1/branches/writer/ask", json=work("x"))
        missing = await http.post("/v1/branches/nobody/ask", json=work("x"))
        assert hidden.status_code == missing.status_code == 404
        assert hidden.json()["error"]["type"] == "UnknownBranch"
        # The same answer for a branch out of scope as for one that does not exist.
        assert (
            hidden.json()["error"]["message"].replace("writer", "nobody")
            == (missing.json()["error"]["message"])
        )
        tree = (await http.get("/v1/branches")).json()["session"]
        assert {b["name"] for b in tree["branches"]} == {"reader", "support-1"}
        models = (await http.get("/v1/models")).json()["data"]
        assert {m["id"] for m in models} == {"reader", "support-1"}
        assert (await http.get("/v1/branches/writer/messages")).status_code == 404


async def test_a_foreign_host_or_origin_is_refused(
    client: httpx.AsyncClient, served: Served
) -> None:
    rebound = await client.post(
        "/v1/branches/writer/ask", json=work("x"), headers={"Host": "attacker.example"}
    )
    assert rebound.status_code == 421
    assert rebound.json()["error"]["type"] == "MisdirectedRequest"
    # Refused with its body unread: the connection is not kept, and the answer says so,
    # so the client's next request goes on a new one (it failed on the closed one).
    assert rebound.headers["connection"] == "close"
    foreign = await client.post(
        "/v1/branches/writer/ask", json=work("x"), headers={"Origin": "http://attacker.example"}
    )
    assert foreign.status_code == 403
    assert foreign.headers["connection"] == "close"
    own = await client.post(
        "/v1/branches/writer/ask", json=work("x"), headers={"Origin": served.url}
    )
    assert own.status_code == 200
    assert "connection" not in own.headers  # a served request keeps its connection
    assert (await client.get("/healthz", headers={"Host": "attacker.example"})).status_code == 421


@pytest.mark.parametrize(
    ("body", "content_type", "status", "where"),
    [
        (b'{"command": {"type": "Chat", "instruction": "x"', "application/json", 400, "request"),
        (b'{"command": {"type": "Chat"}, "x": NaN}', "application/json", 400, "request"),
        (b"[1, 2]", "application/json", 400, "request"),
        (
            b'{"command": {"type": "Chat", "instruction": 5}}',
            "application/json",
            400,
            "instruction",
        ),
        (b'{"command": {"type": "Nope"}}', "application/json", 400, "type tag"),
        (b'{"command": {"type": "Stop"}}', "application/json", 400, "supervisors"),
        (b'{"command": {"type": "Chat"}, "extra": 1}', "application/json", 400, "unknown keys"),
        (b'{"command": {"type": "Chat"}, "timeout": "soon"}', "application/json", 400, "timeout"),
        (b'{"timeout": 1}', "application/json", 400, "missing"),
        (b'{"command": {"type": "Chat"}}', "text/plain", 415, "JSON"),
        (
            b'{"command": {"type": "ReAct", "max_extensions": 10000}}',
            "application/json",
            400,
            "ceiling",
        ),
    ],
)
async def test_hostile_bodies_are_refused_naming_what_is_wrong(
    client: httpx.AsyncClient, body: bytes, content_type: str, status: int, where: str
) -> None:
    answer = await client.post(
        "/v1/branches/writer/ask", content=body, headers={"Content-Type": content_type}
    )
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert where in error["message"], error
    assert (
        await client.post("/v1/branches/writer/ask", json=work("still here"))
    ).status_code == 200


@pytest.mark.parametrize("query", ["offset=%C2%B2", "limit=%C2%B2", "limit=%D9%A3", "limit=-1"])
async def test_a_page_bound_that_is_no_ascii_number_is_invalid(
    client: httpx.AsyncClient, query: str
) -> None:
    """``"²".isdigit()`` holds and ``int("²")`` raises: ``?limit=²`` was a 500
    logged as a server bug (a ``ValueError``); a bound not written in ASCII
    digits (an Arabic-Indic three passed as 3) is a 400 naming it."""
    answer = await client.get(f"/v1/branches/writer/messages?{query}")
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    key = query.partition("=")[0]
    assert error["type"] == "InvalidMessage" and f"query.{key}" in error["message"], error


async def test_a_model_configuration_in_a_command_is_refused_and_never_dialled(
    client: httpx.AsyncClient,
) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        config = {"provider": "openai", "model": "x", "base_url": f"http://127.0.0.1:{port}/v1"}
        for kind in ("Chat", "ReAct", "Operate"):
            body = {
                "command": {
                    "type": kind,
                    "instruction": "x",
                    "chat_model": {**config, "api_key": "k"},
                }
            }
            answer = await client.post("/v1/branches/writer/ask", json=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["type"] == "InvalidMessage"
            assert "chat_model" in answer.json()["error"]["message"]
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody came


async def test_budget_and_approval_errors_carry_their_fields(client: httpx.AsyncClient) -> None:
    spent = await client.post("/v1/branches/frugal/ask", json=work("x"))
    assert spent.status_code == 429
    error = spent.json()["error"]
    assert error["type"] == "BudgetExceeded"
    assert (error["limit"], error["allowed"], error["used"]) == ("max_model_calls", 0, 1)
    held = await client.post(
        "/v1/branches/pilot/ask", json=work("use the tool", "Operate", actions=True)
    )
    assert held.status_code == 409, held.text
    error = held.json()["error"]
    assert error["type"] == "ApprovalRequired"
    assert [(p["call_id"], p["function"]) for p in error["pending"]] == [("call-1", "launch")]
    waiting = (await client.get("/v1/approvals")).json()["approvals"]
    assert [w["turn_id"] for w in waiting] == [error["turn_id"]]
    resolved = await client.post(
        f"/v1/turns/{error['turn_id']}/resolve",
        json={"decisions": {"call-1": {"type": "Approve"}}},
    )
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["turn_id"] == error["turn_id"]
    assert (await client.get("/v1/approvals")).json()["approvals"] == []
    again = await client.post(f"/v1/turns/{error['turn_id']}/resolve", json={"decisions": {}})
    assert again.status_code == 404 and again.json()["error"]["type"] == "UnknownTurn"


async def test_a_send_is_answered_once_its_turn_starts_and_followed_after(
    client: httpx.AsyncClient,
) -> None:
    sent = await client.post("/v1/branches/reader/send", json=work("fire and forget"))
    assert sent.status_code == 202, sent.text
    turn_id = sent.json()["turn_id"]
    with trio.fail_after(30):
        while True:
            state = (await client.get(f"/v1/turns/{turn_id}")).json()
            if state["state"] != "running":
                break
            await trio.sleep(0.02)
    assert state == {
        "ok": True,
        "turn_id": turn_id,
        "branch": "reader",
        "state": "done",
        "result": "echo: fire and forget",
    }
    assert (await client.get(f"/v1/turns/{UUID(int=1)}")).status_code == 404
    assert (await client.get("/v1/turns/not-an-id")).status_code == 404


async def test_a_stream_sends_start_items_and_end(client: httpx.AsyncClient) -> None:
    events = []
    async with aconnect_sse(
        client, "POST", "/v1/branches/reader/stream", json=work("stream me", "Run")
    ) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        async for event in source.aiter_sse():
            events.append((event.event, json.loads(event.data)))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and set(kinds[1:-1]) == {"item"}
    text = "".join(
        data["item"] for kind, data in events if kind == "item" and isinstance(data["item"], str)
    )
    assert text == "echo: stream me"
    assert events[0][1]["turn_id"] == events[-1][1]["turn_id"]
    failed = await client.post("/v1/branches/frugal/stream", json=work("x", "Run"))
    assert failed.status_code == 200
    assert "event: error" in failed.text and "BudgetExceeded" in failed.text


async def _signals(
    client: httpx.AsyncClient, query: str, into: list[dict[str, Any]], ready: trio.Event
) -> None:
    async with aconnect_sse(client, "GET", f"/v1/events?{query}") as source:
        ready.set()
        async for event in source.aiter_sse():
            into.append(json.loads(event.data))


async def test_events_stream_the_trees_signals_and_a_gone_client_cancels_its_turn(
    client: httpx.AsyncClient, served: Served
) -> None:
    seen: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        ready = trio.Event()
        nursery.start_soon(_signals, client, "branch=support-1", seen, ready)
        await ready.wait()
        await client.post("/v1/branches/support-1/ask", json=work("watched"))
        await client.post("/v1/branches/reader/ask", json=work("not watched"))

        async def hang() -> None:
            await client.post("/v1/branches/support-1/ask", json=work("hang"))

        with trio.fail_after(30):
            async with trio.open_nursery() as asking:
                asking.start_soon(hang)
                while sum(s["type"] == "RunStart" for s in seen) < 2:
                    await trio.sleep(0.01)
                asking.cancel_scope.cancel()  # the client goes away mid-turn
            while not any(s["type"] == "RunFailed" for s in seen):
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    kinds = [s["type"] for s in seen]
    assert kinds == ["RunStart", "RunEnd", "RunStart", "RunFailed"], kinds
    assert {s["branch_name"] for s in seen} == {"support-1"}
    assert seen[1]["model_calls"] == 1
    assert seen[3]["cancelled"] is True
    tree = (await client.get("/v1/branches")).json()["session"]
    assert all(b["state"] == "idle" and b["queued"] == 0 for b in tree["branches"])


async def test_metrics_are_prometheus_text(client: httpx.AsyncClient) -> None:
    await client.post("/v1/branches/writer/ask", json=work("counted"))
    answer = await client.get("/metrics")
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = answer.text
    for line in (
        "# TYPE pride_turns_total counter",
        'pride_mailbox_depth{branch="writer"} 0',
        "# TYPE pride_http_request_duration_seconds histogram",
    ):
        assert line in text
    assert 'pride_http_requests_total{route="/v1/branches/{name}/ask",status="200"}' in text
    assert (await client.get("/nowhere")).status_code == 404
    wrong = await client.get("/v1/branches/writer/ask")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


async def _state_of(client: httpx.AsyncClient, name: str) -> str:
    tree = (await client.get("/v1/branches")).json()["session"]
    return next(b["state"] for b in tree["branches"] if b["name"] == name)


async def test_a_timeout_is_504_and_cancels_the_turn(client: httpx.AsyncClient) -> None:
    """An ask past its ``timeout`` answers 504 and its turn does not go on running."""
    answer = await client.post("/v1/branches/support-1/ask", json={**work("hang"), "timeout": 0.3})
    assert answer.status_code == 504, answer.text
    assert answer.json()["error"]["type"] == "TimeoutError"
    with trio.fail_after(20):
        while await _state_of(client, "support-1") != "idle":
            await trio.sleep(0.02)
