"""Every module in pride/ stays small enough to read in one sitting (issue 15).

One idea per module: a module past the limit has grown a second idea, and the
fix is to split it along that seam (a private module behind the package face),
not to raise the limit. Two classes are each written in one place, every
method in the class body with its real signature and contract (the API
reference shows them as written): Branch and Session get the room that takes,
and say so at their top.
"""

from __future__ import annotations

from pathlib import Path

import pride

ROOT = Path(pride.__file__).parent

LIMIT = 500
# About: a module may run a few lines past the limit while it waits for its split.
SLACK = 10
LIMITS = {Path("actors/branch.py"): 1950, Path("supervisors/session.py"): 1100}


def test_every_module_is_within_the_size_rule() -> None:
    oversized = []
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > LIMITS.get(relative, LIMIT) + SLACK:
            oversized.append(f"{relative}: {lines} lines (limit {LIMITS.get(relative, LIMIT)})")
    assert not oversized, "split these along a real seam: " + "; ".join(oversized)
