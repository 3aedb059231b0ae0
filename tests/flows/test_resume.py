"""Issue 21, point 5 in one process: a flow's plan and outcomes journaled in the
session's store, and ``resume_flow`` continuing a run that was cut short.

A run is cut short here by cancelling its caller (the process-crash version,
``kill -9`` mid-turn, is `tests.flows.test_crash`): the nodes that finished
keep their outcome, and the resumed run does not run them again.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from pride import (
    Branch,
    Call,
    Chat,
    Flow,
    InvalidFlow,
    NodeSignal,
    NodeStarted,
    RunEnd,
    RunFailed,
    Session,
    StoreError,
    UnknownFlow,
)
from tests.helpers import echo_model

Counts = dict[str, int]


def _session(
    path: Path,
    counts: Counts,
    *,
    hold: trio.Event | None = None,
    holding: trio.Event | None = None,
) -> Session:
    session = Session(store=path)

    async def step(branch: Branch, label: str = "") -> str:
        counts[label] = counts.get(label, 0) + 1
        if label == "slow" and hold is not None:
            if holding is not None:
                holding.set()
            await hold.wait()
        return f"{label} by {branch.name}"

    session.register_operation("step", step)
    return session


async def _cancel_once_held(run: Callable[[], Awaitable[object]], holding: trio.Event) -> None:
    """Run ``run()`` (a flow) until its slow step is held, then cancel it: cut short."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await holding.wait()
        nursery.cancel_scope.cancel()


async def _spawn(session: Session) -> None:
    for name in ("alpha", "beta"):
        await session.spawn(Branch(name=name, chat_model=echo_model()))


def _flow() -> Flow:
    flow = Flow("resumable")
    first = flow.add("alpha", Call("step", label="first"), name="first")
    flow.add("beta", Call("step", label="slow"), depends_on=first, name="slow")
    flow.add(
        "alpha",
        lambda up: Call("step", label=f"last after {up['slow']}"),
        depends_on="slow",
        name="last",
    )
    return flow


async def _cut_short(path: Path, counts: Counts) -> str:
    """Run the flow until ``slow`` runs, then cancel it; return the flow id."""
    hold = trio.Event()
    started = trio.Event()
    async with _session(path, counts, hold=hold) as session:
        await _spawn(session)
        session.observe(NodeStarted, lambda s: s.node == "slow", handler=lambda s: started.set())
        with trio.move_on_after(5) as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.flow, _flow())
                await started.wait()
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        [unfinished] = await session.unfinished_flows()
        return str(unfinished.flow_id)


async def test_a_cut_short_flow_resumes_without_rerunning_finished_nodes(tmp_path: Path) -> None:
    counts: Counts = {}
    flow_id = await _cut_short(tmp_path / "store.db", counts)
    assert counts == {"first": 1, "slow": 1}

    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        [unfinished] = await session.unfinished_flows()
        assert str(unfinished.flow_id) == flow_id and unfinished.name == "resumable"
        assert unfinished.outcomes == {"first": "completed"}
        result = await session.resume_flow(flow_id, _flow())
        assert result.ok and str(result.flow_id) == flow_id
        assert result["first"] == "first by alpha"  # from the journal
        assert result["last"] == "last after slow by beta by alpha"
        assert await session.unfinished_flows() == []
    assert counts == {"first": 1, "slow": 2, "last after slow by beta": 1}


async def test_a_late_bound_flow_needs_its_rebuilt_plan(tmp_path: Path) -> None:
    counts: Counts = {}
    flow_id = await _cut_short(tmp_path / "store.db", counts)
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        with pytest.raises(InvalidFlow, match="rebuild the same Flow") as caught:
            await session.resume_flow(flow_id)
        assert caught.value.node == "last"

        changed = _flow()
        changed.add("beta", Chat("extra"), name="extra")
        with pytest.raises(InvalidFlow, match="not in the journaled plan"):
            await session.resume_flow(flow_id, changed)

        other = Flow("resumable")
        other.add("alpha", Call("step", label="FIRST"), name="first")
        other.add("beta", Call("step", label="slow"), depends_on="first", name="slow")
        other.add("alpha", lambda up: Chat("x"), depends_on="slow", name="last")
        with pytest.raises(InvalidFlow, match="differs from the journaled plan") as caught:
            await session.resume_flow(flow_id, other)
        assert caught.value.node == "first"

        assert (await session.resume_flow(flow_id, _flow())).ok  # still resumable
    assert counts["first"] == 1


async def test_a_static_flow_resumes_from_the_journal_alone(tmp_path: Path) -> None:
    counts: Counts = {}
    hold = trio.Event()
    flow = Flow("static")
    flow.add("alpha", Call("step", label="a"), name="a")
    flow.add("beta", Call("step", label="slow"), depends_on="a", name="slow")
    holding = trio.Event()
    async with _session(tmp_path / "store.db", counts, hold=hold, holding=holding) as session:
        await _spawn(session)
        await _cancel_once_held(functools.partial(session.flow, flow), holding)
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        [unfinished] = await session.unfinished_flows()
        result = await session.resume_flow(unfinished.flow_id)
        assert result.outcomes == {"a": "completed", "slow": "completed"}
    assert counts == {"a": 1, "slow": 2}


async def test_a_finished_flow_leaves_nothing_to_resume(tmp_path: Path) -> None:
    counts: Counts = {}
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        result = await session.flow(_flow())
        assert result.ok
        assert await session.unfinished_flows() == []
        with pytest.raises(UnknownFlow):
            await session.resume_flow(result.flow_id, _flow())
        with pytest.raises(UnknownFlow):
            await session.resume_flow("not a flow id")


async def test_an_abandoned_flow_is_forgotten(tmp_path: Path) -> None:
    counts: Counts = {}
    flow_id = await _cut_short(tmp_path / "store.db", counts)
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        await session.abandon_flow(flow_id)
        assert await session.unfinished_flows() == []
        with pytest.raises(UnknownFlow):
            await session.resume_flow(flow_id, _flow())
        with pytest.raises(UnknownFlow):
            await session.abandon_flow(flow_id)
    assert counts == {"first": 1, "slow": 1}


async def test_resume_flow_needs_a_store() -> None:
    async with Session() as session:
        with pytest.raises(RuntimeError, match="no store"):
            await session.resume_flow("00000000-0000-0000-0000-000000000000")
        assert await session.unfinished_flows() == []


async def test_a_damaged_journal_is_refused_and_the_session_goes_on(tmp_path: Path) -> None:
    counts: Counts = {}
    flow_id = await _cut_short(tmp_path / "store.db", counts)
    db = sqlite3.connect(tmp_path / "store.db")
    db.execute('UPDATE flow_events SET data=\'{"kind": "ended", "node": 3}\'')
    db.commit()
    db.close()
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        assert await session.unfinished_flows() == []  # unreadable: logged, left out
        with pytest.raises(StoreError, match="does not read back"):
            await session.resume_flow(flow_id, _flow())
        assert (await session.flow(_flow())).ok


async def test_an_event_numbered_out_of_range_is_refused_and_the_store_serves_on(
    tmp_path: Path,
) -> None:
    """A resumed run numbers its next event from the largest journaled one plus one.
    Edited to SQLite's largest integer, that number could not be written, and since
    one commit carries every branch's rows, every commit of the store failed for
    every branch (an ordinary turn of a branch outside the flow included). An event
    numbered outside 0 to 2**53 does not read back: resuming is a StoreError naming
    it, and the store serves on."""
    counts: Counts = {}
    flow_id = await _cut_short(tmp_path / "store.db", counts)
    db = sqlite3.connect(tmp_path / "store.db")
    seq = 2**63 - 1
    db.execute("UPDATE flow_events SET seq=?", (seq,))
    db.commit()
    db.close()
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        with pytest.raises(StoreError, match=rf"event {seq}: .*number"):
            await session.resume_flow(flow_id, _flow())
        assert await session.get_branch("alpha").chat_and_record("still") == "re: still"


async def test_a_node_s_outcome_is_committed_with_its_turn(tmp_path: Path) -> None:
    """At each node's RunEnd (after its turn's commit, before the flow hears of it) the
    node's outcome is already in the store file: one commit for both, so no crash can
    fall between them. A Chat records no message and a failure is an outcome too."""
    path = tmp_path / "store.db"
    counts: Counts = {}
    seen: dict[str, list[tuple[str, str]]] = {}

    def on_terminal(signal: RunEnd | RunFailed) -> None:
        # what a process started now would read (closed: the with block alone only commits)
        with contextlib.closing(sqlite3.connect(path)) as db:
            rows = db.execute("SELECT data FROM flow_events ORDER BY seq").fetchall()
        events = [json.loads(data) for (data,) in rows]
        seen[signal.branch_name] = [(e["node"], e["outcome"]) for e in events]

    async def fail(branch: Branch) -> str:
        raise ValueError("no luck")

    flow = Flow("one commit")
    first = flow.add("alpha", Call("step", label="first"), name="first")
    chat = flow.add("beta", Chat("hello"), depends_on=first, name="chat")
    flow.add("gamma", Call("fail"), depends_on=chat, name="broken")
    async with _session(path, counts) as session:
        session.register_operation("fail", fail)
        await _spawn(session)
        await session.spawn(Branch(name="gamma", chat_model=echo_model()))
        session.observe(RunEnd, RunFailed, handler=on_terminal)
        result = await session.flow(flow)
    assert result.outcomes == {"first": "completed", "chat": "completed", "broken": "failed"}
    assert seen == {
        "alpha": [("first", "completed")],
        "beta": [("first", "completed"), ("chat", "completed")],
        "gamma": [("first", "completed"), ("chat", "completed"), ("broken", "failed")],
    }


async def test_a_flow_cancelled_while_a_node_s_outcome_commits_still_signals_it(
    tmp_path: Path,
) -> None:
    """The caller is cancelled while a node's outcome waits for its commit (a node with
    no turn to carry it: its command function failed; the commit held up by a lock
    another connection holds): the node still gets its one terminal, NodeFailed, and
    its outcome is journaled; what depended on it is skipped."""
    path = tmp_path / "store.db"
    async with Session(store=path) as session:
        await session.spawn(Branch(name="alpha", chat_model=echo_model()))
        recorded: list[NodeSignal] = []
        session.observe(NodeSignal, handler=recorded.append)
        holder = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)

        locked = trio.Event()

        def failing(upstream: object) -> Chat:
            holder.execute("BEGIN IMMEDIATE")  # the next commit waits for this lock
            locked.set()
            raise ValueError("no command")

        flow = Flow("held")
        flow.add("alpha", failing, name="bad")
        flow.add("alpha", Chat("after"), depends_on="bad", name="after")
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                await session.flow(flow)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run)
                await locked.wait()
                await trio.testing.wait_all_tasks_blocked()  # the commit waits for the lock
                scope.cancel()
                await trio.testing.wait_all_tasks_blocked()
                holder.execute("COMMIT")
        finally:
            holder.close()
        assert scope.cancelled_caught
        [unfinished] = await session.unfinished_flows()
    assert [(type(s).__name__, s.node) for s in recorded] == [
        ("NodeFailed", "bad"),
        ("NodeSkipped", "after"),
    ]
    assert unfinished.outcomes == {"bad": "failed"}


async def test_a_flow_still_running_is_not_listed_or_resumed_beside_itself(
    tmp_path: Path,
) -> None:
    """While a durable run is running, unfinished_flows does not list it and
    resume_flow (and abandon_flow) refuse it with RuntimeError: a second run of it
    would send every node still to run again, each node's work done twice. Once it
    was cut short, it is listed and resumes."""
    counts: Counts = {}
    hold = trio.Event()
    async with _session(tmp_path / "store.db", counts, hold=hold) as session:
        await _spawn(session)
        started = trio.Event()
        session.observe(NodeStarted, lambda s: s.node == "slow", handler=lambda s: started.set())
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.flow, _flow())
            await started.wait()
            assert await session.unfinished_flows() == []
            [stored] = await session.store.unfinished_flows()  # type: ignore[union-attr]
            with pytest.raises(RuntimeError, match="is running"):
                await session.resume_flow(stored.flow_id, _flow())
            with pytest.raises(RuntimeError, match="is running"):
                await session.abandon_flow(stored.flow_id)
            nursery.cancel_scope.cancel()
        [unfinished] = await session.unfinished_flows()
        hold.set()
        result = await session.resume_flow(unfinished.flow_id, _flow())
    assert result.ok
    assert counts == {"first": 1, "slow": 2, "last after slow by beta": 1}


async def test_a_node_added_before_the_run_starts_is_journaled_once(tmp_path: Path) -> None:
    """A node a flow_stream consumer adds before the first event, to a durable run, is
    journaled once, after the plan (as any added node): it was written into the plan
    and as an added node too, and the run cut short could not be resumed (StoreError:
    the journal adds it twice)."""
    counts: Counts = {}
    hold = trio.Event()
    flow = Flow("grown early")
    flow.add("alpha", Call("step", label="first"), name="first")
    holding = trio.Event()
    async with _session(tmp_path / "store.db", counts, hold=hold, holding=holding) as session:
        await _spawn(session)

        async def grown() -> None:
            async with session.flow_stream(flow) as events:
                events.run.add("beta", Call("step", label="slow"), depends_on="first", name="slow")
                async for _ in events:
                    pass

        await _cancel_once_held(grown, holding)
    async with _session(tmp_path / "store.db", counts) as session:
        await _spawn(session)
        [unfinished] = await session.unfinished_flows()
        assert unfinished.nodes == ("first", "slow")
        result = await session.resume_flow(unfinished.flow_id, flow)
    assert result.outcomes == {"first": "completed", "slow": "completed"}
    assert counts == {"first": 1, "slow": 2}  # slow was cut short, and sent again
