"""``pride run`` as a long-running process: requests per second and CPU per request.

The process is the real command, a subprocess reading JSON-line requests on
its stdin and answering on its stdout, its 100 branches on the scripted model
(`benchmarks._run_app`). Each repetition starts a fresh process (and, with
``--store``, a fresh store file), sends one warm-up request and waits for its
answer, then starts the clock: start-up, imports and the first turn are not
measured. Then ``N`` ``ChatAndRecord`` requests spread over the branches
(request ``i`` to ``b{i % 100}``) are written at once, and the clock stops at
the last answer. Every answer must be ``ok``.

Figures, all from the same run, the workloads alternating:

* requests/s with and without ``--store``, and their ratio against issue 19's
  target (with a store >= 0.7x without, at 100 concurrent branches);
* the floor: the same requests in-process, sent to a session of 100 branches
  as ``pride run`` sends them (in order, all queued at once as the mailboxes
  let them, the results awaited in order), with and without a store.
  What separates ``pride run`` from the floor is what the process adds per
  request: reading and parsing the line, waiting for the answer in a task
  of its own, writing the answer line and the turn's log record (to
  /dev/null here: it is formatted all the same);
* the CPU per request of the whole ``pride run`` process (every thread: the
  store's SQLite writer, the stdin reader), read from ``/proc/<pid>/stat``
  over the measured phase, against the floor's CPU per turn
  (``time.process_time``). CPU is less sensitive than a rate to the other
  tenants of a shared machine, though not immune to them.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from benchmarks._harness import Stats, measure_interleaved, ratio_line
from benchmarks._run_app import BRANCHES_ENV
from benchmarks._workloads import scripted
from pride import Branch, ChatAndRecord, Reply, Session

ROOT = Path(__file__).resolve().parents[1]
APP = "benchmarks._run_app:spawn"
TIMEOUT = 600.0
"""Seconds one repetition may take before the benchmark gives up on it."""


def _process_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, every thread) of ``pid`` so far; None without /proc."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_WARM_UP = (
    b'{"id": "warm", "to": "b0", "command": {"type": "ChatAndRecord", "instruction": "hi"}}\n'
)


def _requests(total: int, branches: int) -> bytes:
    lines = (
        f'{{"id": {index}, "to": "b{index % branches}", '
        '"command": {"type": "ChatAndRecord", "instruction": "hello"}}\n'
        for index in range(total)
    )
    return "".join(lines).encode()


def _cli(store: bool, branches: int, cpu: list[float]) -> Callable[[int], Awaitable[float]]:
    """``total`` requests through a fresh ``pride run``; seconds from the warm-up's answer."""

    async def run(total: int) -> float:
        with tempfile.TemporaryDirectory() as directory, trio.fail_after(TIMEOUT):
            command = [sys.executable, "-m", "pride.cli", "run", APP]
            command += ["--exit-on-eof", "--no-status"]
            if store:
                command += ["--store", str(Path(directory, "store.db"))]
            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
                env={**os.environ, BRANCHES_ENV: str(branches)},
            )
            try:
                return await _drive(process, total, branches, cpu)
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.kill()
                    await process.wait()

    return run


async def _drive(process: trio.Process, total: int, branches: int, cpu: list[float]) -> float:
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    await stdin.send_all(_WARM_UP)
    pending = b""
    while b"\n" not in pending:
        data = await stdout.receive_some()
        if not data:
            raise RuntimeError("pride run exited before answering the warm-up request")
        pending += data
    body = _requests(total, branches)
    cpu_before, started = _process_cpu(process.pid), time.perf_counter()

    async def write() -> None:
        await stdin.send_all(body)
        await stdin.aclose()  # --exit-on-eof: the process ends after the last answer

    answered = failed = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        while answered < total:
            data = await stdout.receive_some()
            if not data:
                raise RuntimeError(f"pride run exited after {answered} of {total} answers")
            answered += data.count(b"\n")
            failed += data.count(b'"ok":false')
    elapsed = time.perf_counter() - started
    cpu_after = _process_cpu(process.pid)
    if failed:
        raise RuntimeError(f"{failed} of {total} requests were answered with an error")
    if cpu_before is not None and cpu_after is not None:
        cpu.append((cpu_after - cpu_before) / total)
    return elapsed


def _in_process(store: bool, branches: int, cpu: list[float]) -> Callable[[int], Awaitable[float]]:
    """The floor: the same requests sent in-process as ``pride run`` sends them (in
    order, all queued at once, mailboxes pushing back), their results awaited in order."""

    async def run(total: int) -> float:
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory, "store.db") if store else None
            async with Session(store=path) as session:
                model = scripted()
                members = [
                    await session.spawn(Branch(name=f"b{index}", chat_model=model))
                    for index in range(branches)
                ]
                await session.ask(members[0], ChatAndRecord("hi"))  # pride run's warm-up
                command = ChatAndRecord("hello")
                sent, received = trio.open_memory_channel[Reply](math.inf)

                async def send_all() -> None:
                    async with sent:
                        for index in range(total):
                            reply = await session.send(members[index % branches], command)
                            sent.send_nowait(reply)

                async def await_all() -> None:
                    async with received:
                        async for reply in received:
                            await reply.result()

                started, cpu_before = time.perf_counter(), time.process_time()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send_all)
                    nursery.start_soon(await_all)
                elapsed = time.perf_counter() - started
                cpu.append((time.process_time() - cpu_before) / total)
        return elapsed

    return run


_CLI, _CLI_STORE = "pride run, no store", "pride run, --store"
_FLOOR, _FLOOR_STORE = "in-process, no store", "in-process, store"


def _median_us(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e6:6.0f} us" if samples else "   n/a"


def _info(label: str, value: float) -> str:
    return f"  {label:<60} {value:8.2f}x   (no target)"


async def _main(smoke: bool) -> None:
    branches = 10 if smoke else 100
    total = 40 if smoke else 4000
    repeats, warmup = (1, 0) if smoke else (5, 1)
    sides = {_CLI: (_cli, False), _CLI_STORE: (_cli, True)}
    sides.update({_FLOOR: (_in_process, False), _FLOOR_STORE: (_in_process, True)})
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    label = "{} ({} branches, per request)"
    stats = await measure_interleaved(
        {
            label.format(name, branches): (make(store, branches, cpu[name]), total)
            for name, (make, store) in sides.items()
        },
        repeats=repeats,
        warmup=warmup,
    )
    figures: dict[str, Stats] = {name: stats[label.format(name, branches)] for name in sides}
    for name, figure in figures.items():
        cpu[name] = cpu[name][warmup:]  # the harness's warm-up runs come first
        where = "the whole process" if name in (_CLI, _CLI_STORE) else "process_time"
        print(figure.line())
        print(f"    CPU {_median_us(cpu[name])} per request ({where})")
    rate = {name: 1 / figure.median for name, figure in figures.items()}
    print(
        f"  rates: pride run {rate[_CLI]:,.0f} requests/s, with --store {rate[_CLI_STORE]:,.0f}/s;"
        f" in-process {rate[_FLOOR]:,.0f} turns/s, with a store {rate[_FLOOR_STORE]:,.0f}/s"
    )
    durable = rate[_CLI_STORE] / rate[_CLI]
    print(
        ratio_line(
            f"pride run --store / no store, {branches} branches", durable, ">= 0.7x", durable >= 0.7
        )
    )
    print(_info("pride run / in-process rate, no store", rate[_CLI] / rate[_FLOOR]))
    print(_info("pride run / in-process rate, store", rate[_CLI_STORE] / rate[_FLOOR_STORE]))
    print(_info("in-process: store / no store", rate[_FLOOR_STORE] / rate[_FLOOR]))
    for side, floor in ((_CLI, _FLOOR), (_CLI_STORE, _FLOOR_STORE)):
        if cpu[side] and cpu[floor]:
            added = statistics.median(cpu[side]) - statistics.median(cpu[floor])
            print(f"  CPU {side} adds per request over {floor}: {added * 1e6:6.0f} us")


def main(smoke: bool) -> None:
    trio.run(_main, smoke)
