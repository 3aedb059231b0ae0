"""Hosts' storage: private to this user, a Cluster's own by default, never shared by accident."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import uuid
from functools import partial
from pathlib import Path

import pytest
import trio

import pride
from pride import Call, ChatAndRecord, HostLost, StoreError, UnknownBranch
from pride.cluster import Cluster
from pride.cluster.host.placements import Placements
from pride.cluster.wire.storage import host_directory

from .conftest import NAMESPACE

WORKER = "tests.cluster.factories:worker"


def test_host_directories_are_made_private(tmp_path: Path) -> None:
    directory = host_directory(tmp_path, "ns", "h1")
    assert directory == tmp_path / "ns" / "h1"
    for path in (tmp_path / "ns", directory):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert host_directory(tmp_path, "ns", "h1") == directory  # existing and private: fine


def test_directories_others_may_write_to_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "ns" / "h1"
    shared.mkdir(parents=True)
    os.chmod(shared, 0o777)
    with pytest.raises(StoreError, match="writable by other users"):
        host_directory(tmp_path, "ns", "h1")
    os.chmod(tmp_path, 0o777)  # an open storage root, not sticky
    with pytest.raises(StoreError, match="writable by other users"):
        host_directory(tmp_path, "other", "h1")
    os.chmod(tmp_path, 0o1777)  # sticky, like /tmp: others cannot replace this user's entries
    assert host_directory(tmp_path, "other", "h1").is_dir()
    os.chmod(tmp_path, 0o700)


def test_a_symlinked_or_escaping_host_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "ns").mkdir(mode=0o700)
    (tmp_path / "ns" / "h1").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="not a directory"):
        host_directory(tmp_path, "ns", "h1")
    for bad in ("..", "a/b", ""):
        with pytest.raises(StoreError, match="cannot name a directory"):
            host_directory(tmp_path, "ns", bad)


@pytest.mark.parametrize(
    "content",
    [b"[" * 100_000 + b"]" * 100_000, b'[{"name": "a"', b"\xff\xfe", b'{"name": "a"}', b"[1]"],
    ids=["nested-too-deep", "cut-short", "not-utf-8", "not-a-list", "not-placements"],
)
def test_a_placements_file_that_cannot_be_read_is_a_store_error(
    tmp_path: Path, content: bytes
) -> None:
    """A file on disk is hostile, even in the host's own directory: one the host cannot
    read as placements (nested past the JSON reader's depth included, which raises
    RecursionError in the standard library) is a StoreError naming the file."""
    path = tmp_path / "placements.json"
    path.write_bytes(content)
    with pytest.raises(StoreError, match="placements"):
        Placements(path).load()


async def test_a_default_cluster_has_storage_of_its_own(ray_session: Path, name: str) -> None:
    """Two default Clusters never share files: the second restores nothing of the first,
    and a placement planted where the old shared default was is never read."""
    namespace = f"storage-{name}"
    host = "h"
    # What an attacker could plant in the once shared /tmp/pride-cluster.
    planted_dir = Path(tempfile.gettempdir()) / "pride-cluster" / namespace / host
    planted_dir.mkdir(parents=True, exist_ok=True)
    marker = Path(tempfile.gettempdir()) / f"pride-planted-{uuid.uuid4().hex}"
    placement = {"name": "planted", "factory": "tests.cluster.factories:planted"}
    (planted_dir / "placements.json").write_text(
        json.dumps([{**placement, "args": [str(marker)], "kwargs": {}}])
    )
    try:
        async with Cluster(namespace=namespace, runtime_env={}) as first:
            own = first.storage
            assert own is not None and stat.S_IMODE(own.stat().st_mode) == 0o700
            ref = await first.spawn(WORKER, name=name, host=host)
            assert await pride.ask(ref, ChatAndRecord("one")) == "echo: one"
            assert (own / namespace / host / "branches.db").exists()
        assert not own.exists()  # its hosts stopped: the directory went with them

        async with Cluster(namespace=namespace, runtime_env={}) as second:
            assert second.storage is not None and second.storage != own
            ref = await second.spawn(WORKER, name=name, host=host)
            assert await pride.ask(ref, Call("history")) == []  # nothing of the first's
            with pytest.raises(UnknownBranch):
                await second.lookup("planted")
        assert not marker.exists(), "a host ran a factory from a file it did not write"
    finally:
        (planted_dir / "placements.json").unlink()
        marker.unlink(missing_ok=True)


async def test_a_host_refuses_storage_others_may_write_to(ray_session: Path, name: str) -> None:
    """The host does not start on it, and the caller hears why at once (no restart loop)."""
    storage = ray_session / f"open-{name}"
    storage.mkdir()
    os.chmod(storage, 0o777)
    async with Cluster(namespace=f"open-{name}", storage=storage, runtime_env={}) as cluster:
        with pytest.raises(HostLost, match="writable by other users"):
            await cluster.spawn(WORKER, name=name, host="h")


async def test_placements_made_at_once_are_all_recorded(
    cluster: Cluster, ray_session: Path, name: str
) -> None:
    """Regression: each placement rewrote placements.json through one shared temporary
    file from its own worker thread, so placements made at the same moment raced: one
    failed with FileNotFoundError, or one was lost from the file (and so from the host's
    restart)."""
    host = f"many-{name}"
    names = [f"{name}-{n}" for n in range(12)]
    async with trio.open_nursery() as nursery:
        for branch in names:
            nursery.start_soon(partial(cluster.spawn, WORKER, name=branch, host=host))
    recorded = json.loads((ray_session / NAMESPACE / host / "placements.json").read_text())
    assert sorted(spec["name"] for spec in recorded) == sorted(names)
    for branch in names:  # each still served
        assert await pride.ask(cluster.ref(branch), Call("pid")) > 0
