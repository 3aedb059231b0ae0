"""An in-process stand-in for a host, to measure the caller's side of the cluster alone.

`StubHost` answers each delivery on a thread of its own, the way Ray completes
a call's future on its own thread: the caller's link hands the answer to trio
exactly as it does with Ray, but no Ray call, no host process and no turn is
in the way, so what the caller's trio thread spends is pride's caller work.
The stub's own CPU (parsing a batch, writing its answers) is timed on its
thread and left out.
"""

from __future__ import annotations

import concurrent.futures
import json
import queue
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from pride.cluster.caller.link import Link
from pride.cluster.caller.ref import RemoteBranchRef

__all__ = ["StubHost", "stub_ref"]

BRANCH = "stub"


class StubHost:
    """Answers every envelope of a delivery at once, with the delivery's return."""

    def __init__(self, *, turns: bool) -> None:
        self.turns = turns  # answers name a turn id (as a Chat's do) or not (an Act's)
        self.branch_id = uuid.uuid4()
        self.cpu = 0.0  # seconds of CPU the stub's thread spent answering
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._seq: dict[str, int] = {}
        self._thread = threading.Thread(target=self._serve, name="stub host", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def hold(self, holding: bool) -> None:
        """Keep the calls that arrive from now on unanswered (True), or answer them (False)."""
        self._jobs.put(holding)

    def _serve(self) -> None:
        held: list[Any] | None = None
        while (job := self._jobs.get()) is not None:
            if isinstance(job, bool):
                if job:
                    held = held or []
                else:
                    jobs, held = held or [], None
                    for future, method, args in jobs:
                        self._answer(future, method, args)
                continue
            if held is not None:
                held.append(job)
            else:
                self._answer(*job)

    def _answer(self, future: Any, method: Any, args: tuple[Any, ...]) -> None:
        started = time.thread_time()
        result = method(*args)
        self.cpu += time.thread_time() - started
        future.set_result(result)  # runs the caller's done-callbacks on this thread

    def call(self, method: Callable[..., Any], args: tuple[Any, ...]) -> _Call:
        return _Call(self._jobs, method, args)

    def hello(self) -> bytes:
        branch = {"name": BRANCH, "id": str(self.branch_id), "capacity": 1 << 20}
        return json.dumps({"host": "stub", "pid": 0, "branches": [branch]}).encode()

    def deliver(self, payload: bytes) -> bytes | None:
        batch = json.loads(payload)
        out = []
        for item in batch["items"]:
            if item["k"] == "send":
                answer = {"k": "done", "id": item["id"], "room": 1 << 20, "value": "ok"}
                if self.turns:
                    answer["turn"] = str(uuid.uuid4())
                out.append(answer)
        if not out:
            return None
        seq = self._seq.get(batch["conn"], 0)
        self._seq[batch["conn"]] = seq + 1
        return json.dumps({"out": [{"s": seq, "items": out}]}).encode()


class _Call:
    """What ``handle.method.remote(...)`` returns: something with ``future()``."""

    def __init__(self, jobs: queue.SimpleQueue[Any] | None, method: Any, args: Any) -> None:
        self._jobs, self._method, self._args = jobs, method, args

    def future(self) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if self._jobs is not None:  # else it never resolves (the beacon, the long poll)
            self._jobs.put((future, self._method, self._args))
        return future


class _Method:
    def __init__(self, host: StubHost, name: str) -> None:
        self._host, self._name = host, name

    def remote(self, *args: Any) -> _Call:
        host = self._host
        if self._name == "beacon":  # a beacon that never fails: the host never dies
            return host.call(lambda: [_Call(None, None, ())], ())
        if self._name == "poll":  # every answer rides back on its delivery
            return _Call(None, None, ())
        return host.call(getattr(host, self._name), args)


class _Handle:
    def __init__(self, host: StubHost) -> None:
        for name in ("hello", "deliver", "poll", "beacon"):
            setattr(self, name, _Method(host, name))


class _Directory:
    """What a ref asks its cluster for: the one link to the stub."""

    stream_window = 16
    namespace = "stub"

    def __init__(self, link: Link) -> None:
        self._link = link

    def _ready_link(self, ref: Any) -> Link:
        return self._link

    async def _link_for(self, ref: Any) -> Link:
        return self._link

    def _known_link(self, ref: Any) -> Link:
        return self._link


def stub_ref(host: StubHost, spawn: Callable[[Callable[[], Any]], None]) -> tuple[Link, Any]:
    """A link to ``host`` (run it with ``nursery.start(link.run)``) and a ref through it."""
    link = Link(
        "stub",
        _Handle(host),
        reconnect_timeout=5.0,
        on_signal=lambda link, signal: None,
        spawn=spawn,
    )
    ref = RemoteBranchRef(_Directory(link), BRANCH, "stub", host.branch_id, 1 << 20)  # type: ignore[arg-type]
    return link, ref
