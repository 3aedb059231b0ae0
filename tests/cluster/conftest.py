"""The cluster suite: one real local Ray cluster (``num_cpus=2``) for the whole test session.

``make unit`` runs this directory in a pytest process of its own, without
xdist (``ray.init`` takes seconds and an idle cluster holds ~450 MB; under
xdist each worker would start one). The cluster is
shut down when the session ends, and the hosts each test created are stopped
by its Cluster, so no Ray process outlives the run.

Most tests share one host process (``shared``) in one namespace, with branch
names of their own: a host process takes a second or two to start. Tests that
kill or break a host start their own.

Hosts start in Ray's default worker environment (``runtime_env={}``): the
workers of this local cluster run in the repository's root, where ``tests``
imports, and pride is installed in the environment. The Cluster's default, a
runtime environment setting ``PYTHONPATH`` per host, makes Ray prepare an
environment for every host process and rules out its prestarted workers
(measured here: 2.5-6 s to a first call on a new actor, against 0.6-0.75 s).
That default is exercised by ``test_cli.py`` and ``examples/cluster.py``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pride.cluster import Cluster

NAMESPACE = f"pride-tests-{uuid.uuid4().hex[:8]}"


def start_host_actor(actor_class: type, host: str, *args: Any, **options: Any) -> Any:
    """Start ``actor_class(*args)`` as the Ray actor a Cluster finds as host ``host``.

    Named and namespaced as pride's own hosts are, so ``cluster.spawn(...,
    host=host)`` and ``cluster.lookup`` reach it; ``options`` go to Ray's
    ``.options`` (``max_concurrency`` 100 unless given, Ray's default worker
    environment, as the tests' hosts). Blocking: call it through
    ``trio.to_thread``. Returns the actor's handle.
    """
    import ray

    from pride.cluster.caller.hosts import HOST_PREFIX

    actor = ray.remote(actor_class).options(
        name=HOST_PREFIX + host,
        namespace=NAMESPACE,
        num_cpus=0,
        **{"max_concurrency": 100, **options},
    )
    return actor.remote(*args)


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """ray.init once per test session; yields the hosts' storage directory."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield tmp_path_factory.mktemp("hosts")
    finally:
        ray.shutdown()


@pytest.fixture
async def cluster(ray_session: Path) -> AsyncIterator[Cluster]:
    """A Cluster attached to the session's Ray; the hosts it makes serve the whole session."""
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
    ) as attached:
        yield attached


@pytest.fixture
def ray_address(ray_session: Path) -> str:
    """The address other processes use to join the session's Ray cluster."""
    import ray

    return str(ray.get_runtime_context().gcs_address)


@pytest.fixture
def name() -> str:
    """A branch name no other test uses."""
    return f"b-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def liar(ray_session: Path, name: str) -> AsyncIterator[tuple[str, Any]]:
    """A lying host serving one branch (``name``); yields (host name, its handle)."""
    import ray
    import trio

    from .hostile import LyingHost

    host = f"liar-{name}"
    handle = await trio.to_thread.run_sync(start_host_actor, LyingHost, host, name)
    try:
        yield host, handle
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))


def host_answers(*batches: tuple[int, list[Any]]) -> bytes:
    """What a host's poll returns: each ``(seq, items)`` batch, numbered ``seq``."""
    from pride.cluster.wire.encoding import dumps

    return dumps([{"s": seq, "items": items} for seq, items in batches])
