"""Memory: idle branch actors and recorded history.

Targets (issue 9): at most 8 KiB of resident memory per idle branch actor
beyond its messages; at most 1 MiB per 1,000 recorded short messages (the
reference system spends about 25 MiB).
"""

from __future__ import annotations

import trio

from benchmarks._harness import figure_line
from benchmarks._rss import rss_bytes
from pride import Branch, Communicate, ScriptedModel, ask


async def _idle_actors(count: int) -> float:
    model = ScriptedModel(lambda request: "ok")
    before = rss_bytes()
    async with trio.open_nursery() as nursery:
        branches = [Branch(chat_model=model) for _ in range(count)]
        for branch in branches:
            await nursery.start(branch.serve, nursery)  # hosted, as session members are
        await trio.testing.wait_all_tasks_blocked()
        after = rss_bytes()
        nursery.cancel_scope.cancel()
    return (after - before) / count


async def _history(messages: int) -> float:
    model = ScriptedModel(lambda request: "fine, thanks")
    async with Branch(chat_model=model) as branch:
        await ask(branch, Communicate("warm up"))
        before = rss_bytes()
        for index in range(messages // 2):
            await ask(branch, Communicate(f"how are you, #{index}?"))
        after = rss_bytes()
    return (after - before) / messages * 1000


async def _main(smoke: bool) -> None:
    import trio.testing  # noqa: F401 - wait_all_tasks_blocked

    for count in [200] if smoke else [10_000, 100_000]:
        per_branch = await _idle_actors(count)
        print(f"  idle branch actors: {count:>7}   {per_branch / 1024:8.2f} KiB each")
        if not smoke:
            ok = per_branch <= 8 * 1024
            print(figure_line(f"per idle branch ({count})", per_branch / 1024, "KiB", "<= 8", ok))
    messages = 200 if smoke else 10_000
    per_thousand = await _history(messages)
    print(
        f"  recorded history: {per_thousand / 1024:8.1f} KiB per 1,000 messages "
        f"({messages} recorded by communicate turns)"
    )
    if not smoke:
        mib = per_thousand / 2**20
        print(figure_line("per 1,000 recorded messages", mib, "MiB", "<= 1", mib <= 1.0))


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
