"""The physical floor trio sets: channel request/reply and one-way throughput."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from benchmarks._harness import CollectorTime, run_concurrently


async def channel_round_trips(n: int) -> None:
    """``n`` request/reply round trips to a server task over a memory channel.

    The request carries a trio.Event the server sets: the least a caller can
    do to hand work to another task and wait for its answer.
    """
    send, receive = trio.open_memory_channel[trio.Event](64)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_answer_all, receive)
        for _ in range(n):
            done = trio.Event()
            await send.send(done)
            await done.wait()
        await send.aclose()


def channel_fan_out(
    pairs: int, collected: list[CollectorTime] | None = None
) -> Callable[[int], Awaitable[float]]:
    """About ``total`` `channel_round_trips` spread over ``pairs`` caller/server
    pairs running concurrently: the floor of `pride`'s fan-out, the same shape
    (one server task per caller, each caller waiting on its own answers).

    Returns the seconds of the concurrent phase only (starting the servers is
    setup). With ``collected``, the garbage collector's share of that phase is
    appended to it, one per batch.
    """

    async def run(total: int) -> float:
        per_pair = max(1, total // pairs)
        async with trio.open_nursery() as nursery:
            senders = []
            for _ in range(pairs):
                send, receive = trio.open_memory_channel[trio.Event](64)
                nursery.start_soon(_answer_all, receive)
                senders.append(send)

            async def caller(send: trio.MemorySendChannel[trio.Event]) -> None:
                for _ in range(per_pair):
                    done = trio.Event()
                    await send.send(done)
                    await done.wait()

            elapsed = await run_concurrently(caller, senders, collected)
            nursery.cancel_scope.cancel()
        return elapsed * total / (per_pair * pairs)

    return run


async def _answer_all(receive: trio.MemoryReceiveChannel[trio.Event]) -> None:
    async for done in receive:
        done.set()


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
