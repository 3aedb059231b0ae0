"""The floor of ``bench_serve``: a bare ASGI app on hypercorn's trio worker, as ``pride serve``
runs it.

``python -m benchmarks._serve_floor`` binds a free loopback port, prints
``floor: serving on URL`` once listening, and answers every request with one
constant JSON body of the shape of an ask's answer, after reading the
request's body (an ask has one). The hypercorn settings are those of
`pride.serve._server.Server`, so what separates the two servers is pride's
own work: the gates, the route, the decoding, the turn and the answer.
It stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import trio

ANNOUNCE = "floor: serving on "
ANSWER = b'{"ok":true,"result":"ok","turn_id":"00000000-0000-4000-8000-000000000000"}'

Message = MutableMapping[str, Any]


async def app(
    scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Any]
) -> None:
    if scope["type"] == "lifespan":
        while True:
            event = await receive()
            kind = event["type"].removeprefix("lifespan.")
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False) and message["type"] == "http.request"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(ANSWER)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": ANSWER})


async def main() -> None:
    from hypercorn.trio import serve

    from pride._hypercorn import bound_socket, hypercorn_config

    listening = await bound_socket("127.0.0.1", 0, "serve the floor")
    # pride.serve._server.Server's settings, but for the grace period.
    config = hypercorn_config(listening, logging.getLogger("benchmarks.serve_floor"))
    config.include_server_header = False
    config.keep_alive_timeout = 10.0
    config.keep_alive_max_requests = 1_000_000
    config.read_timeout = None
    stop = trio.Event()
    url = f"http://127.0.0.1:{listening.getsockname()[1]}"

    class _Started:
        def started(self, binds: Any = None) -> None:
            print(f"{ANNOUNCE}{url}", flush=True)

    async def on_signal() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                stop.set()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal)
        await serve(app, config, shutdown_trigger=stop.wait, task_status=_Started())  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main)
