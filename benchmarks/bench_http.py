"""HTTP path overhead: N concurrent chat requests through iModel vs a bare httpx loop.

Both sides make the same requests (same JSON body, same headers) to the same
loopback server in the same trio run, through the same ``httpx.AsyncClient``
(the model's own), and samples alternate between them so drift in httpcore's
pool (which shrinks after a burst) hits both alike. pride's side adds request
building, the limiter fast path, the retry wrapper, error mapping and response
normalisation; the bare side posts the JSON and reads ``choices[0]``.

Target (issue 9): pride's throughput >= 90 % of bare httpx (<= 10 % overhead)
at 100 and at 1,000 concurrent requests.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable, Callable

import trio

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from pride.llm import ModelRequest, iModel
from pride.testing import openai_server

_MESSAGES = [
    {"role": "system", "content": "You are a benchmark."},
    {"role": "user", "content": "Say something short."},
]
_KEY = "bench-key-not-secret"


def _reply(body: object) -> str:
    return "A short benchmark reply."


async def _run_concurrently(fn: Callable[[], Awaitable[None]], ops: int, concurrency: int) -> None:
    remaining = ops

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await fn()

    async with trio.open_nursery() as nursery:
        for _ in range(min(concurrency, ops)):
            nursery.start_soon(worker)


async def _compare(
    base_url: str, concurrency: int, ops: int, repeats: int, warmup_seconds: float
) -> tuple[Stats, Stats]:
    url = base_url + "/chat/completions"
    body = {"model": "bench", "messages": _MESSAGES}
    headers = {"authorization": f"Bearer {_KEY}"}
    request = ModelRequest(messages=_MESSAGES)
    async with iModel("openai/bench", base_url=base_url, api_key=_KEY) as model:
        # The bare loop uses the model's own httpx client, so both sides share one
        # connection pool and the difference measured is pride's layer alone.
        client = model.http_client()

        async def bare_call() -> None:
            response = await client.post(url, json=body, headers=headers)
            response.raise_for_status()
            assert response.json()["choices"][0]["message"]["content"]

        async def pride_call() -> None:
            reply = await model.invoke(request)
            assert reply.text

        async def bare(n: int) -> None:
            await _run_concurrently(bare_call, n, concurrency)

        async def pride(n: int) -> None:
            await _run_concurrently(pride_call, n, concurrency)

        # httpcore opens a connection per concurrent request at first, then
        # expires the ones it stops using (keep-alive expiry, 5 s); its per-request
        # bookkeeping grows with the pool, so both sides warm up past that first.
        warm_until = trio.current_time() + warmup_seconds
        while trio.current_time() < warm_until:
            await bare(ops)
            await pride(ops)
        bare_name = f"bare httpx, {concurrency} concurrent (per request)"
        pride_name = f"pride iModel, {concurrency} concurrent (per request)"
        stats = await measure_interleaved(
            {bare_name: (bare, ops), pride_name: (pride, ops)}, repeats=repeats, warmup=0
        )
    return stats[bare_name], stats[pride_name]


async def _main(smoke: bool) -> None:
    # (concurrency, requests per sample, samples per side, warm-up seconds)
    plans = [(10, 100, 1, 0.0)] if smoke else [(100, 2000, 7, 7.0), (1000, 1000, 3, 3.0)]
    async with openai_server(_reply, record=False) as server:
        for concurrency, ops, repeats, warmup_seconds in plans:
            bare, pride = await _compare(server.base_url, concurrency, ops, repeats, warmup_seconds)
            print(bare.line("us"))
            print(pride.line("us"))
            # Each pride sample is compared with the bare sample taken just before it,
            # and the median of those ratios is the figure (robust to pool drift).
            pairs = zip(bare.samples, pride.samples, strict=True)
            ratio = statistics.median(b / p for b, p in pairs)
            print(
                f"  rates: bare {1 / bare.median:,.0f} req/s, pride {1 / pride.median:,.0f} req/s"
            )
            # Issue 9: at least 90% of the bare loop's rate at 100 and 1,000.
            target = ">= 0.90" if concurrency in (100, 1000) else "(info)"
            ok = ratio >= 0.90 or concurrency not in (100, 1000)
            label = f"pride/bare throughput at {concurrency} concurrent"
            print(ratio_line(label, ratio, target, ok))


def main(smoke: bool) -> None:
    """Run the comparison in its own trio run and print the figures."""
    trio.run(_main, smoke)
