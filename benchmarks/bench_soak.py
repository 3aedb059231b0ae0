"""Soak: 100 branches under random faults for ten minutes; memory stays flat, invariants hold.

One session supervises 100 branches whose scripted models fail at random
(server errors and rate limits, some retried; replies slow enough for callers
to give up). Two hundred caller tasks drive them on the real clock: asks with
timeouts, sends, streams abandoned after a few items, cancellations, loop
directives, tool calls that raise, hang, spawn never-ending tasks or call
back into branches, and crashes (``Escalate``, restarted by the session).
Four times a second the oldest branch is removed and replaced by a fresh one
(churn catches leaks in membership, observers and registries, and bounds the
recorded conversations, so the steady state is a fixed amount of memory; the
scripted models' request records are cleared for the same reason). The oldest,
not a random one: every branch then lives for ``BRANCHES`` replacements. With a
random choice lifetimes are exponential, a few branches live many times the
mean and grow histories of thousands of messages, and the live set wanders
(44k to 53k messages in five minutes); RSS follows its high-water mark, so it
crept by a few MiB over ten minutes with no Python structure growing.

The invariant checker (``tests/reliability/invariants.py``) observes every
signal and envelope; it is checked and pruned every two seconds, each retired
branch is checked (history = signals) as it leaves, and everything left is
checked at the end. A violation fails the run.

Memory: RSS is read after a warm-up (a quarter of the run, at least two
seconds: by then most branches of the start have been replaced and the
process is in its steady state) and at the end. **Flat** means the end is within 10% + 8 MiB of the
start. ``PRIDE_SOAK_SECONDS`` sets the duration (default 600; ``--smoke``
runs three seconds, where the memory verdict is shown but means little).
"""

from __future__ import annotations

import logging
import os
import random
import time
from typing import Any

import trio

import pride
from benchmarks._harness import figure_line
from benchmarks._rss import rss_bytes
from pride import (
    Act,
    ActionCall,
    Branch,
    Call,
    Chat,
    ChatAndRecord,
    LoopDirective,
    RateLimited,
    Run,
    ScriptedModel,
    ServerError,
    Session,
)
from pride.llm import ModelRequest, RetryPolicy, ToolCall
from tests.reliability.invariants import InvariantChecker
from tests.reliability.support import ALLOWED_ERRORS, Leftovers, register_operations, tools

BRANCHES = 100
CALLERS = 200
CHURN_EVERY = 0.25
CHECK_EVERY = 2.0
FLAT_RATIO, FLAT_SLACK = 1.10, 8 * 2**20


def _model(rng: random.Random) -> ScriptedModel:
    async def reply(request: ModelRequest) -> Any:
        last = request.messages[-1]
        text = last.get("content") if isinstance(last.get("content"), str) else ""
        if text.startswith("tool=") and last.get("role") == "user":
            return ToolCall(text.removeprefix("tool="), {"n": 0})
        await trio.sleep(rng.uniform(0, 0.004))
        roll = rng.random()
        if roll < 0.04:
            raise ServerError("soak: simulated 500", status=500)
        if roll < 0.07:
            raise RateLimited("soak: simulated 429", status=429, retry_after=0.001)
        if roll < 0.08:
            await trio.sleep(0.6)  # slower than the callers' patience
        return "ok"

    retry = RetryPolicy(max_retries=1, base_delay=0.001, max_delay=0.002, jitter=0)
    return ScriptedModel(reply, retry=retry, chunk_size=1)


class Soak:
    def __init__(self, seconds: float, seed: int = 10) -> None:
        self.seconds = seconds
        self.rng = random.Random(seed)
        self.checker = InvariantChecker(keep_signals=False)
        self.leftovers = Leftovers()
        self.session = Session(name="soak", max_restarts=1_000_000, period=1.0)
        register_operations(self.session)
        self.session.observe(handler=self.checker.dispatch)
        self.branches: list[Branch] = []
        self.made = 0
        self.outcomes: dict[str, int] = {}
        self.unexpected: list[str] = []
        self.trace: list[int] = []  # RSS every CHECK_EVERY seconds

    def new_branch(self) -> Branch:
        self.made += 1
        return Branch(
            name=f"soak-{self.made}", chat_model=_model(self.rng), tools=tools(self.leftovers)
        )

    def count(self, what: str) -> None:
        self.outcomes[what] = self.outcomes.get(what, 0) + 1

    async def one_call(self) -> None:
        branch = self.rng.choice(self.branches)
        roll = self.rng.random()
        try:
            if roll < 0.45:
                await pride.ask(branch, Chat("hello"), timeout=0.5)
            elif roll < 0.60:
                await pride.ask(branch, ChatAndRecord("remember"), timeout=0.5)
            elif roll < 0.68:
                reply = await pride.send(branch, Chat("sent"))
                with trio.move_on_after(self.rng.uniform(0, 0.01)):
                    await reply.result()
                reply.cancel()
            elif roll < 0.78:
                tool = self.rng.choice(["slow", "boom", "spawn", "hang"])
                with trio.move_on_after(0.5):
                    async with pride.stream(branch, Run(f"tool={tool}")) as items:
                        async for _ in items:
                            if self.rng.random() < 0.3:
                                break
            elif roll < 0.83:
                tool = self.rng.choice(["slow", "boom", "spawn"])
                await pride.ask(branch, Act([ActionCall(tool, {"n": 0})]), timeout=0.5)
            elif roll < 0.86:
                await pride.ask(branch, Call("nested", text="nested"), timeout=0.5)
            elif roll < 0.89:
                peer = self.rng.choice(self.branches).name
                await pride.ask(branch, Call("peer", to=peer, text="peer"), timeout=0.5)
            elif roll < 0.91:
                await pride.ask(branch, Call("crash"), timeout=0.5)
            else:
                directive = self.rng.choice([LoopDirective.BREAK, LoopDirective.CANCEL])
                branch.control(directive)
                await trio.sleep(0.001)
            self.count("result")
        except (*ALLOWED_ERRORS, RateLimited) as exc:
            self.count(type(exc).__name__)
        except Exception as exc:
            self.unexpected.append(f"{type(exc).__name__}: {exc}")

    async def caller(self, deadline: float) -> None:
        while trio.current_time() < deadline:
            await self.one_call()

    async def churn(self, deadline: float) -> None:
        async with trio.open_nursery() as leaving:
            while trio.current_time() < deadline:
                await trio.sleep(CHURN_EVERY)
                index = self.made % BRANCHES  # the oldest (round robin: see the docstring)
                fresh = await self.session.spawn(self.new_branch())
                old, self.branches[index] = self.branches[index], fresh
                leaving.start_soon(self.retire, old)

    async def retire(self, branch: Branch) -> None:
        await self.session.remove(branch)  # after its running turn
        self.checker.forget(branch)  # history = signals, no turn open

    async def checks(self, deadline: float) -> None:
        while trio.current_time() < deadline:
            await trio.sleep(CHECK_EVERY)
            self.checker.prune()
            self.checker.check()
            self.trace.append(rss_bytes())
            for branch in self.branches:  # a scripted model keeps every request it got
                branch.chat_model.calls.clear()  # type: ignore[attr-defined]

    async def run(self) -> dict[str, Any]:
        with self.checker.envelopes():
            async with self.session:
                for _ in range(BRANCHES):
                    self.branches.append(await self.session.spawn(self.new_branch()))
                started = trio.current_time()
                warm_until = started + max(2.0, self.seconds / 4)
                deadline = started + self.seconds
                rss: dict[str, int] = {}
                async with trio.open_nursery() as nursery:
                    for _ in range(CALLERS):
                        nursery.start_soon(self.caller, deadline)
                    nursery.start_soon(self.churn, deadline)
                    nursery.start_soon(self.checks, deadline)
                    await trio.sleep_until(warm_until)
                    rss["start"] = rss_bytes()
                rss["end"] = rss_bytes()
                live = list(self.branches)
            self.checker.prune()
            self.checker.check(*live, quiescent=True)
        assert not self.unexpected, self.unexpected[:10]
        assert self.leftovers.running == 0, f"{self.leftovers.running} leftover tasks"
        return rss


class _Tally(logging.Handler):
    """Counts pride's log records by logger and level instead of printing thousands."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.counts: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        key = f"{record.name} {record.levelname}"
        self.counts[key] = self.counts.get(key, 0) + 1


def main(smoke: bool) -> None:
    seconds = 3.0 if smoke else float(os.environ.get("PRIDE_SOAK_SECONDS", "600"))
    soak = Soak(seconds)
    tally, logger = _Tally(), logging.getLogger("pride")
    logger.addHandler(tally)
    logger.propagate = False
    wall = time.perf_counter()
    try:
        rss = trio.run(soak.run)
    finally:
        logger.removeHandler(tally)
        logger.propagate = True
    wall = time.perf_counter() - wall
    checker = soak.checker
    turns = checker.turns_checked
    print(
        f"  {seconds:.0f} s, {BRANCHES} branches ({soak.made} made, one replaced every "
        f"{CHURN_EVERY} s), {CALLERS} callers: {turns} turns, "
        f"{checker.envelopes_checked} envelopes checked ({turns / wall:.0f} turns/s)"
    )
    print("  outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(soak.outcomes.items())))
    print("  logged: " + ", ".join(f"{k} {v}" for k, v in sorted(tally.counts.items())))
    print(f"  invariants: held ({len(checker.violations)} violations)")
    start, end = rss["start"] / 2**20, rss["end"] / 2**20
    flat = rss["end"] <= rss["start"] * FLAT_RATIO + FLAT_SLACK
    print(f"  RSS after warm-up {start:.1f} MiB, at the end {end:.1f} MiB")
    step = max(1, len(soak.trace) // 10)
    samples = " ".join(f"{value / 2**20:.0f}" for value in soak.trace[::step])
    print(f"  RSS every {CHECK_EVERY * step:.0f} s (MiB): {samples}")
    print(figure_line("RSS growth after warm-up", end - start, "MiB", "flat", flat))
