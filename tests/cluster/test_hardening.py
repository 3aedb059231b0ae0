"""Issue 36, items 14-19, on a real local Ray cluster: what the cluster's boundary let
through, each case now answered truthfully, bounded, and leaving the connection serving.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Call, Chat, ChatAndRecord, InvalidMessage, ReAct
from pride.cluster import Cluster
from pride.cluster.wire.encoding import dumps, loads
from pride.messages import unstructure
from pride.store import BranchStore

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


# ------------------------------------------------------------------ 14


async def test_a_turn_its_caller_was_told_is_lost_never_runs_again(
    ray_session: Path, name: str, tmp_path: Path
) -> None:
    """Issue 36 item 14: a host killed mid-turn answers its caller HostLost, and the
    restarted host abandons that turn instead of resuming it. The caller sends again,
    as the docs say, and the work runs once more, whole: the instruction is recorded
    once, and the effects are the interrupted turn's and the new turn's, none resumed."""
    host = f"victim-{name}"
    log = tmp_path / "effects.log"

    def effects() -> list[str]:
        return log.read_text().split() if log.exists() else []

    async with Cluster(namespace=NAMESPACE, storage=ray_session, runtime_env={}) as cluster:
        ref = await cluster.spawn(EFFECTS, str(log), name=name, host=host)
        lost: list[BaseException] = []

        async def interrupted() -> None:
            try:
                await pride.ask(ref, ReAct("do the three effects"))
            except pride.HostLost as exc:
                lost.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(interrupted)
            await _until(lambda: sorted(effects()) == ["1", "2", "3"])  # 2 hangs on the host
            await trio.to_thread.run_sync(_kill, host)
        assert lost, "the caller of the killed turn got no HostLost"

        with trio.fail_after(60):
            answer = await pride.ask(ref, ReAct("do the three effects"))
        assert answer == EFFECTS_ANSWER
        # The restarted host is serving: anything it would resume has been queued
        # before this ask, so it has run by the time this is answered.
        await pride.ask(ref, Call("pid"))
    # The turn's calls run concurrently: the interrupted turn's three, then the new turn's.
    assert sorted(effects()[:3]) == sorted(effects()[3:]) == ["1", "2", "3"]

    async with BranchStore(ray_session / NAMESPACE / host / "branches.db") as store:
        stored = await store.load_messages(name)
    asked = [m for m in stored if getattr(m, "instruction", None) == "do the three effects"]
    assert len(asked) == 1, [type(m).__name__ for m in stored]


# ------------------------------------------------------------------ 15


def _served_after(host: str, branch: str) -> None:
    """Block this thread until ``branch`` on ``host`` has served what was queued before
    now: an envelope of a connection of its own, answered in mailbox order."""
    import ray

    handle = _host_handle(host)
    conn = uuid.uuid4().hex
    item = {
        "k": "send",
        "id": uuid.uuid4().hex,
        "b": branch,
        "mode": "ask",
        "cmd": unstructure(Call("pid")),
    }
    delivered = ray.get(handle.deliver.remote(dumps({"conn": conn, "seq": 0, "items": [item]})))
    batches = loads(delivered, "delivery")["out"] if delivered is not None else []
    while not any(i["k"] == "done" for batch in batches for i in batch["items"]):
        batches = loads(ray.get(handle.poll.remote(conn)), "poll")
    handle.forget.remote(conn)


async def test_a_remote_cancel_is_answered_with_the_truth(cluster: Cluster, name: str) -> None:
    """Issue 36 item 15: a reply cancelled while its caller still believes it queued
    (the host has in fact run it) gets the turn's real outcome, not "dropped before
    it started" for a turn that is recorded."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    assert await pride.ask(ref, Chat("warm")) == "echo: warm"
    reply = await pride.send(ref, ChatAndRecord("ran"))
    # This thread holds the loop: the host's answer cannot be applied before the cancel.
    _served_after("shared", name)
    reply.cancel()
    assert await reply.result() == "echo: ran"
    assert len(await pride.ask(ref, Call("history"))) == 2  # recorded: it did run


async def test_a_remote_cancel_still_drops_what_is_queued_and_cancels_what_runs(
    cluster: Cluster, name: str
) -> None:
    """The same cancel, for a turn running on the host and for one queued behind it."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    running = trio.Event()
    cluster.observe(
        lambda s: isinstance(s, pride.RunStart) and s.branch_name == name,
        handler=lambda s: running.set(),
    )
    blocked = await pride.send(ref, Call("block"))
    queued = await pride.send(ref, ChatAndRecord("never"))
    await running.wait()
    queued.cancel()
    blocked.cancel()
    with pytest.raises(pride.TurnCancelled, match="dropped before it started"):
        await queued.result()
    with pytest.raises(pride.TurnCancelled) as cancelled:
        await blocked.result()
    assert "dropped" not in str(cancelled.value)
    assert await pride.ask(ref, Call("history")) == []


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
    cluster: Cluster, ray_session: Path, tmp_path: Path, name: str
) -> None:
    """Issue 36 item 17: while a factory blocks its thread, the host serves its other
    branches; past the cluster's ``spawn_timeout`` the spawn fails, naming the factory."""
    marker = tmp_path / "started"
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    outcome: list[BaseException] = []
    async with Cluster(
        namespace=NAMESPACE,
        storage=ray_session,
        stop_hosts=False,
        runtime_env={},
        spawn_timeout=1.5,
    ) as bounded:

        async def spawn() -> None:
            try:
                await bounded.spawn(SLEEPY, str(marker), 4.0, name=f"{name}-slow", host="shared")
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


# ------------------------------------------------------------------ 18


@pytest.fixture(scope="module")
def small_host(ray_session: Path) -> Iterator[str]:
    """A host (its name) that takes and returns at most 1 MiB a call, for this module."""
    import ray

    from .small import SmallHost

    host = f"small-{uuid.uuid4().hex[:8]}"
    options = {"namespace": NAMESPACE}
    handle = start_host_actor(
        SmallHost,
        host,
        host,
        str(ray_session),
        options,
        max_concurrency=1000,
        max_task_retries=0,
    )
    try:
        yield host
    finally:
        ray.kill(handle, no_restart=True)


@pytest.fixture
def small(small_host: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`small_host`, with this caller's limits lowered to its own: the limits'
    properties, shown with small sizes."""
    from pride.cluster.caller import link as _link
    from pride.cluster.wire import encoding as _wire

    from .small import SmallHost

    monkeypatch.setattr(_wire, "MAX_MESSAGE_BYTES", SmallHost.max_message_bytes)
    monkeypatch.setattr(_link, "MAX_BATCH_BYTES", SmallHost.max_message_bytes - 256)
    return small_host


async def test_a_result_over_the_message_limit_fails_its_call_and_the_connection_serves_on(
    cluster: Cluster, small: str, name: str
) -> None:
    """Issue 36 item 18: a result larger than one return may carry is refused in its
    place (InvalidMessage for that call); answers that fit only together leave in
    several returns; later calls on the connection work."""
    ref = await cluster.spawn(WORKER, name=name, host=small)
    with trio.fail_after(30), pytest.raises(InvalidMessage, match="byte limit"):
        await pride.ask(ref, Call("big", size=2 * 1024 * 1024))
    sizes: list[int] = []

    async def ask() -> None:
        sizes.append(len(await pride.ask(ref, Call("big", size=300_000))))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(8):  # 2.4 MB of results, one mailbox: returns are cut
                nursery.start_soon(ask)
        assert await pride.ask(ref, Chat("after")) == "echo: after"
    assert sizes == [300_000] * 8


# ------------------------------------------------------------------ 19


async def test_a_command_over_the_message_limit_fails_alone_and_the_connection_serves_on(
    cluster: Cluster, name: str
) -> None:
    """Issue 36 item 19, at the default limit (64 MiB): a 70 MB command fails alone
    with InvalidMessage, never sent, and later calls on the connection work."""
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    with trio.fail_after(60), pytest.raises(InvalidMessage, match="byte limit"):
        await pride.ask(ref, Chat("x" * 70_000_000))
    with trio.fail_after(10):
        assert await pride.ask(ref, Chat("after")) == "echo: after"


async def test_concurrent_commands_over_the_limit_together_are_batched_within_it(
    cluster: Cluster, small: str, name: str
) -> None:
    """Issue 36 item 19: twelve concurrent commands that exceed the limit together
    (here 12 x 300 KB against 1 MiB) leave in batches within it and are all answered;
    one command over the limit alone fails with InvalidMessage."""
    ref = await cluster.spawn(ECHO, name=name, host=small)
    with pytest.raises(InvalidMessage, match="byte limit of a send"):
        await pride.ask(ref, Chat("x" * 2_000_000))
    big = "y" * 300_000
    answers: list[Any] = []

    async def ask() -> None:
        answers.append(await pride.ask(ref, Chat(big)))

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(12):
                nursery.start_soon(ask)
        assert await pride.ask(ref, Chat("after")) == "echo: after"
    assert answers == [f"echo: {big}"] * 12


async def test_a_batch_its_host_refuses_leaves_no_gap_in_the_numbering(
    cluster: Cluster, small: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36 item 19: a host that refuses a batch (here one whose limit, 1 MiB, is
    below its caller's) fails the envelopes it carried, and the caller fills the
    number it spent, so the connection's later batches are taken, not held for good."""
    from pride.cluster.caller import link as _link

    monkeypatch.setattr(_link, "MAX_BATCH_BYTES", 8 * 1024 * 1024)
    ref = await cluster.spawn(ECHO, name=name, host=small)
    with trio.fail_after(30), pytest.raises(InvalidMessage, match="refused by the host"):
        await pride.ask(ref, Chat("z" * 2_000_000))
    with trio.fail_after(10):
        assert await pride.ask(ref, Chat("after")) == "echo: after"
