"""Issue 36, items 14-19, on a real local Ray cluster: what the cluster's boundary let
through, each case now answered truthfully, bounded, and leaving the connection serving.
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

import pride
from pride import Call, Chat, ChatAndRecord, HostLost, InvalidMessage, ReAct
from pride.cluster import Cluster
from pride.cluster._wire import MAX_MESSAGE_BYTES, dumps, loads
from pride.messages import unstructure

from .conftest import NAMESPACE, start_host_actor
from .factories import EFFECTS_ANSWER

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"
EFFECTS = "tests.cluster.factories:effects"
SLEEPY = "tests.cluster.factories:sleepy"


def _host_handle(host: str) -> Any:
    import ray

    return ray.get_actor(f"pride-host:{host}", namespace=NAMESPACE)


def _kill(host: str) -> None:
    import ray

    ray.kill(_host_handle(host), no_restart=False)  # Ray restarts it (max_restarts)


async def _until(check: Any, seconds: float = 30.0) -> None:
    """Wait until ``check()`` holds: for a condition in another process, which no event
    of this one reports (bounded)."""
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.01)


# ------------------------------------------------------------------ 16


async def test_concurrent_identical_spawns_get_the_one_branch(
    cluster: Cluster, ray_session: Path, name: str
) -> None:
    """Issue 36 item 16: two processes placing the same name with the same placement at
    once both get the one branch; with different placements, one gets a clear error."""
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
    ) as other:
        refs: dict[int, Any] = {}

        async def spawn(key: int, where: Cluster, factory: str, branch: str) -> None:
            try:
                refs[key] = await where.spawn(factory, name=branch, host="shared")
            except Exception as exc:
                refs[key] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(spawn, 0, cluster, WORKER, name)
            nursery.start_soon(spawn, 1, other, WORKER, name)
        assert refs[0].id == refs[1].id
        assert await pride.ask(refs[1], Chat("one")) == "echo: one"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spawn, 2, cluster, WORKER, f"{name}-b")
            nursery.start_soon(spawn, 3, other, ECHO, f"{name}-b")
        outcomes = sorted(type(refs[key]).__name__ for key in (2, 3))
        assert outcomes == ["RemoteBranchRef", "ValueError"]
        refused = next(refs[key] for key in (2, 3) if isinstance(refs[key], ValueError))
        assert "already serves a branch named" in str(refused)


# ------------------------------------------------------------------ 17


async def test_a_blocking_factory_does_not_freeze_its_host_and_spawn_is_bounded(
    ray_session: Path, tmp_path: Path, name: str
) -> None:
    """Issue 36 item 17: while a factory blocks its thread, the host serves its other
    branches; past the cluster's ``spawn_timeout`` the spawn fails, naming the factory."""
    host = f"slow-{name}"
    marker = tmp_path / "started"
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, runtime_env={}, spawn_timeout=1.5
    ) as cluster:
        ref = await cluster.spawn(ECHO, name=name, host=host)
        outcome: list[BaseException] = []

        async def spawn() -> None:
            try:
                await cluster.spawn(SLEEPY, str(marker), 4.0, name=f"{name}-slow", host=host)
            except Exception as exc:
                outcome.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(spawn)
            await _until(marker.exists)
            for n in range(3):  # answered while the factory blocks
                assert await pride.ask(ref, Chat(f"{n}"), timeout=1.0) == f"echo: {n}"
        [timed_out] = outcome
        assert isinstance(timed_out, TimeoutError)
        assert SLEEPY in str(timed_out) and "1.5" in str(timed_out)
        assert await pride.ask(ref, Chat("after"), timeout=1.0) == "echo: after"
