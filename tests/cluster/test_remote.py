"""Remote branches behind the send API, on a real local Ray cluster."""

from __future__ import annotations

import pytest
import trio

import pride
from pride import (
    AssistantResponse,
    BranchClosed,
    Call,
    Chat,
    ChatAndRecord,
    Instruction,
    MailboxFull,
    MessageAdded,
    RemoteError,
    Run,
    RunEnd,
    RunFailed,
    RunStart,
    Signal,
    Stop,
    TurnCancelled,
    UnknownBranch,
)
from pride.cluster import Cluster, RemoteBranchRef

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"


async def test_ask_returns_the_remote_result(cluster: Cluster, name: str) -> None:
    """A branch built on a host by its factory answers an ask, keeping its types."""
    ref = await cluster.spawn(ECHO, name=name, host="shared", prefix="remote")
    assert isinstance(ref, RemoteBranchRef)
    assert ref.host == "shared" and ref.id is not None
    assert await pride.ask(ref, Chat("hello")) == "remote: hello"
    pair = await pride.ask(ref, Chat("pair", return_ins_res_message=True))
    assert isinstance(pair, tuple)
    assert isinstance(pair[0], Instruction) and isinstance(pair[1], AssistantResponse)
    assert pair[1].text == "remote: pair"


async def test_ref_by_name_resolves_through_the_hosts(cluster: Cluster, name: str) -> None:
    """cluster.ref(name) finds a branch placed by any process; an unknown name fails typed."""
    await cluster.spawn(ECHO, name=name, host="shared")
    async with Cluster(namespace=cluster.namespace, storage=cluster.storage) as other:
        ref = other.ref(name)
        assert ref.host is None  # not known here until the first send resolves it
        assert await pride.ask(ref, Chat("found")) == "echo: found"
        assert ref.host == "shared"
        with pytest.raises(UnknownBranch):
            await pride.ask(other.ref("nobody-has-this"), Chat("?"))


async def test_remote_errors_arrive_as_the_same_types(cluster: Cluster, name: str) -> None:
    """pride errors and builtins keep their class; other classes arrive as RemoteError."""
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    with pytest.raises(ValueError, match="bad value on the host"):
        await pride.ask(ref, Call("fail", kind="value"))
    with pytest.raises(BranchClosed) as closed:
        await pride.ask(ref, Call("fail", kind="closed"))
    assert closed.value.branch_name == "elsewhere"
    with pytest.raises(RemoteError) as other:
        await pride.ask(ref, Call("fail", kind="custom"))
    assert other.value.remote_type.endswith("_Custom")
    with pytest.raises(pride.UnknownOperation):
        await pride.ask(ref, Call("no-such-operation"))
    with pytest.raises(TypeError, match="work commands only"):
        await pride.send(ref, Stop())
    assert await pride.ask(ref, Chat("still serving")) == "echo: still serving"


async def test_send_returns_once_queued_with_the_turn_id(cluster: Cluster, name: str) -> None:
    """send returns a reply at once; its turn id arrives when the turn starts."""
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    reply = await pride.send(ref, Chat("later"))
    assert await reply.result() == "echo: later"
    assert reply.turn_id is not None
    with pytest.raises(RuntimeError):
        await reply.result()


async def test_stream_yields_items_in_order(cluster: Cluster, name: str) -> None:
    """A remote Run streams its Instruction, text chunks and answer, then ends."""
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    seen = []
    async with pride.stream(ref, Run("stream me")) as items:
        async for item in items:
            seen.append(item)
    assert isinstance(seen[0], Instruction)
    assert isinstance(seen[-1], AssistantResponse)
    chunks = [item for item in seen if isinstance(item, str)]
    assert "".join(chunks) == "echo: stream me"
    # Leaving early closes the stream and lets the turn finalise; the branch serves on.
    async with pride.stream(ref, Run("leave early")) as items:
        async for _ in items:
            break
    assert await pride.ask(ref, Chat("after")) == "echo: after"


async def test_send_nowait_on_a_full_remote_mailbox(cluster: Cluster, name: str) -> None:
    """send_nowait raises MailboxFull once this caller knows the mailbox is full."""
    ref = await cluster.spawn(WORKER, name=name, host="shared", mailbox_size=1)
    running = await pride.send(ref, Call("block"))
    queued = await pride.send(ref, Chat("queued"))
    with pytest.raises(MailboxFull):
        pride.send_nowait(ref, Chat("no room"))
    running.cancel()
    with pytest.raises(TurnCancelled):
        await running.result()
    assert await queued.result() == "echo: queued"
    reply = pride.send_nowait(ref, Chat("room again"))
    assert await reply.result() == "echo: room again"


async def test_caller_cancellation_reaches_the_remote_turn(cluster: Cluster, name: str) -> None:
    """Running: cancelled and finalised (RunFailed). Queued: dropped, never started."""
    signals: list[Signal] = []
    started = trio.Event()

    def seen(signal: Signal) -> None:
        signals.append(signal)
        if isinstance(signal, RunStart):
            started.set()

    cluster.observe(lambda s: s.branch_name == name, handler=seen)
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    with pytest.raises(trio.TooSlowError):
        await pride.ask(ref, Call("block"), timeout=0.5)
    started = trio.Event()
    blocker = await pride.send(ref, Call("block"))
    await started.wait()  # the blocker is running on the host
    queued = await pride.send(ref, Chat("never runs"))
    queued.cancel()
    with pytest.raises(TurnCancelled):
        await queued.result()
    assert queued.state == "dropped"
    blocker.cancel()
    with pytest.raises(TurnCancelled):
        await blocker.result()
    assert await pride.ask(ref, Chat("next")) == "echo: next"
    starts = [s for s in signals if isinstance(s, RunStart)]
    failed = [s for s in signals if isinstance(s, RunFailed)]
    assert [s.command for s in starts if s.command == "Chat"] == ["Chat"]  # not the dropped one
    # Every turn that started and was cancelled ended with a cancelled RunFailed.
    assert {s.turn_id for s in starts if s.command == "Call"} == {s.turn_id for s in failed}
    assert all(s.cancelled for s in failed)
    assert blocker.turn_id in {s.turn_id for s in failed}


async def test_order_of_1000_concurrent_sends_from_10_callers(cluster: Cluster, name: str) -> None:
    """Every caller's envelopes reach the mailbox in the order it sent them."""
    ref = await cluster.spawn(WORKER, name=name, host="shared", mailbox_size=2048)
    replies: list[pride.Reply] = []

    async def caller(index: int) -> None:
        for n in range(100):
            replies.append(pride.send_nowait(ref, Call("note", caller=index, n=n)))
            if n % 10 == 0:
                await trio.lowlevel.checkpoint()  # interleave the callers

    async with trio.open_nursery() as nursery:
        for index in range(10):
            nursery.start_soon(caller, index)
    for reply in replies:
        await reply.result()
    notes = await pride.ask(ref, Call("notes"))
    assert len(notes) == 1000
    for index in range(10):
        assert [n for c, n in notes if c == index] == list(range(100))


async def test_observer_sees_remote_signals_in_turn_order(cluster: Cluster, name: str) -> None:
    """RunStart, the turn's MessageAdded, then one RunEnd, all with the turn's id."""
    signals: list[Signal] = []
    turn_ended = trio.Event()

    def seen(signal: Signal) -> None:
        signals.append(signal)
        if isinstance(signal, RunEnd):
            turn_ended.set()

    cluster.observe(lambda s: s.branch_name == name, handler=seen)
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, ChatAndRecord("remember")) == "echo: remember"
    await turn_ended.wait()
    turn = [s for s in signals if getattr(s, "turn_id", None) is not None]
    assert isinstance(turn[0], RunStart) and isinstance(turn[-1], RunEnd)
    added = turn[1:-1]
    assert [type(s.message).__name__ for s in added] == ["Instruction", "AssistantResponse"]
    assert all(isinstance(s, MessageAdded) for s in added)
    assert len({s.turn_id for s in turn}) == 1


async def test_spawn_refuses_what_a_host_cannot_build(cluster: Cluster, name: str) -> None:
    """Unimportable factories, non-JSON arguments and non-branches fail with clear errors."""

    def local_factory(*, name: str) -> pride.Branch:
        return pride.Branch(name=name)

    with pytest.raises(TypeError, match="cannot be imported by the hosts"):
        await cluster.spawn(local_factory, name=name, host="shared")
    with pytest.raises(TypeError, match="JSON data"):
        await cluster.spawn(ECHO, name=name, host="shared", prefix=object())
    with pytest.raises(TypeError, match="not a Branch"):
        await cluster.spawn("tests.cluster.factories:not_a_branch", name=name, host="shared")
    with pytest.raises(ModuleNotFoundError):
        await cluster.spawn("no_such_module:factory", name=name, host="shared")
    # The same placement again is the same branch; another factory under its name is refused.
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    again = await cluster.spawn(ECHO, name=name, host="shared")
    assert again.id == ref.id
    with pytest.raises(ValueError, match="already serves"):
        await cluster.spawn(WORKER, name=name, host="shared")


async def test_the_senders_trace_context_crosses_to_the_host(cluster: Cluster, name: str) -> None:
    """The envelope carries the sender's traceparent to the host, where the turn runs."""
    from opentelemetry.sdk.trace import TracerProvider

    import pride.telemetry

    provider = TracerProvider()
    pride.telemetry.instrument(provider)
    try:
        ref = await cluster.spawn(WORKER, name=name, host="shared")
        with provider.get_tracer("test").start_as_current_span("request") as span:
            carried = await pride.ask(ref, Call("envelope_trace"))
        trace_id = format(span.get_span_context().trace_id, "032x")
        assert carried is not None and carried["traceparent"].split("-")[1] == trace_id
        assert await pride.ask(ref, Call("envelope_trace")) is None  # sent outside any span
    finally:
        pride.telemetry.uninstrument()
        provider.shutdown()


async def test_send_nowait_is_not_refused_for_good_by_a_stale_full_mailbox(
    cluster: Cluster, name: str
) -> None:
    """A caller whose last answer said "no room" (another caller's work waited then)
    and that has nothing left in flight to that branch hears no fresher room: its
    send_nowait goes to the host, which queues it once the mailbox has room again,
    instead of raising MailboxFull locally for ever."""
    started = trio.Event()
    cluster.observe(
        lambda s: s.branch_name == name and isinstance(s, RunStart),
        handler=lambda _: started.set(),
    )
    ref = await cluster.spawn(WORKER, name=name, host="shared", mailbox_size=1)
    barrier = await cluster.spawn(ECHO, name=f"{name}-barrier", host="shared")
    blocker = await pride.send(ref, Call("block"))
    await started.wait()  # running: the mailbox is empty
    async with Cluster(namespace=cluster.namespace, storage=cluster.storage) as other:
        theirs = other.ref(name)
        first = await pride.send(theirs, Call("block"))  # fills the mailbox
        second: list[pride.Reply] = []

        async def send_second() -> None:  # waits for room (the host's intake)
            second.append(await pride.send(theirs, Chat("second")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_second)
            await trio.testing.wait_all_tasks_blocked()
            # Their connection's batches are taken in order: once this is answered,
            # "second" waits on the host for room.
            assert await pride.ask(other.ref(barrier.name), Chat("barrier")) == "echo: barrier"
            # Its outcome is handed over while "first" runs and "second" fills the mailbox.
            blocker.cancel()
            with pytest.raises(TurnCancelled):
                await blocker.result()
        first.cancel()
        with pytest.raises(TurnCancelled):
            await first.result()
        assert await second[0].result() == "echo: second"
    # Nothing waits on the host now, and this caller has nothing in flight to it.
    reply = pride.send_nowait(ref, Chat("room again"))
    assert await reply.result() == "echo: room again"
