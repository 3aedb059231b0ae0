"""Ids: unique across a fork, and default branch names that do not collide."""

from __future__ import annotations

import os

import pytest

from pride import Branch
from pride.messages import new_id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_ids_of_its_own() -> None:
    """The generator behind new_id is reseeded in a forked child: a child never repeats
    the ids its parent goes on to make (they would collide in a shared store)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: send its next ids and leave at once
        try:
            os.write(write, "".join(str(new_id()) for _ in range(4)).encode())
        finally:
            os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 4096):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    parent = "".join(str(new_id()) for _ in range(4))
    assert len(child) == len(parent)
    assert child.decode() != parent


def test_default_branch_names_carry_48_bits_of_the_id() -> None:
    """A default name carries enough of the id that thousands of unnamed branches in one
    session are not refused for a clash: 8 hex digits (32 bits) clashed about 1% of the
    time at 10,000 members; 12 (48 bits) make a clash at a million about 0.2%."""
    branches = [Branch() for _ in range(200)]
    for branch in branches:
        assert branch.name == f"branch-{branch.id.hex[:12]}"
    assert len({branch.name for branch in branches}) == len(branches)
