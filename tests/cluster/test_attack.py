"""An attacker's pass over the cluster's boundary: what a caller sees when a host's
answer is hostile, when a value nests past what the wire carries, and when the Cluster
closes under calls still waiting. Each case ends answered, typed, and bounded in time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pride
from pride import Call, Chat, HostLost, InvalidMessage
from pride.cluster import Cluster
from pride.cluster.caller.driver import wait_ref
from pride.cluster.wire.encoding import dumps, loads

from .conftest import NAMESPACE, host_answers, start_host_actor
from .hostile import DroppingPoll, FailingPoll, GarbledHello, MuteHost
from .stale import StaleHost

WORKER = "tests.cluster.factories:worker"
ECHO = "tests.cluster.factories:echo"
DEEP = 600
"""Lists nested this deeply parse (msgspec takes ~1,000 levels) but are past the wire's limit."""


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


async def _until(check: Any, seconds: float = 30.0) -> None:
    """Wait until ``check()`` holds, for a condition another thread brings (bounded)."""
    with trio.fail_after(seconds):
        while not check():
            await trio.sleep(0.01)


async def test_a_result_nested_past_the_wire_limit_fails_its_call_and_the_host_serves_on(
    cluster: Cluster, name: str
) -> None:
    """A remote operation returning lists nested 600 deep (a model's JSON, parsed, say):
    the host's encoder ran out of stack, the outcome was never posted, and the ask waited
    forever. Now it fails with InvalidMessage naming the depth, and the branch serves on."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    with trio.fail_after(30):
        with pytest.raises(InvalidMessage, match="nested deeper than"):
            await pride.ask(ref, Call("nested", depth=DEEP))
        assert await pride.ask(ref, Call("nested", depth=3)) == _deep(3)


async def test_a_lying_hosts_deeply_nested_answer_fails_its_envelope_not_the_connection(
    cluster: Cluster, liar: tuple[str, Any], name: str
) -> None:
    """A host answering an ask with a value nested 600 deep: the caller's decoder ran out
    of stack mid-batch, the batch's number was never passed, and every later answer of
    the connection was held: the ask and the next one waited forever. Now the first
    fails with InvalidMessage and the next is answered."""
    host, handle = liar
    ref = cluster.ref(name, host=host)
    outcome: list[Any] = []

    async def ask(text: str) -> None:
        try:
            outcome.append(await pride.ask(ref, Chat(text)))
        except Exception as exc:
            outcome.append(exc)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "first")
            [first] = [i for i in await wait_ref(handle.sent.remote(1)) if i["k"] == "send"]
            deep = {"k": "done", "id": first["id"], "value": _deep(DEEP)}
            await wait_ref(handle.answer.remote(host_answers((0, [deep]))))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "second")
            sends = [i for i in await wait_ref(handle.sent.remote(2)) if i["k"] == "send"]
            done = {"k": "done", "id": sends[1]["id"], "value": "answered"}
            await wait_ref(handle.answer.remote(host_answers((1, [done]))))
    assert isinstance(outcome[0], InvalidMessage), outcome
    assert "nested deeper than" in str(outcome[0])
    assert outcome[1] == "answered"


async def test_a_refusal_whose_error_cannot_be_rebuilt_still_answers_its_envelopes(
    cluster: Cluster, liar: tuple[str, Any], name: str
) -> None:
    """A host refusing a batch whole with an encoded pride error whose fields cannot be
    set (``args`` a number): rebuilding the error raised TypeError in the caller's
    completion callback, so the batch's envelopes were never answered and the ask waited
    forever. Now the error is rebuilt without that field, the envelope fails with
    InvalidMessage, and the connection serves on."""
    host, handle = liar
    error = {"type": "TurnCancelled", "kind": "pride", "message": "no", "fields": {"args": 5}}
    await wait_ref(handle.refuse_next.remote(dumps({"error": error})))
    ref = cluster.ref(name, host=host)
    with trio.fail_after(30):
        with pytest.raises(InvalidMessage, match="refused by the host"):
            await pride.ask(ref, Chat("refused"))
        answer: list[Any] = []

        async def ask() -> None:
            answer.append(await pride.ask(ref, Chat("again")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            sends = [i for i in await wait_ref(handle.sent.remote(2)) if i["k"] == "send"]
            done = {"k": "done", "id": sends[1]["id"], "value": "served"}
            await wait_ref(handle.answer.remote(host_answers((0, [done]))))
    assert answer == ["served"]


async def test_closing_the_cluster_answers_a_send_waiting_for_its_host_to_come_up(
    ray_session: Path, name: str
) -> None:
    """A send waiting for a host that is still starting (its ``hello`` unanswered) when
    the Cluster closes: the link was closed without waking it, so the send waited
    forever. Now it fails with HostLost as the Cluster closes."""
    import ray

    host = f"mute-{name}"
    handle = await trio.to_thread.run_sync(start_host_actor, MuteHost, host)
    outcome: list[BaseException] = []
    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                async with Cluster(
                    namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
                ) as cluster:

                    async def ask() -> None:
                        try:
                            await pride.ask(cluster.ref(name, host=host), Chat("hi"))
                        except Exception as exc:
                            outcome.append(exc)

                    nursery.start_soon(ask)
                    await _until(lambda: host in cluster.hosts)
                    await trio.testing.wait_all_tasks_blocked()
                    assert not outcome
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))
    assert len(outcome) == 1 and isinstance(outcome[0], HostLost), outcome


async def test_a_closed_cluster_refuses_sends_typed_and_never_hangs(
    ray_session: Path, name: str
) -> None:
    """A ref of a closed Cluster, to a host it never connected to: the first send raised
    RuntimeError (a closed nursery) and left a link that never connects, so the next send
    waited forever. Now each send raises HostLost (the Cluster is closed), as a send to a
    host it had connected to does, and a spawn too."""
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
    ) as placing:
        await placing.spawn(ECHO, name=name, host="shared")
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
    ) as cluster:
        pass
    with trio.fail_after(30):
        for _ in range(2):
            with pytest.raises(HostLost, match="Cluster is closed"):
                await pride.ask(cluster.ref(name), Chat("after"))
        with pytest.raises(HostLost, match="Cluster is closed"):
            await cluster.spawn(ECHO, name=f"{name}-late", host="shared")


@pytest.mark.parametrize("liar_class", [GarbledHello, FailingPoll, DroppingPoll])
async def test_a_host_that_cannot_be_talked_to_fails_its_sends_and_not_the_cluster(
    ray_session: Path, name: str, liar_class: type
) -> None:
    """A host whose ``hello`` is not JSON, or whose ``poll`` raises: the error escaped the
    link's task into the Cluster's nursery, which cancelled the block using it and left
    it with that error. A poll answered with an error (the connection dropped there) was
    logged as unreadable and polled again at once: the send waited out its timeout. Now
    the send fails with HostLost, the Cluster serves its other hosts, and leaving it
    raises nothing."""
    import ray

    host = f"broken-{name}"
    handle = await trio.to_thread.run_sync(start_host_actor, liar_class, host, name)
    try:
        with trio.fail_after(60):
            async with Cluster(
                namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
            ) as cluster:
                honest = await cluster.spawn(ECHO, name=f"{name}-honest", host="shared")
                with pytest.raises(HostLost):
                    await pride.ask(cluster.ref(name, host=host), Chat("hi"), timeout=30)
                assert await pride.ask(honest, Chat("still")) == "echo: still"
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))


async def test_a_dead_watchers_answers_do_not_pile_up_on_its_host(
    cluster: Cluster, ray_session: Path, name: str
) -> None:
    """A caller that asked for the signals and died without ``forget`` (killed, say):
    its host queued every signal of every branch for it, for good (2 answers an ask
    here, growing with the conversation). Now a connection owed answers that makes no
    call for ``stale_after`` is dropped, its next call told HostLost, while a live
    caller's connection (a poll always waiting) serves on throughout."""
    import ray

    host = f"stale-{name}"
    options = {"namespace": NAMESPACE}
    handle = await trio.to_thread.run_sync(
        lambda: start_host_actor(
            StaleHost, host, host, str(ray_session), options, max_concurrency=1000
        )
    )
    try:
        ref = await cluster.spawn(ECHO, name=name, host=host)
        watch = {"conn": "dead", "seq": 0, "items": [{"k": "watch", "on": True}]}
        await wait_ref(handle.deliver.remote(dumps(watch)))
        assert await pride.ask(ref, Chat("one")) == "echo: one"
        assert await wait_ref(handle.owed.remote("dead"))
        with trio.fail_after(60):  # `stale_after` (3 s) of asks, each posting to "dead"
            while await wait_ref(handle.owed.remote("dead")) is not None:
                assert await pride.ask(ref, Chat("more")) == "echo: more"
        for _ in range(20):
            assert await pride.ask(ref, Chat("after")) == "echo: after"
        assert await wait_ref(handle.owed.remote("dead")) is None
        told = loads(await wait_ref(handle.poll.remote("dead")), "poll")
        assert told["error"]["type"] == "HostLost", told
    finally:
        await trio.to_thread.run_sync(lambda: ray.kill(handle, no_restart=True))


async def test_closing_the_cluster_answers_every_call_in_flight(
    ray_session: Path, name: str
) -> None:
    """Asks, a stream and a send in flight on a host that serves when the Cluster closes:
    each caller is answered with HostLost, no task is left, and leaving the block raises
    nothing (no ExceptionGroup)."""
    outcomes: list[BaseException | None] = []

    async def caller(call: Any) -> None:
        try:
            await call()
        except Exception as exc:
            outcomes.append(exc)
        else:
            outcomes.append(None)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            async with Cluster(
                namespace=NAMESPACE, storage=ray_session, stop_hosts=False, runtime_env={}
            ) as cluster:
                ref = await cluster.spawn(WORKER, name=name, host="shared", mailbox_size=4)
                started = trio.Event()
                cluster.observe(
                    lambda s: s.branch_name == name and type(s).__name__ == "RunStart",
                    handler=lambda _: started.set(),
                )

                async def streamed() -> None:
                    async with pride.stream(ref, Call("block")) as items:
                        async for _ in items:
                            pass

                nursery.start_soon(caller, lambda: pride.ask(ref, Call("block")))
                await started.wait()  # the first turn runs on the host
                nursery.start_soon(caller, streamed)
                nursery.start_soon(caller, lambda: pride.ask(ref, Call("block")))
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(caller, lambda: pride.send(ref, Call("block")))
                await trio.testing.wait_all_tasks_blocked()
        # Leaving it closed the connection: each caller is answered.
    assert len(outcomes) == 4, outcomes
    lost = [o for o in outcomes if o is not None]
    assert all(isinstance(o, HostLost) for o in lost), outcomes
    assert len(lost) >= 3, outcomes  # the send may have returned once queued


async def test_a_host_created_as_the_cluster_closes_is_stopped_not_left_running(
    ray_session: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spawn that is creating its host (in a worker thread) when the Cluster closes:
    the close stopped the hosts it knew of, the spawn then made its host, found the
    Cluster closed and raised HostLost, and the new host ran on, holding its CPUs,
    until the process left Ray. Now the spawn stops the host it made before it raises."""
    import threading

    import ray

    from pride.cluster.caller import directory as directory_module

    host = f"late-{name}"
    entered, release = threading.Event(), threading.Event()
    created: list[Any] = []
    real_find, real_create = directory_module.find_host, directory_module.create_host
    real_close = directory_module.Directory.close

    def find_host(namespace: str, wanted: str) -> Any:
        if wanted == host:  # hold the creation until the Cluster has begun to close
            entered.set()
            release.wait(30)
        return real_find(namespace, wanted)

    def create_host(wanted: str, **options: Any) -> Any:
        handle = real_create(wanted, **options)
        created.append(handle)
        return handle

    def close(self: Any) -> None:
        real_close(self)
        release.set()

    monkeypatch.setattr(directory_module, "find_host", find_host)
    monkeypatch.setattr(directory_module, "create_host", create_host)
    monkeypatch.setattr(directory_module.Directory, "close", close)
    outcome: list[BaseException] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            async with Cluster(
                namespace=NAMESPACE, storage=ray_session, stop_hosts=True, runtime_env={}
            ) as cluster:

                async def place() -> None:
                    try:
                        await cluster.spawn(ECHO, name=name, host=host)
                    except Exception as exc:
                        outcome.append(exc)

                nursery.start_soon(place)
                await trio.to_thread.run_sync(entered.wait, 30)
    assert len(outcome) == 1 and isinstance(outcome[0], HostLost), outcome
    assert len(created) == 1
    with trio.fail_after(60), pytest.raises(ray.exceptions.RayActorError):
        await wait_ref(created[0].hello.remote())
