"""Shared test configuration."""

from __future__ import annotations

import pytest
from hypothesis import settings

from tests import chromium

# Property tests run on every `make test`: keep them bounded and deterministic.
settings.register_profile("pride", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("pride")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say plainly, at the end of the run, which browser tests did not run and why.

    Counted from the skip reports' reasons, which reach the controller under
    xdist as well.
    """
    skipped = [
        report
        for report in terminalreporter.stats.get("skipped", [])
        if isinstance(report.longrepr, tuple) and chromium.INSTALL in str(report.longrepr[2])
    ]
    if skipped:
        terminalreporter.write_line(
            f"NOTE: {len(skipped)} browser test(s) did not run: {chromium.INSTALL}. "
            f"CI installs it (.ci/run) and sets {chromium.REQUIRED}, where they must pass.",
            yellow=True,
            bold=True,
        )
