"""The reference system (lionagi) under pride's benchmark workloads.

Run only inside the benchmark environment (``.bench-venv``, created by
``make bench``), never by ``make test``: lionagi is not a dependency of pride.

The model call is replaced by an immediate canned reply at the lowest layer
(the endpoint's HTTP call), so lionagi's own pipeline — instruction building,
request compilation, the rate-limited executor, event bookkeeping, response
parsing — runs as in production, just as pride's ScriptedModel goes through
pride's real iModel pipeline. Prints one JSON object of per-turn seconds.

    .bench-venv/bin/python benchmarks/reference/lionagi_workloads.py [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-not-a-real-key")
# lionagi dumps branch logs into ./data/logs at exit: keep that out of the checkout.
os.chdir(tempfile.mkdtemp(prefix="lionagi-bench-"))
logging.disable(logging.INFO)

from lionagi import Branch, iModel  # noqa: E402
from lionagi.service import token_calculator  # noqa: E402
from lionagi.service.connections.endpoint import Endpoint  # noqa: E402


class _OfflineEncoding:
    """tiktoken downloads its encodings on first use, which this machine cannot do.
    lionagi's token walk is kept; only the BPE is replaced by a chars/4 estimate,
    which is cheaper than real tokenising (so this favours the reference)."""

    name = "o200k_base"

    def encode(self, text: str, **_: Any) -> range:
        return range(len(text) // 4)


class _OfflineTiktoken:
    @staticmethod
    def get_encoding(_: str) -> _OfflineEncoding:
        return _OfflineEncoding()

    @staticmethod
    def encoding_for_model(_: str) -> _OfflineEncoding:
        return _OfflineEncoding()


token_calculator.tiktoken = _OfflineTiktoken  # type: ignore[assignment]

_CANNED = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4.1-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


async def _canned_http(
    self: Endpoint, payload: dict[str, Any], headers: dict[str, str], **kw: Any
) -> dict[str, Any]:
    return _CANNED


Endpoint._call_http = _canned_http  # type: ignore[method-assign]


def _branch(history: int = 0) -> Branch:
    branch = Branch(chat_model=iModel(provider="openai", model="gpt-4.1-mini"))
    for index in range(history // 2):
        branch.msgs.add_message(instruction=f"question {index}")
        branch.msgs.add_message(assistant_response=f"answer {index}")
    return branch


async def _turns(branch: Branch, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await branch.chat("hi")
    return (time.perf_counter() - start) / n


async def _fan_out(branches: int, per_branch: int) -> float:
    members = [_branch() for _ in range(branches)]

    async def worker(branch: Branch) -> None:
        for _ in range(per_branch):
            await branch.chat("hi")

    start = time.perf_counter()
    await asyncio.gather(*(worker(branch) for branch in members))
    return (time.perf_counter() - start) / (branches * per_branch)


def _rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _history_memory(messages: int) -> float:
    """Resident bytes per 1,000 messages recorded by communicate turns."""
    branch = _branch()
    await branch.communicate("warm up")
    before = _rss()
    for index in range(messages // 2):
        await branch.communicate(f"how are you, #{index}?")
    return (_rss() - before) / messages * 1000


async def _median(make: Any, repeats: int) -> float:
    samples = [await make() for _ in range(repeats)]
    return statistics.median(samples)


async def main(smoke: bool) -> dict[str, Any]:
    repeats = 2 if smoke else 5
    ops = 50 if smoke else 1000
    warm = _branch()
    await _turns(warm, 10)
    results: dict[str, Any] = {"version": __import__("lionagi").__version__}
    results["turn"] = await _median(lambda: _turns(_branch(), ops), repeats)
    sizes = [10, 100] if smoke else [10, 100, 1000, 10000]
    results["history"] = {}
    for size in sizes:
        branch = _branch(size)
        n = max(10, ops // (10 if size >= 1000 else 1))
        results["history"][str(size)] = await _median(lambda b=branch, n=n: _turns(b, n), repeats)
    fan = [50] if smoke else [1000]
    results["fan_out"] = {}
    for size in fan:
        results["fan_out"][str(size)] = await _median(
            lambda size=size: _fan_out(size, 2 if smoke else 5), 2 if smoke else 3
        )
    results["history_memory"] = await _history_memory(200 if smoke else 4000)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.smoke))))
    sys.stdout.flush()
