"""Hosts dying, restarting and being lied to, on a real local Ray cluster."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

import pride
from pride import Call, Chat, ChatAndRecord, EnvelopeReplayed, HostLost, RunStart, Signal
from pride.cluster import Cluster
from pride.cluster.caller.driver import wait_ref
from pride.cluster.wire.encoding import decode_error, dumps, loads
from pride.messages import unstructure
from pride.store import BranchStore

from .conftest import NAMESPACE

WORKER = "tests.cluster.factories:worker"


def _host_handle(host: str) -> Any:
    import ray

    return ray.get_actor(f"pride-host:{host}", namespace=NAMESPACE)


def _kill(host: str) -> None:
    import ray

    ray.kill(_host_handle(host), no_restart=False)  # Ray restarts it (max_restarts)


async def _answers(handle: Any, conn: str, delivered: Any, count: int) -> list[dict[str, Any]]:
    """The host's final answers (done, refused) to ``conn``: those its delivery brought
    back, then polled ones, until there are ``count``."""
    batches = loads(delivered, "delivery")["out"] if delivered is not None else []
    items = [item for batch in batches for item in batch["items"]]
    while len([i for i in items if i["k"] in ("done", "refused")]) < count:
        polled = loads(await wait_ref(handle.poll.remote(conn)), "poll")
        items += [item for batch in polled for item in batch["items"]]
    return [item for item in items if item["k"] in ("done", "refused")]


async def test_host_killed_mid_turn_then_restarted_from_its_store(
    ray_session: Path, name: str
) -> None:
    """The caller hears HostLost within 1 s; the restarted host continues from the store."""
    host = f"victim-{name}"
    starts: list[RunStart] = []
    third_call = trio.Event()

    def started(signal: Signal) -> None:
        if isinstance(signal, RunStart) and signal.command == "Call":
            starts.append(signal)
            if len(starts) == 3:
                third_call.set()

    async with Cluster(namespace=NAMESPACE, storage=ray_session, runtime_env={}) as cluster:
        cluster.observe(lambda s: s.branch_name == name, handler=started)
        ref = await cluster.spawn(WORKER, name=name, host=host)
        assert await pride.ask(ref, ChatAndRecord("one")) == "echo: one"
        pid = await pride.ask(ref, Call("pid"))
        before = await pride.ask(ref, Call("history"))
        lost: list[tuple[float, BaseException]] = []

        async def blocked() -> None:
            try:
                await pride.ask(ref, Call("block"))
            except HostLost as exc:
                lost.append((trio.current_time(), exc))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked)
            await third_call.wait()  # the block turn is running on the host
            killed_at = trio.current_time()
            await trio.to_thread.run_sync(_kill, host)
        assert lost, "the caller of the killed turn got no HostLost"
        assert lost[0][0] - killed_at < 1.0
        assert isinstance(lost[0][1], pride.BranchClosed)
        assert lost[0][1].host == host

        # Sends wait for the restarted host; the conversation comes back from its store.
        assert await pride.ask(ref, ChatAndRecord("two")) == "echo: two"
        assert await pride.ask(ref, Call("pid")) != pid
        after = await pride.ask(ref, Call("history"))
        assert after[: len(before)] == before  # the same messages, by id: restored, not rebuilt
        assert len(after) == len(before) + 2
        assert len(set(after)) == len(after)  # nothing recorded twice

    # The host has stopped: its store holds each turn exactly once.
    async with BranchStore(ray_session / NAMESPACE / host / "branches.db") as store:
        stored = await store.load_messages(name)
    texts = [getattr(m, "text", None) or getattr(m, "instruction", None) for m in stored]
    assert [str(m.id) for m in stored] == [entry.split(":")[1] for entry in after]
    assert len(texts) == 4


async def test_a_dead_trio_loop_ends_its_host_process(ray_session: Path, name: str) -> None:
    """A host whose session failed ends its process, and Ray starts a fresh one."""
    host = f"fragile-{name}"
    async with Cluster(
        namespace=NAMESPACE,
        storage=ray_session,
        host_session={"max_restarts": 0},
        runtime_env={},
    ) as cluster:
        ref = await cluster.spawn(WORKER, name=name, host=host)
        pid = await pride.ask(ref, Call("pid"))
        # Escalate: the host's session (max_restarts=0) fails, its trio loop ends.
        with pytest.raises((pride.Escalate, HostLost)):
            await pride.ask(ref, Call("escalate"))
        # Asks racing the dying host find its branch closed (its session failed) or
        # are lost with the process; once the link has seen the process end, sends
        # wait for the restarted one. An external process's restart has no event to
        # wait on here: retry, boundedly.
        new_pid = None
        with trio.fail_after(30):
            while new_pid is None:
                try:
                    new_pid = await pride.ask(ref, Call("pid"))
                except pride.BranchClosed:  # HostLost is one
                    await trio.sleep(0.05)
        assert new_pid != pid


async def test_a_host_whose_trio_loop_has_ended_is_lost_not_malformed(
    ray_session: Path, name: str
) -> None:
    """Regression: a delivery reaching a host between its trio loop's end and the
    process's end failed the envelopes with InvalidMessage ("refused a batch").
    The caller must hear HostLost, and give up on the host after its timeout."""
    host = f"ended-{name}"
    async with Cluster(
        namespace=NAMESPACE, storage=ray_session, reconnect_timeout=1.0, runtime_env={}
    ) as cluster:
        ref = await cluster.spawn(WORKER, name=name, host=host)
        assert await pride.ask(ref, Chat("one")) == "echo: one"
        handle = await trio.to_thread.run_sync(_host_handle, host)
        await wait_ref(handle.shutdown.remote())  # the loop ends; the process lives on
        with pytest.raises(HostLost):
            await pride.ask(ref, Chat("two"))
        with trio.fail_after(10), pytest.raises(HostLost):
            await pride.ask(ref, Chat("three"))  # waits out reconnect_timeout, then gives up


async def test_a_replayed_envelope_is_refused_not_run_twice(cluster: Cluster, name: str) -> None:
    """The same envelope id delivered again, on any connection, is refused."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    await pride.ask(ref, Chat("warm"))
    handle = await trio.to_thread.run_sync(_host_handle, "shared")
    envelope = {
        "k": "send",
        "id": uuid.uuid4().hex,
        "b": name,
        "mode": "ask",
        "cmd": unstructure(ChatAndRecord("once")),
    }

    async def deliver(conn: str) -> list[dict[str, Any]]:
        batch = dumps({"conn": conn, "seq": 0, "items": [envelope]})
        return await _answers(handle, conn, await wait_ref(handle.deliver.remote(batch)), 1)

    first = await deliver(uuid.uuid4().hex)
    assert first[0]["k"] == "done" and first[0]["value"] == "echo: once"
    second = await deliver(uuid.uuid4().hex)
    assert second[0]["k"] == "refused"
    assert isinstance(decode_error(second[0]["error"]), EnvelopeReplayed)
    history = await pride.ask(ref, Call("history"))
    assert len(history) == 2  # one Instruction and one answer: the turn ran once


async def test_hostile_batches_are_refused_and_the_host_serves_on(
    cluster: Cluster, name: str
) -> None:
    """Bytes that are not a batch raise at the delivery; bad envelopes are refused typed."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    handle = await trio.to_thread.run_sync(_host_handle, "shared")
    for payload in (b"not json", b"[]", dumps({"conn": 1, "seq": 0, "items": []}), "text"):
        answer = loads(await wait_ref(handle.deliver.remote(payload)), "answer")
        assert isinstance(decode_error(answer["error"]), pride.InvalidMessage)
    conn = uuid.uuid4().hex
    bad = [
        {"k": "send", "id": "a", "b": name, "mode": "ask", "cmd": {"type": "Nope"}},
        {"k": "send", "id": "b", "b": name, "mode": "sideways", "cmd": unstructure(Chat("x"))},
        {"k": "send", "id": "c", "b": "nobody", "mode": "ask", "cmd": unstructure(Chat("x"))},
        {"k": "send", "id": "d", "b": name, "mode": "ask", "cmd": {"type": "Stop"}},
    ]
    delivered = await wait_ref(handle.deliver.remote(dumps({"conn": conn, "seq": 0, "items": bad})))
    answers = await _answers(handle, conn, delivered, len(bad))
    errors = {a["id"]: type(decode_error(a["error"])).__name__ for a in answers}
    assert errors == {
        "a": "InvalidMessage",
        "b": "InvalidMessage",
        "c": "UnknownBranch",
        "d": "InvalidMessage",
    }
    assert await pride.ask(ref, Chat("still here")) == "echo: still here"
