"""``pride serve`` under hostile clients, load and faults (issue 29, item 6).

Each test starts a server of its own (`start_server`): they starve, signal,
kill or measure it. Raw sockets stand in for hostile clients (a body far
past the limit, bytes trickled one at a time); httpx for honest ones.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import trio

from .conftest import Served, start_server

MiB = 1024 * 1024


def work(instruction: str, kind: str = "ChatAndRecord") -> dict[str, Any]:
    return {"command": {"type": kind, "instruction": instruction}}


def peak_rss(process: subprocess.Popen[bytes]) -> int:
    """The process's peak resident set size so far (``VmHWM``), in bytes."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM line")


async def connect(server: Served) -> trio.SocketStream:
    host, port = server.host.rsplit(":", 1)
    return await trio.open_tcp_stream(host, int(port))


def head(server: Served, path: str, *fields: str) -> bytes:
    """A POST request head for ``path`` with the full token and ``fields``."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {server.host}",
        f"Authorization: Bearer {server.headers()['Authorization'].split()[1]}",
        "Content-Type: application/json",
        *fields,
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def read_until_closed(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts)."""
    received = b""
    while True:
        try:
            chunk = await stream.receive_some(65536)
        except trio.BrokenResourceError:  # reset: the server closed with bytes unread
            return received
        if not chunk:
            return received
        received += chunk


FIFTY_MB = 50 * 1000 * 1000


async def flood(server: Served, *, chunked: bool) -> bytes:
    """POST a 50 MB body as fast as the server takes it, its length declared or in
    chunks (then nothing says how long it is until it ends); what the server
    answered before it closed the connection."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {FIFTY_MB}"
    piece = b"1," * (MiB // 4)
    frame = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
    stream = await connect(server)
    async with stream:
        await stream.send_all(head(server, "/v1/branches/writer/ask", framing))

        async def send_body() -> None:
            sent = 0
            try:
                while sent < FIFTY_MB:
                    await stream.send_all(frame)
                    sent += len(piece)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the server closed the connection: the client is cut off

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_body)
            answer = await read_until_closed(stream)
            nursery.cancel_scope.cancel()  # nothing more to send to a closed connection
    return answer


async def test_a_50_mb_body_is_413_without_being_read_whole(tmp_path: Path) -> None:
    """A body far over --max-body-bytes is refused (413) as it arrives, declared or
    chunked: the server's peak RSS grows by at most about the limit (what it may
    hold of a body), far less than the body."""
    limit = 2 * MiB
    with start_server(tmp_path, "--max-body-bytes", str(limit)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            # Warm up the paths a refusal takes, so the growth measured is the body's.
            assert (await http.post("/v1/branches/writer/ask", json=work("x"))).status_code == 200
            small = await http.post(
                "/v1/branches/writer/ask",
                content=b"[" + b"1," * (MiB // 2) + b"1]",
                headers={"Content-Type": "application/json"},
            )
            assert small.status_code == 400
        before = peak_rss(server.process)
        for chunked in (False, True):
            answer = await flood(server, chunked=chunked)
            assert answer.startswith(b"HTTP/1.1 413 "), (chunked, answer[:200])
            assert b"PayloadTooLarge" in answer and b"--max-body-bytes" in answer
        grown = peak_rss(server.process) - before
        assert grown < limit + 6 * MiB, f"the server's peak RSS grew by {grown / MiB:.1f} MiB"
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            assert (await http.post("/v1/branches/writer/ask", json=work("y"))).status_code == 200


async def test_many_system_messages_are_read_in_linear_time(tmp_path: Path) -> None:
    """POST /v1/chat/completions: a request's system messages were joined one at a
    time, each join copying the text so far, in the event loop (100,000 of 27
    characters, a 5.9 MiB body, took 3.4 s; 200,000 15 s; 400,000 101 s, every
    request to the server waiting). Joined once, 700,000 (40 MiB, under a limit
    raised for the test) are one turn answered at once (a timeout if not)."""
    messages = [{"role": "system", "content": "x" * 27}] * 700_000
    body = {"model": "writer", "messages": [*messages, {"role": "user", "content": "hi"}]}
    with start_server(tmp_path, "--max-body-bytes", str(48 * MiB)) as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=None
        ) as http:
            answer = await http.post("/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text[:500]
    assert answer.json()["choices"][0]["message"]["content"] == "echo: hi"


async def closed_after(stream: trio.SocketStream, trickle: bytes, every: float) -> bytes:
    """Send ``trickle`` one byte per ``every`` seconds until the server closes the
    connection; what it answered."""
    received = b""

    async def drip() -> None:
        try:
            for byte in trickle:
                await stream.send_all(bytes([byte]))
                await trio.sleep(every)  # the slow client under test, not a synchronisation
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drip)
        received = await read_until_closed(stream)
        nursery.cancel_scope.cancel()
    return received


async def test_a_slowloris_head_is_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    """A client trickling its request head is disconnected within --header-timeout,
    though it never stops sending; the server goes on serving others."""
    with start_server(tmp_path, "--header-timeout", "1") as server:
        stream = await connect(server)
        async with stream:
            started = trio.current_time()
            fields = (f"X-Field-{i}: {i}" for i in range(200))
            answer = await closed_after(stream, head(server, "/v1/x", *fields), 0.05)
            elapsed = trio.current_time() - started
        assert 0.9 <= elapsed < 1.9, elapsed
        assert b" 200 " not in answer
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            assert (await http.post("/v1/branches/writer/ask", json=work("x"))).status_code == 200


async def test_a_slowloris_body_is_cut_off_at_the_body_timeout(tmp_path: Path) -> None:
    """A client trickling its body is answered 408 and disconnected within
    --body-timeout, though it never stops sending."""
    with start_server(tmp_path, "--body-timeout", "1") as server:
        body = b'{"command": {"type": "Chat", "instruction": "' + b"x" * 500 + b'"}}'
        stream = await connect(server)
        async with stream:
            await stream.send_all(
                head(server, "/v1/branches/writer/ask", f"Content-Length: {len(body)}")
            )
            started = trio.current_time()
            answer = await closed_after(stream, body, 0.05)
            elapsed = trio.current_time() - started
        assert 0.9 <= elapsed < 1.9, elapsed
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert b"--body-timeout" in answer
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            assert (await http.post("/v1/branches/writer/ask", json=work("x"))).status_code == 200


async def _state(http: httpx.AsyncClient) -> dict[str, str]:
    tree = (await http.get("/v1/branches")).json()["session"]
    return {b["name"]: b["state"] for b in tree["branches"]}


async def _queued(http: httpx.AsyncClient) -> dict[str, int]:
    tree = (await http.get("/v1/branches")).json()["session"]
    return {b["name"]: b["queued"] for b in tree["branches"]}


async def test_sigterm_answers_every_turn_in_flight_and_exits_0(tmp_path: Path) -> None:
    """SIGTERM while turns run: each running ask is answered with its result, the one
    queued behind them with BranchClosed, and the process exits 0."""
    with start_server(tmp_path, "--grace", "20") as server:
        answers: dict[str, httpx.Response] = {}
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=60
        ) as http:

            async def ask(key: str, branch: str, instruction: str) -> None:
                answers[key] = await http.post(f"/v1/branches/{branch}/ask", json=work(instruction))

            async with trio.open_nursery() as nursery:
                for branch in ("writer", "reader", "support-1"):
                    nursery.start_soon(ask, branch, branch, "slow 1.5")
                with trio.fail_after(30):
                    while list((await _state(http)).values()).count("busy") < 3:
                        await trio.sleep(0.01)
                    # Behind support-1's turn: the session stops support-1 first of the
                    # three (reverse start order), so its queue is still held then.
                    nursery.start_soon(ask, "queued", "support-1", "behind the slow one")
                    while (await _queued(http))["support-1"] < 1:
                        await trio.sleep(0.01)
                server.process.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            while server.process.poll() is None:
                await trio.sleep(0.05)
        assert server.process.returncode == 0, server.logs()
    for branch in ("writer", "reader", "support-1"):
        assert answers[branch].status_code == 200, answers[branch].text
        assert answers[branch].json()["result"] == "slept 1.5"
    queued = answers["queued"]
    assert queued.status_code == 503, queued.text
    assert queued.json()["error"]["type"] == "BranchClosed"


async def test_a_second_sigterm_cancels_the_turns_in_flight_and_exits_143(tmp_path: Path) -> None:
    """The first SIGTERM drains (the running turn may finish within --grace); a
    second forces: the running turn is cancelled and answered ``TurnCancelled`` at
    once, and the process exits 128 + SIGTERM."""
    with start_server(tmp_path, "--grace", "300") as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=60
        ) as http:
            answers: list[httpx.Response] = []

            async def ask_hang() -> None:
                answers.append(await http.post("/v1/branches/writer/ask", json=work("hang")))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask_hang)
                with trio.fail_after(30):
                    while (await _state(http))["writer"] != "busy":
                        await trio.sleep(0.01)
                server.process.send_signal(signal.SIGTERM)
                with trio.fail_after(30):
                    while "draining" not in server.logs():
                        await trio.sleep(0.01)
                server.process.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                while server.process.poll() is None:
                    await trio.sleep(0.05)
        assert server.process.returncode == 128 + signal.SIGTERM, server.logs()
    [answer] = answers
    assert answer.json()["error"]["type"] == "TurnCancelled", answer.text
    assert "SIGTERM again: forcing" in server.logs()


async def test_an_answered_ask_is_on_disk_when_the_process_is_killed(tmp_path: Path) -> None:
    """With --store, an ask's answer means its turn is committed: kill -9 right after
    it, restart on the same store, and the conversation has it."""
    store = tmp_path / "agents.db"
    with start_server(tmp_path, "--store", str(store)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            answer = await http.post("/v1/branches/writer/ask", json=work("remember me"))
            server.process.kill()  # no drain, no flush: only what was committed survives
        assert answer.status_code == 200, answer.text
        server.process.wait()
    with start_server(tmp_path, "--store", str(store)) as server:
        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            page = (await http.get("/v1/branches/writer/messages?limit=500")).json()
    assert conversation(page["messages"]) == [
        ("System", "You are writer."),
        ("Instruction", "remember me"),
        ("AssistantResponse", "echo: remember me"),
    ]


def conversation(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """A history's messages as ``(type, text)``, in order."""
    text = ("system_message", "instruction", "assistant_response")
    return [(m["type"], next(m[k] for k in text if k in m)) for m in messages]


async def history(http: httpx.AsyncClient, branch: str) -> list[dict[str, Any]]:
    """The whole conversation of ``branch``, page by page."""
    messages: list[dict[str, Any]] = []
    while True:
        page = (
            await http.get(f"/v1/branches/{branch}/messages?limit=500&offset={len(messages)}")
        ).json()
        messages += page["messages"]
        if len(messages) >= page["total"]:
            return messages


class KeepAlive:
    """A bare HTTP/1.1 keep-alive connection: one request at a time, answers read by
    their Content-Length (httpx, cancelled mid-send, leaves its body iterator to
    the garbage collector, which warns)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def post(self, server: Served, path: str, data: Any) -> tuple[int, bytes]:
        body = json.dumps(data).encode()
        await self.stream.send_all(head(server, path, f"Content-Length: {len(body)}") + body)
        while b"\r\n\r\n" not in self.buffer:
            await self._more()
        raw, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = raw.decode("latin-1").split("\r\n")
        fields = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = int(fields["content-length"])
        while len(self.buffer) < length:
            await self._more()
        answer, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(lines[0].split()[1]), answer

    async def _more(self) -> None:
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            raise AssertionError("the server closed a keep-alive connection")
        self.buffer += chunk


async def _hang_until_busy(
    http: httpx.AsyncClient, nursery: trio.Nursery, branch: str, *, queued: int = 0
) -> None:
    """Start an ask of ``hang`` on ``branch`` and wait until the branch is busy with
    it and holds ``queued`` envelopes behind it (the server's own view: there is no
    event to wait on across a process, so its tree is polled)."""
    nursery.start_soon(partial(http.post, f"/v1/branches/{branch}/ask", json=work("hang")))
    with trio.fail_after(30):
        while (await _state(http))[branch] != "busy" or (await _queued(http))[branch] < queued:
            await trio.sleep(0.01)


async def test_past_max_concurrent_a_request_is_503_with_retry_after(tmp_path: Path) -> None:
    """Beyond ``--max-concurrent`` a request waits briefly for a place, then is
    answered 503 with ``Retry-After``; health and the tree still answer, and once
    the requests holding the places are gone the next one is served."""
    with start_server(tmp_path, "--max-concurrent", "2") as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=60
        ) as http:
            async with trio.open_nursery() as holders:
                await _hang_until_busy(http, holders, "writer")
                await _hang_until_busy(http, holders, "reader")
                refused = await http.post("/v1/branches/support-1/ask", json=work("hello"))
                assert refused.status_code == 503, refused.text
                assert int(refused.headers["retry-after"]) >= 1
                error = refused.json()["error"]
                assert error["type"] == "Overloaded"
                assert "--max-concurrent" in error["message"]
                assert (await http.get("/healthz")).status_code == 200
                # The refused ask never reached its branch.
                assert (await _state(http))["support-1"] == "idle"
                holders.cancel_scope.cancel()  # the two clients go away: their turns end
            with trio.fail_after(30):
                while "busy" in (await _state(http)).values():
                    await trio.sleep(0.01)
            served = await http.post("/v1/branches/support-1/ask", json=work("hello"))
            assert served.status_code == 200, served.text
            assert served.json()["result"] == "echo: hello"
            assert (await http.post("/v1/branches/support-1/ask", json=work("count:hello"))).json()[
                "result"
            ] == "1"


async def test_a_full_mailbox_is_503_with_retry_after_and_nothing_is_queued(
    tmp_path: Path,
) -> None:
    """A branch whose mailbox stays full for the server's wait answers 503
    ``MailboxFull`` with ``Retry-After``; the refused command was never queued, so
    it never runs, and the branch serves the next request once it has room."""
    with start_server(tmp_path) as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers=server.headers(), timeout=60
        ) as http:
            async with trio.open_nursery() as holders:
                await _hang_until_busy(http, holders, "narrow")  # running
                await _hang_until_busy(http, holders, "narrow", queued=1)  # the one place
                refused = await http.post("/v1/branches/narrow/ask", json=work("refused"))
                assert refused.status_code == 503, refused.text
                assert int(refused.headers["retry-after"]) >= 1
                assert refused.json()["error"]["type"] == "MailboxFull"
                assert (await _queued(http))["narrow"] == 1
                holders.cancel_scope.cancel()
            with trio.fail_after(30):
                while (await _state(http))["narrow"] == "busy":
                    await trio.sleep(0.01)
            count = await http.post("/v1/branches/narrow/ask", json=work("count:refused"))
            assert count.json()["result"] == "0", "a refused command was queued and ran"


REQUESTS = 10_000
"""Requests of the disconnect storm, as issue 29 asks: ~20 s on a quiet machine, of
which ~3,500 are abandoned (most while queued, some running, some as answered)."""


async def test_random_disconnects_never_run_a_turn_twice(tmp_path: Path) -> None:
    """Many asks from 64 clients, a third of them abandoned at a random moment
    (queued, running or being answered): each turn is answered or cancelled, none
    runs twice, none is left running, and the server goes on serving."""
    branches = ("writer", "reader", "support-1")
    rng = random.Random(29)
    plan = []
    for i in range(REQUESTS):
        delay = rng.choice(("", "slow 0.001 ", "slow 0.005 ", "slow 0.02 "))
        abandon_after = rng.uniform(0, 0.03) if rng.random() < 0.35 else None
        plan.append((f"{delay}storm-{i}", branches[i % 3], abandon_after))
    answered: set[str] = set()
    abandoned: set[str] = set()
    with start_server(tmp_path, "--max-concurrent", "512", "--log-level", "WARNING") as server:
        todo = iter(plan)

        async def client() -> None:
            """One keep-alive client; it reconnects after each request it abandons."""
            connection = KeepAlive(await connect(server))
            try:
                for instruction, branch, abandon_after in todo:
                    with trio.move_on_after(abandon_after or 60) as timer:
                        status, body = await connection.post(
                            server, f"/v1/branches/{branch}/ask", work(instruction)
                        )
                        assert status == 200, body
                        expected = (
                            f"slept {instruction.split()[1]}"
                            if instruction.startswith("slow ")
                            else f"echo: {instruction}"
                        )
                        assert json.loads(body)["result"] == expected
                        answered.add(instruction)
                    if timer.cancelled_caught:
                        # A client going away: its connection closes mid-request.
                        abandoned.add(instruction)
                        await connection.stream.aclose()
                        connection = KeepAlive(await connect(server))
            finally:
                await connection.stream.aclose()

        async with httpx.AsyncClient(base_url=server.url, headers=server.headers()) as http:
            with trio.fail_after(240):
                async with trio.open_nursery() as nursery:
                    for _ in range(64):
                        nursery.start_soon(client)
                # Abandoned turns end as their cancellations arrive: wait for the tree
                # to be idle (each branch idle, no envelope queued).
                while any(s != "idle" for s in (await _state(http)).values()) or any(
                    (await _queued(http)).values()
                ):
                    await trio.sleep(0.02)
            seen: Counter[str] = Counter()
            replies: Counter[str] = Counter()
            for branch in branches:
                for kind, text in conversation(await history(http, branch)):
                    if kind == "Instruction":
                        seen[text] += 1
                    elif kind == "AssistantResponse":
                        replies[text] += 1
            repeated = await http.post("/v1/branches/reader/ask", json=work("repeated:"))
            metrics = (await http.get("/metrics")).text
            assert (await http.post("/v1/branches/writer/ask", json=work("after"))).json()[
                "result"
            ] == "echo: after"
        assert server.process.poll() is None, server.logs()
    assert len(answered) + len(abandoned) == REQUESTS
    assert len(abandoned) > REQUESTS // 5 and len(answered) > REQUESTS // 2
    # Never run twice: no instruction reached the model twice, none is recorded twice.
    assert repeated.json()["result"] == "none", repeated.text
    assert max(seen.values()) == 1
    # Answered means recorded (ChatAndRecord); abandoned means recorded once or not at all.
    assert answered <= set(seen), sorted(answered - set(seen))[:5]
    assert set(seen) <= answered | abandoned
    echoes = {i for i in seen if not i.startswith("slow ")}
    assert all(replies[f"echo: {i}"] == 1 for i in echoes & answered)
    # Nothing left: no turn running, no request holding a place.
    assert "\npride_turns_in_flight 0\n" in metrics
    assert "\npride_http_in_flight 0\n" in metrics
