"""A stdio server's processes beyond its process group, found to be ended with it.

A server runs in a session and process group of its own, and its end signals
the group: that ends everything it starts, unless a child leaves the group.
One that calls ``setpgid`` stays in the server's session; one that calls
``setsid`` (a daemon) leaves the session too, and is then found only through
its parent, while its parent, the server or one of its children, still runs.
So `family` reads ``/proc`` (Linux; elsewhere it finds nothing) for the
processes in the server's session or descending from it, each with its start
time, and `end_family` kills those still running that are the same processes
(a pid reused by another process has another start time).

What is not promised: a daemon whose parent exited before the server's end
was handed to init and is no longer anyone's descendant; only a service
manager's cgroup (systemd's ``KillMode=control-group``) holds such a process.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["end_family", "family"]

_MAX_ANCESTRY = 64  # parents followed upwards from each process


def _stat(pid: int) -> tuple[int, int, bytes] | None:
    """``(parent pid, session id, start time)`` of ``pid``, or None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read()
    except OSError:
        return None
    # The command name is in parentheses and may hold anything: fields follow the last ")".
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[3]), fields[19]
    except (IndexError, ValueError):
        return None


def family(root: int) -> dict[int, bytes]:
    """The processes in the session ``root`` leads or descending from ``root``: pid -> start.

    Blocking (it reads ``/proc``): run it in a worker thread.
    """
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    stats: dict[int, tuple[int, int, bytes]] = {}
    for entry in entries:
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            stats[int(entry)] = stat
    found: dict[int, bytes] = {}
    for pid, (first_parent, session, start) in stats.items():
        if pid == root:
            continue
        if session == root:
            found[pid] = start
            continue
        parent = first_parent
        for _ in range(_MAX_ANCESTRY):
            if parent == root:
                found[pid] = start
                break
            if parent <= 1 or parent not in stats:
                break
            parent = stats[parent][0]
    return found


def end_family(processes: dict[int, bytes]) -> int:
    """SIGKILL each of ``processes`` still running as the same process; how many were.

    Blocking (it reads ``/proc``): run it in a worker thread.
    """
    ended = 0
    for pid, start in processes.items():
        stat = _stat(pid)
        if stat is None or stat[2] != start:
            continue  # gone, or the pid is another process's now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            ended += 1
    return ended
