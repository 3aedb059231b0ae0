"""One memory measurement in a fresh process: ``python -m benchmarks._memory_probe KIND N``.

Resident-set growth is only meaningful in a process that did nothing else:
freed memory from earlier workloads is reused by the allocator and would hide
growth. Prints the figure (bytes) on stdout.

* ``idle N``: bytes per idle branch actor, N actors hosted by one nursery
  (as a session hosts its members);
* ``history N``: bytes per 1,000 messages recorded by N/2 communicate turns;
* ``session N``: bytes per idle member of a session of N branches, each
  after one ``Chat`` turn (which records no message, so what is measured is
  the member and what a turn leaves behind, not the conversation).
"""

from __future__ import annotations

import sys

import trio
import trio.testing

from benchmarks._rss import rss_bytes
from pride import Branch, Chat, Communicate, ScriptedModel, Session, ask


async def idle_actors(count: int) -> float:
    model = ScriptedModel(lambda request: "ok")
    before = rss_bytes()
    async with trio.open_nursery() as nursery:
        branches = [Branch(chat_model=model) for _ in range(count)]
        for branch in branches:
            await nursery.start(branch.serve, nursery)
        await trio.testing.wait_all_tasks_blocked()
        after = rss_bytes()
        nursery.cancel_scope.cancel()
    return (after - before) / count


async def session_members(count: int) -> float:
    model = ScriptedModel(lambda request: "ok", keep_calls=0)
    command = Chat("hi")
    async with Session() as session:
        # Warm up: the first member and turn load code and fill caches.
        await ask(await session.spawn(Branch(chat_model=model)), command)
        before = rss_bytes()
        # Named: default names are 8 hex digits, which collide now and then at this size.
        branches = [Branch(chat_model=model, name=f"member-{index}") for index in range(count)]
        for branch in branches:
            await session.spawn(branch)
            await ask(branch, command)
        await trio.testing.wait_all_tasks_blocked()
        after = rss_bytes()
    return (after - before) / count


async def history(messages: int) -> float:
    # keep_calls=0: the scripted model keeps no copies of the requests it saw,
    # so what grows is the conversation itself.
    model = ScriptedModel(lambda request: "fine, thanks", keep_calls=0)
    async with Branch(chat_model=model) as branch:
        await ask(branch, Communicate("warm up"))
        before = rss_bytes()
        for index in range(messages // 2):
            await ask(branch, Communicate(f"how are you, #{index}?"))
        after = rss_bytes()
    return (after - before) / messages * 1000


def main() -> None:
    kind, count = sys.argv[1], int(sys.argv[2])
    probe = {"idle": idle_actors, "history": history, "session": session_members}[kind]
    print(trio.run(probe, count))


if __name__ == "__main__":
    main()
