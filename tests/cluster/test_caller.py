"""The caller's link: which path brings an answer back, and that none is left behind.

A host hands its answers to a delivery waiting on it before its long poll,
and the caller's poll waits while a delivery is under way; these tests hold
the link to its promise that every answer still arrives promptly: one whose
turn outlasts the delivery's linger (by the poll), including while other
asks keep deliveries under way to the same host (by one of them, or by the
poll once they are done).
"""

from __future__ import annotations

import trio

import pride
from pride import Call, Chat
from pride.cluster import Cluster

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"


async def test_an_answer_after_the_deliverys_linger_comes_by_the_poll(
    cluster: Cluster, name: str
) -> None:
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    with trio.fail_after(10):
        assert await pride.ask(ref, Call("block", seconds=0.2)) == "slept"


async def test_a_slow_answer_arrives_while_other_asks_keep_deliveries_under_way(
    cluster: Cluster, name: str
) -> None:
    slow = await cluster.spawn(WORKER, name=f"{name}-slow", host="shared")
    busy = await cluster.spawn(ECHO, name=f"{name}-busy", host="shared")
    answered = trio.Event()
    chats: list[str] = []

    async def keep_asking(sender: int) -> None:
        n = 0
        while not answered.is_set():
            chats.append(await pride.ask(busy, Chat(f"{sender}.{n}")))
            n += 1

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for sender in range(20):
                nursery.start_soon(keep_asking, sender)
            assert await pride.ask(slow, Call("block", seconds=0.3)) == "slept"
            answered.set()
    assert chats and all(chat.startswith("echo: ") for chat in chats)
