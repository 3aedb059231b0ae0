"""A host that lies: a Ray actor answering a Cluster with whatever a test injects.

It speaks the host side of the protocol just enough to be connected to
(``hello``, ``beacon``, ``deliver``, ``poll``, ``forget``), records what the
caller delivers, and answers polls with raw payloads the test hands it:
what a compromised or buggy host could send. `SilentHost` answers nothing
but ``hello``: every other call it gets stays pending on its caller; `MuteHost`
does not answer ``hello`` either (its caller's link never comes up).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any


class LyingHost:
    """Serves one branch name (``branch``) that never runs anything."""

    def __init__(self, branch: str) -> None:
        self._branch = branch
        self._id = str(uuid.uuid4())
        self._items: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._answers: asyncio.Queue[bytes] = asyncio.Queue()
        self._conn = ""
        self._beacon: Any = None
        self._refusals: list[bytes] = []

    async def hello(self) -> bytes:
        described = {"name": self._branch, "id": self._id, "capacity": 8}
        return json.dumps({"host": "liar", "pid": 0, "branches": [described]}).encode()

    async def beacon(self) -> list[Any]:
        if self._beacon is None:
            import ray

            self._beacon = ray.get_runtime_context().current_actor.never.remote()
        return [self._beacon]

    async def never(self) -> None:
        await asyncio.Event().wait()

    async def deliver(self, payload: bytes) -> bytes | None:
        batch = json.loads(payload)
        self._conn = batch["conn"]
        self._items += batch["items"]
        self._arrived.set()
        if self._refusals and batch["items"]:
            return self._refusals.pop(0)
        return None

    async def refuse_next(self, payload: bytes) -> None:
        """Return ``payload`` (raw bytes) from the next delivery that carries items."""
        self._refusals.append(payload)

    async def poll(self, conn: str, timeout: float = 15.0) -> bytes:
        try:
            return await asyncio.wait_for(self._answers.get(), timeout)
        except TimeoutError:
            return b"[]"

    async def forget(self, conn: str) -> None:
        return None

    async def sent(self, count: int) -> list[dict[str, Any]]:
        """The items delivered so far, once there are at least ``count`` sends."""
        while len([i for i in self._items if i.get("k") == "send"]) < count:
            self._arrived.clear()
            await self._arrived.wait()
        return list(self._items)

    async def answer(self, payload: bytes) -> None:
        """Send ``payload`` (raw bytes) as the next poll's answer."""
        await self._answers.put(payload)


class MuteHost:
    """A host actor that never answers ``hello``: a caller's link stays connecting."""

    async def hello(self) -> bytes:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class SilentHost:
    """Serves one branch name (``branch``) and answers no call but ``hello``: its
    beacon, polls and deliveries wait forever, each a call pending on the caller."""

    def __init__(self, branch: str) -> None:
        self._branch = branch
        self._id = str(uuid.uuid4())

    async def hello(self) -> bytes:
        described = {"name": self._branch, "id": self._id, "capacity": 8}
        return json.dumps({"host": "silent", "pid": 0, "branches": [described]}).encode()

    async def beacon(self) -> list[Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def deliver(self, payload: bytes) -> bytes | None:
        await asyncio.Event().wait()
        return None

    async def poll(self, conn: str, timeout: float = 15.0) -> bytes:
        await asyncio.Event().wait()
        return b"[]"

    async def forget(self, conn: str) -> None:
        return None


class GarbledHello(LyingHost):
    """A lying host whose ``hello`` is not JSON."""

    async def hello(self) -> bytes:
        return b"\x00 not a hello"


class FailingPoll(LyingHost):
    """A lying host whose ``poll`` raises (a Ray task error on its caller)."""

    async def poll(self, conn: str, timeout: float = 15.0) -> bytes:
        raise RuntimeError("this host's poll is broken")


class DroppingPoll(LyingHost):
    """A lying host whose ``poll`` answers that it dropped the connection (HostLost)."""

    async def poll(self, conn: str, timeout: float = 15.0) -> bytes:
        lost = {"type": "HostLost", "kind": "pride", "message": "dropped", "fields": {}}
        return json.dumps({"error": lost}).encode()
