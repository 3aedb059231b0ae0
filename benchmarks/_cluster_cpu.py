"""CPU time per process and per thread of a cluster benchmark: where a message's cost goes.

Two cores carry a target rate only if every process together spends at most
``2 / rate`` seconds of CPU per message, so the cluster benchmark splits what
it measured by where it was spent: the host's trio thread, its Ray glue
thread (the asyncio loop), its other threads (Ray's own), the calling
process (its trio thread apart) and Ray's own processes (the raylet, the GCS,
the other workers: every process this one started, the host excepted).

Per-thread figures read ``/proc/<pid>/task/<tid>/stat`` (Linux; elsewhere the
host shows as one row); per-process ones use psutil.
"""

from __future__ import annotations

import os
import time
from typing import Any

import attrs


def _thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` so far (empty where /proc is missing)."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads: dict[int, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        threads[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return threads


def _process_cpu(process: Any) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@attrs.frozen
class CpuSnapshot:
    """CPU seconds so far, per place (see the module docstring)."""

    host_threads: dict[int, float]
    host: float
    caller: float
    caller_trio: float
    ray: dict[int, float]

    @classmethod
    def take(cls, host_pid: int) -> CpuSnapshot:
        """Now; call it from the caller's trio thread (its own CPU is read then)."""
        import psutil

        me = psutil.Process()
        ray: dict[int, float] = {}
        for child in me.children(recursive=True):
            if child.pid == host_pid:
                continue
            try:
                ray[child.pid] = _process_cpu(child)
            except psutil.Error:
                continue
        return cls(
            host_threads=_thread_cpu(host_pid),
            host=_process_cpu(psutil.Process(host_pid)),
            caller=_process_cpu(me),
            caller_trio=time.thread_time(),
            ray=ray,
        )


def cpu_rows(
    before: CpuSnapshot, after: CpuSnapshot, thread_names: dict[str, int], messages: int
) -> list[tuple[str, float]]:
    """Microseconds of CPU per message, per place, from two snapshots around a run."""
    names = {tid: name for name, tid in thread_names.items()}
    trio_thread = glue = 0.0
    for tid, seconds in after.host_threads.items():
        name = names.get(tid, "")
        if name.startswith("pride host"):
            trio_thread += seconds - before.host_threads.get(tid, 0.0)
        elif name.startswith("AsyncIO Thread"):
            glue += seconds - before.host_threads.get(tid, 0.0)
    host = after.host - before.host
    caller = after.caller - before.caller
    caller_trio = after.caller_trio - before.caller_trio
    ray = sum(seconds - before.ray.get(pid, 0.0) for pid, seconds in after.ray.items())
    per = 1e6 / messages
    rows = []
    if after.host_threads:
        rows += [
            ("host: its trio thread", trio_thread * per),
            ("host: its Ray glue thread (asyncio)", glue * per),
            ("host: its other threads (Ray's)", (host - trio_thread - glue) * per),
        ]
    else:
        rows.append(("host: the whole process", host * per))
    rows += [
        ("caller: its trio thread", caller_trio * per),
        ("caller: its other threads (Ray's)", (caller - caller_trio) * per),
        ("Ray's own processes (raylet, GCS, workers)", ray * per),
        ("all of them", (host + caller + ray) * per),
    ]
    return rows
