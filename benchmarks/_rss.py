"""Resident memory of this process, for the memory benchmarks."""

from __future__ import annotations

import gc
import os

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Current resident set size, after a full garbage collection."""
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE
