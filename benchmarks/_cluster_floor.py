"""The yardsticks of the cluster benchmark: bare Ray actors and the issue's design floor.

Defined in an importable module (not in the benchmark's ``__main__``) so Ray
pickles them by reference, as it does the host. They import neither pride
nor Ray: the benchmark wraps them with ``ray.remote``.

* `SyncEcho`: a plain actor (a sync method, one at a time), Ray's cheapest call;
* `AsyncEcho`: an async actor (an ``async def`` method), the kind of actor a
  pride host is: the ratio's yardstick;
* `TrioEcho`: the issue's prototype, the *design floor*: an async actor
  whose constructor runs ``trio.run`` in a thread of its own; each call hops
  into trio (``TrioToken.run_sync_soon``) and back
  (``loop.call_soon_threadsafe``), with no journal, mailbox or turn. The
  caller waits the way a trio caller must (`wait_trio`: ``ref.future()`` and
  a done-callback that wakes trio through its token). ``echo_batch`` does
  the same for a JSON batch of messages (parsed, answered one by one in
  trio, encoded back): the floor of the throughput figure at a given batch
  size.

So the remote ask's ratio splits into Ray's call (bare), the design's thread
hops and trio caller (floor / bare) and pride's own work (ask / floor).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import trio


class SyncEcho:
    def ping(self, payload: bytes) -> bytes:
        return payload


class AsyncEcho:
    async def ping(self, payload: bytes) -> bytes:
        return payload


class TrioEcho:
    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        ready = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._serve, ready), daemon=True)
        self._thread.start()
        ready.wait()

    async def _serve(self, ready: threading.Event) -> None:
        self._token = trio.lowlevel.current_trio_token()
        ready.set()
        await trio.sleep_forever()

    async def ping(self, payload: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes] = loop.create_future()

        def in_trio() -> None:
            loop.call_soon_threadsafe(done.set_result, payload)

        assert self._token is not None
        self._token.run_sync_soon(in_trio)
        return await done

    async def echo_batch(self, payload: bytes) -> bytes:
        items = json.loads(payload)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[list[dict[str, Any]]] = loop.create_future()

        def in_trio() -> None:
            answers = [{"k": "done", "id": item["id"], "value": None} for item in items]
            loop.call_soon_threadsafe(done.set_result, answers)

        assert self._token is not None
        self._token.run_sync_soon(in_trio)
        return json.dumps(await done).encode()


async def wait_trio(ref: Any) -> Any:
    """``ref``'s value, waited on from trio the prototype's way (no thread per call)."""
    token = trio.lowlevel.current_trio_token()
    event = trio.Event()
    future = ref.future()
    future.add_done_callback(lambda _: token.run_sync_soon(event.set))
    await event.wait()
    return future.result()
