"""The clock of the virtual-branch tests."""

from __future__ import annotations

import pytest
import trio.testing


@pytest.fixture
def idle_clock(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    """Virtual time that jumps once every task has waited 20 ms of real time.

    Idle timeouts of minutes pass at once, but not during the store's worker
    threads (a commit takes milliseconds): with a threshold of 0 the clock
    would jump on every thread hand-off, and a one-turn test would see hours
    go by while its branch is busy (which pride must handle, and does: busy
    is never idle, but it makes the test's own timings meaningless).
    """
    mock_clock.autojump_threshold = 0.02
    return mock_clock
