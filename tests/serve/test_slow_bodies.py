"""A client that sends its request body a byte at a time (a slow-loris on the body).

The body of ``POST /v1/branches/{name}/ask`` is read before the request
takes a place of ``--max-concurrent`` (`pride.serve._native.ask`), so a
trickling client holds no place; and the read has a deadline of pride's own,
``--body-timeout`` (hypercorn's ``read_timeout`` stays off, and its
``keep_alive_timeout`` bounds only the request head). The server runs in the
test's process (`conftest.in_process`) on a real loopback socket, under the
autojump clock, so the default 30 s deadline passes at once.
"""

from __future__ import annotations

import httpx
import trio
import trio.testing

from pride import Branch, ScriptedModel, Session
from pride.serve import ServeOptions

from .conftest import TOKEN, in_process

HEADERS = {"Authorization": f"Bearer {TOKEN}"}
SIZE = 1024 * 1024
"""The declared body: a megabyte, well under ``--max-body-bytes``, sent a byte per 100 ms."""


class Drip:
    """One raw connection sending an ask's head, then its body one byte per 100 ms."""

    def __init__(self) -> None:
        self.answer = b""
        self.answered_at: float | None = None
        self.closed_at: float | None = None
        self.sent = 0
        self.trickling = trio.Event()  # 50 bytes (5 s) into the body
        self.done = trio.Event()  # the server closed the connection

    async def run(self, url: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        head = (
            f"POST /v1/branches/writer/ask HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {SIZE}\r\n\r\n"
        )
        async with stream, trio.open_nursery() as nursery:
            await stream.send_all(head.encode())
            nursery.start_soon(self._drip, stream)
            await self._read(stream)
            nursery.cancel_scope.cancel()

    async def _drip(self, stream: trio.SocketStream) -> None:
        try:
            while self.sent < SIZE:
                await stream.send_all(b" ")
                self.sent += 1
                if self.sent == 50:
                    self.trickling.set()
                await trio.sleep(0.1)  # the slow client under test, not a synchronisation
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def _read(self, stream: trio.SocketStream) -> None:
        while True:
            try:
                data = await stream.receive_some()
            except trio.BrokenResourceError:  # a reset closes it too
                data = b""
            if not data:
                self.closed_at = trio.current_time()
                self.done.set()
                return
            if self.answered_at is None:
                self.answered_at = trio.current_time()
            self.answer += data


async def test_a_body_sent_a_byte_at_a_time_holds_no_place_and_is_cut_at_the_body_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With one place of ``--max-concurrent``, a client trickling a 1 MB body leaves
    that place free (another ask is answered meanwhile, and ``pride_http_in_flight``
    is 0); at the default ``--body-timeout`` (30 s) it is answered 408 and its
    connection closed, within the linger of a refused body (2 s) more."""
    writer = Branch(name="writer", chat_model=ScriptedModel(lambda _: "done", keep_calls=0))
    async with Session("slow-bodies") as session:
        await session.spawn(writer)
        options = ServeOptions(port=0, max_concurrent=1)
        async with (
            in_process(session, options) as (_, url),
            httpx.AsyncClient(base_url=url, headers=HEADERS) as http,
            trio.open_nursery() as nursery,
        ):
            drip = Drip()
            began = trio.current_time()
            nursery.start_soon(drip.run, url)
            await drip.trickling.wait()
            assert drip.answered_at is None, drip.answer[:200]
            metrics = (await http.get("/metrics")).text
            assert "\npride_http_in_flight 0\n" in metrics
            body = {"command": {"type": "ChatAndRecord", "instruction": "meanwhile"}}
            answer = await http.post("/v1/branches/writer/ask", json=body)
            assert answer.status_code == 200 and answer.json()["result"] == "done", answer.text
            with trio.fail_after(60):  # virtual seconds: the deadline under test is 30 s
                await drip.done.wait()
        assert drip.answer.startswith(b"HTTP/1.1 408 "), drip.answer[:200]
        assert b"--body-timeout" in drip.answer
        assert drip.answered_at is not None and drip.closed_at is not None
        assert 30 <= drip.answered_at - began < 31, drip.answered_at - began
        assert drip.closed_at - drip.answered_at <= 2.5, drip.closed_at - drip.answered_at
        assert drip.sent < 400  # cut off: a thousandth of the body, not the megabyte
