"""Anthropic prompt caching: a conversation that reads its own prefix back, with no network.

Run: ``python examples/prompt_caching.py``. pride.testing's loopback server
plays a Claude model and caches prompts as Anthropic's API does: each request
prefix up to a ``cache_control`` breakpoint is written once
(``cache_creation_input_tokens``) and read by later requests that start the
same way (``cache_read_input_tokens``). pride places the breakpoints by its
default policy (the tools, the system text, the history before the turn's new
input), so the second turn reads what the first wrote; ``prompt_cache=False``
turns it off, and the same two turns then read nothing.
"""

from __future__ import annotations

from typing import Any

import trio

from pride import Branch, RunEnd, Session, iModel
from pride.llm import RetryPolicy
from pride.testing import openai_server

SYSTEM = "You are the support agent of a bookshop. Answer in one sentence. " * 30


def claude(server: Any, **options: Any) -> iModel:
    return iModel(
        "anthropic/claude-sonnet-4-5",
        base_url=server.base_url,
        api_key="sk-ant-example",
        retry=RetryPolicy(max_retries=0),
        **options,
    )


async def two_turns(**options: Any) -> list[RunEnd]:
    """Two turns of one conversation; their RunEnd signals."""
    ends: list[RunEnd] = []
    async with openai_server(["We open at nine.", "Yes, on Sundays too."]) as server:
        async with Session() as session:
            session.observe(RunEnd, handler=ends.append)
            branch = await session.spawn(
                Branch(name="support", system=SYSTEM, chat_model=claude(server, **options))
            )
            await branch.chat_and_record("When do you open?")
            await branch.chat_and_record("Also on Sundays?")
        breakpoints = str(server.requests[-1].body).count("cache_control")
    print(f"  the second request carried {breakpoints} cache breakpoint(s)")
    return ends


def show(ends: list[RunEnd]) -> None:
    for number, end in enumerate(ends, start=1):
        print(
            f"  turn {number}: {end.input_tokens} input tokens, {end.cache_write_tokens} "
            f"written to the cache, {end.cached_tokens} read from it, "
            f"${end.total_cost_usd or 0:.6f}"
        )


async def main() -> None:
    print("default policy (tools, system, history):")
    cached = await two_turns()
    show(cached)
    first, second = cached
    assert first.cache_write_tokens > 0 and first.cached_tokens == 0
    assert second.cached_tokens == first.cache_write_tokens  # the system text, read back

    print("prompt_cache=False:")
    plain = await two_turns(prompt_cache=False)
    show(plain)
    assert all(end.cached_tokens == end.cache_write_tokens == 0 for end in plain)
    # Reads cost a tenth of the input price: the cached second turn is the cheaper one.
    assert (second.total_cost_usd or 0) < (plain[1].total_cost_usd or 0)


if __name__ == "__main__":
    trio.run(main)
