"""The physical floor trio sets: channel request/reply and one-way throughput."""

from __future__ import annotations

import trio


async def channel_round_trips(n: int) -> None:
    """``n`` request/reply round trips to a server task over a memory channel.

    The request carries a trio.Event the server sets: the least a caller can
    do to hand work to another task and wait for its answer.
    """
    send, receive = trio.open_memory_channel[trio.Event](64)

    async def server() -> None:
        async for done in receive:
            done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        for _ in range(n):
            done = trio.Event()
            await send.send(done)
            await done.wait()
        await send.aclose()


async def channel_one_way(n: int) -> None:
    """``n`` items sent one way into a consumer task (the consumer drains them)."""
    send, receive = trio.open_memory_channel[int](64)

    async def consumer() -> None:
        async for _ in receive:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        async with send:
            for item in range(n):
                await send.send(item)
