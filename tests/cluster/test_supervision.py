"""A local Session supervising branches on hosts, on a real local Ray cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

import pride
from pride import (
    Branch,
    BranchRestarted,
    BranchStarted,
    BranchStopped,
    Call,
    Chat,
    ChatAndRecord,
    Escalate,
    HostLost,
    RunEnd,
    RunStart,
    Session,
    SessionFailed,
    Signal,
    SupervisorFailed,
    TurnCancelled,
)
from pride.cluster import Cluster, RemoteChild
from pride.store import BranchStore
from tests.helpers import Gate, Recorder

from .conftest import NAMESPACE

WORKER = "tests.cluster.factories:worker"


def _kill(host: str) -> None:
    import ray

    handle = ray.get_actor(f"pride-host:{host}", namespace=NAMESPACE)
    ray.kill(handle, no_restart=False)  # Ray restarts it (max_restarts)


def _lifecycle(recorder: Recorder, branch: str) -> list[str]:
    names = []
    for signal in recorder.signals:
        if getattr(signal, "branch_name", None) != branch:
            continue
        if isinstance(signal, BranchStarted):
            names.append("restarted" if signal.restart else "started")
        elif isinstance(signal, BranchStopped):
            names.append(f"stopped:{signal.reason}")
        elif isinstance(signal, BranchRestarted):
            names.append("restart")
    return names


async def test_a_host_crash_is_a_crash_of_its_children(ray_session: Path, name: str) -> None:
    """one_for_all over a local and a remote child: the host is killed mid-turn.

    The remote caller hears HostLost within 1 s, the local sibling's turn is
    cancelled for the restart, both are restarted, and the remote conversation
    continues from the host's store with no turn duplicated.
    """
    host = f"supervised-{name}"
    gate = Gate()
    recorder = Recorder()
    blocking = trio.Event()
    back = trio.Event()

    def watch(signal: Signal) -> None:
        if getattr(signal, "branch_name", None) != name:
            return
        if isinstance(signal, RunStart) and signal.command == "Call":
            blocking.set()
        if isinstance(signal, BranchStarted) and signal.restart:
            back.set()

    async with Cluster(namespace=NAMESPACE, storage=ray_session, runtime_env={}) as cluster:
        async with Session(name="local", strategy="one_for_all") as session:
            session.observe(handler=recorder.dispatch)
            session.observe(handler=watch)
            local = await session.spawn(Branch(name="local", chat_model=gate.model))
            child = await cluster.supervise(session, WORKER, name=name, host=host)
            assert isinstance(child, RemoteChild) and child in session.services
            assert await pride.ask(child, ChatAndRecord("one")) == "echo: one"
            pid = await session.ask(child, Call("pid"))
            before = await pride.ask(child, Call("history"))
            outcomes: dict[str, tuple[float, Any]] = {}

            async def ask(key: str, target: Any, command: Any) -> None:
                try:
                    result: Any = await pride.ask(target, command)
                except Exception as exc:
                    result = exc
                outcomes[key] = (trio.current_time(), result)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, "local", local, Chat("hold"))
                nursery.start_soon(ask, "remote", child, Call("block"))
                await gate.started.wait()
                await blocking.wait()  # the remote turn runs on the host: its signals reach us
                killed_at = trio.current_time()
                await trio.to_thread.run_sync(_kill, host)
            lost_at, lost = outcomes["remote"]
            assert isinstance(lost, HostLost) and lost.host == host
            assert lost_at - killed_at < 1.0
            cancelled = outcomes["local"][1]
            assert isinstance(cancelled, TurnCancelled) and cancelled.reason == "restart"

            with trio.fail_after(30):
                await back.wait()  # Ray restarted the host; the session restarted the child
            assert await pride.ask(child, ChatAndRecord("two")) == "echo: two"
            assert await pride.ask(child, Call("pid")) != pid
            after = await pride.ask(child, Call("history"))
            assert after[: len(before)] == before  # restored from the store, by id
            assert len(after) == len(before) + 2 and len(set(after)) == len(after)
            gate.release("again")
            assert await session.ask(local, Chat("again")) == "reply to again"

        assert _lifecycle(recorder, name) == [
            "started",
            "stopped:crash",
            "restart",
            "restarted",
            "stopped:shutdown",
        ]
        assert _lifecycle(recorder, "local") == [
            "started",
            "stopped:shutdown",  # halted for its sibling's restart
            "restart",
            "restarted",
            "stopped:shutdown",
        ]
        crash = next(s for s in recorder.of(BranchStopped) if s.reason == "crash")
        assert crash.error is not None and crash.error.startswith("HostLost")
        ends = [s for s in recorder.of(RunEnd) if s.branch_name == name]
        assert len(ends) >= 4  # the remote child's turn signals reach the session

    # Each turn is in the host's store exactly once.
    async with BranchStore(ray_session / NAMESPACE / host / "branches.db") as store:
        stored = await store.load_messages(name)
    assert [str(m.id) for m in stored] == [entry.split(":")[1] for entry in after]


async def test_remote_crashes_count_toward_the_intensity(ray_session: Path, name: str) -> None:
    """An Escalate on the host is a crash of the child; past max_restarts the session fails."""
    host = f"escalating-{name}"
    recorder = Recorder()
    back = trio.Event()

    def watch(signal: Signal) -> None:
        if isinstance(signal, BranchStarted) and signal.restart and signal.branch_name == name:
            back.set()

    async with Cluster(namespace=NAMESPACE, storage=ray_session, runtime_env={}) as cluster:
        with pytest.raises(SupervisorFailed) as info:
            async with Session(name="strict", max_restarts=1, period=60.0) as session:
                session.observe(handler=recorder.dispatch)
                session.observe(BranchStarted, handler=watch)
                child = await cluster.supervise(session, WORKER, name=name, host=host)
                assert await pride.ask(child, ChatAndRecord("one")) == "echo: one"
                with pytest.raises(Escalate):
                    await pride.ask(child, Call("escalate"))
                with trio.fail_after(10):
                    await back.wait()
                # Restarted in place by its host: the conversation is there.
                assert await pride.ask(child, ChatAndRecord("two")) == "echo: two"
                with pytest.raises(Escalate):
                    await pride.ask(child, Call("escalate"))
                await trio.sleep_forever()  # cancelled when the session fails
    assert isinstance(info.value.__cause__, Escalate)
    assert len(recorder.of(SessionFailed)) == 1
    assert _lifecycle(recorder, name) == [
        "started",
        "stopped:crash",
        "restart",
        "restarted",
        "stopped:crash",
    ]


async def test_a_remote_child_that_cannot_start_is_not_a_member(
    cluster: Cluster, name: str
) -> None:
    """A failed placement raises and leaves nothing behind; remove ends only the supervision."""
    recorder = Recorder()
    async with Session(name="picky") as session:
        session.observe(handler=recorder.dispatch)
        with pytest.raises(TypeError, match="not a Branch"):
            await cluster.supervise(
                session, "tests.cluster.factories:not_a_branch", name=name, host="shared"
            )
        assert session.services == ()
        with pytest.raises(ValueError, match="restart"):
            await cluster.supervise(session, WORKER, name=name, host="shared", restart="always")
        child = await cluster.supervise(session, WORKER, name=name, host="shared")
        with pytest.raises(ValueError, match="already has a supervisor"):
            await cluster.supervise(session, WORKER, name=name, host="shared")
        assert await pride.ask(child, ChatAndRecord("one")) == "echo: one"
        await session.remove(child)
        assert session.services == ()
        # The branch is its host's: it serves on, its conversation intact.
        assert await pride.ask(child.ref, ChatAndRecord("two")) == "echo: two"
        assert len(await pride.ask(child.ref, Call("history"))) == 4
    assert _lifecycle(recorder, name) == ["started", "stopped:normal"]
