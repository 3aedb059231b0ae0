"""The cluster boundary, attacked from both sides: what a compromised or buggy host can
send a caller, what a caller can send a host, colliding names, factories that misbehave.

Each case ends with a typed error for the envelope concerned (or a logged drop), and
the other side still serving.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
import trio

import pride
from pride import Call, Chat, InvalidMessage, RemoteError, RunEnd, Signal
from pride.cluster import Cluster
from pride.cluster.caller.driver import wait_ref
from pride.cluster.wire.encoding import decode_error, dumps, loads
from pride.messages import unstructure

from .conftest import NAMESPACE, host_answers

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"


async def test_a_lying_host_fails_its_envelopes_typed_and_the_caller_serves_on(
    cluster: Cluster, liar: tuple[str, Any], name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage, unknown kinds, answers for envelopes never sent, stream items for an
    ask and an undecodable result: the ask fails with InvalidMessage, nothing else."""
    caplog.set_level(logging.WARNING, logger="pride.cluster")
    host, handle = liar
    ref = cluster.ref(name, host=host)
    honest = await cluster.spawn(ECHO, name=f"{name}-honest", host="shared")
    outcome: list[BaseException] = []

    async def ask() -> None:
        try:
            await pride.ask(ref, Chat("hi"))
        except Exception as exc:
            outcome.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        [sent] = [i for i in await wait_ref(handle.sent.remote(1)) if i["k"] == "send"]
        for payload in (
            b"not json",
            dumps({"not": "a list"}),
            dumps([1, "two", {"s": "x", "items": []}, {"s": 0, "items": "nope"}]),
            host_answers(
                (0, [5, {"k": "teleport", "id": sent["id"]}]),
                (1, [{"k": "done", "id": uuid.uuid4().hex, "value": "never asked"}]),
                (2, [{"k": "item", "id": sent["id"], "value": "an item for an ask"}]),
            ),
        ):
            await wait_ref(handle.answer.remote(payload))
        await wait_ref(handle.answer.remote(host_answers((0, [{"k": "ack"}]))))  # stale: dropped
    assert len(outcome) == 1 and isinstance(outcome[0], InvalidMessage), outcome
    assert "item" in str(outcome[0])
    logged = caplog.text
    assert "teleport" in logged and "never sent" in logged
    # The caller's process serves on, and so does the lying host's link.
    assert await pride.ask(honest, Chat("still")) == "echo: still"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        sends = [i for i in await wait_ref(handle.sent.remote(2)) if i["k"] == "send"]
        bad_value = {"$pride": {"type": "NoSuchType"}}
        done = {"k": "done", "id": sends[1]["id"], "value": bad_value}
        await wait_ref(handle.answer.remote(host_answers((3, [done]))))
    assert len(outcome) == 2 and isinstance(outcome[1], InvalidMessage)
    assert "NoSuchType" in str(outcome[1])


async def test_a_host_cannot_speak_for_branches_it_does_not_serve(
    cluster: Cluster, liar: tuple[str, Any], name: str
) -> None:
    """Signals and crash reports naming another host's branch are dropped: a lying host
    cannot forge a supervised child's crash, nor turns of branches it does not serve."""
    host, handle = liar
    honest_name = f"{name}-honest"
    seen: list[Signal] = []
    cluster.observe(RunEnd, handler=seen.append)
    async with pride.Session() as session:
        child = await cluster.supervise(session, ECHO, name=honest_name, host="shared")
        answer: list[Any] = []

        async def ask() -> None:
            answer.append(await pride.ask(cluster.ref(name, host=host), Chat("hi")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            [sent] = [i for i in await wait_ref(handle.sent.remote(1)) if i["k"] == "send"]
            forged = unstructure(RunEnd(turn_id=uuid.uuid4(), branch_name=honest_name))
            own = unstructure(RunEnd(turn_id=uuid.uuid4(), branch_name=name))
            items = [
                {"k": "signal", "signal": forged},
                {"k": "crashed", "b": honest_name, "error": "Escalate: forged"},
                {"k": "signal", "signal": own},
                {"k": "done", "id": sent["id"], "value": "lied"},
            ]
            await wait_ref(handle.answer.remote(host_answers((0, items))))
        # The items are applied in order: by the answer, the forgeries were seen and dropped.
        assert answer == ["lied"]
        assert [s.branch_name for s in seen] == [name]
        assert session.statistics().restarts == 0
        assert await pride.ask(child, Chat("fine")) == "echo: fine"


async def test_the_same_name_on_two_hosts_is_two_branches(
    cluster: Cluster, liar: tuple[str, Any], name: str
) -> None:
    host, handle = liar
    placed = await cluster.spawn(ECHO, name=name, host="shared")
    elsewhere = cluster.ref(name, host=host)
    assert placed != elsewhere and elsewhere.host == host
    assert cluster.ref(name) is placed  # by name alone: the branch this process placed
    assert await pride.ask(placed, Chat("a")) == "echo: a"
    reply = await pride.send(elsewhere, Chat("b"))  # queued there; the liar never answers
    [sent] = [i for i in await wait_ref(handle.sent.remote(1)) if i["k"] == "send"]
    assert sent["b"] == name
    reply.cancel()
    # Another factory under a name already placed on a host is refused there.
    with pytest.raises(ValueError, match="already serves a branch named"):
        await cluster.spawn("tests.cluster.factories:worker", name=name, host="shared")


@pytest.mark.parametrize(
    ("factory", "error", "match"),
    [
        ("tests.cluster.factories:raising", ValueError, "no branch"),
        ("tests.cluster.factories:not_a_branch", TypeError, "not a Branch"),
        ("tests.cluster.factories:misnamed", ValueError, "made a branch named"),
        ("tests.cluster.factories:exiting", RemoteError, "SystemExit"),
        ("tests.cluster.no_such_module:f", ModuleNotFoundError, "no_such_module"),
        ("tests.cluster.factories:NOPE", AttributeError, "NOPE"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_a_factory_that_fails_fails_the_spawn_and_the_host_serves_on(
    cluster: Cluster, name: str, factory: str, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await cluster.spawn(factory, name=name, host="shared")
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, Chat("after")) == "echo: after"


async def test_a_signal_json_cannot_carry_is_dropped_and_logged_not_the_answers(
    cluster: Cluster, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A watched branch emits a signal holding NaN: the host's hand-over to its
    # watchers must drop that one item (and say so), not fail the whole delivery,
    # which would lose the answers riding with it and stall the connection.
    seen: list[Signal] = []
    cluster.observe(lambda s: s.branch_name == name, handler=seen.append)
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    assert await pride.ask(ref, Call("emit_nan"), timeout=10) == "emitted"
    assert await pride.ask(ref, Chat("after"), timeout=10) == "echo: after"
    assert [s for s in seen if type(s).__name__ == "ToolProgress"] == []
    assert any(isinstance(s, RunEnd) for s in seen)


def test_an_awaited_item_that_cannot_be_sent_is_refused_in_its_place() -> None:
    from pride.cluster.host.returns import cut as _cut

    items = [
        {"k": "done", "id": "a", "value": float("inf")},
        {"k": "signal", "signal": {"progress": float("nan")}},
        {"k": "done", "id": "b", "value": 1},
        {"k": "done", "id": "c", "value": "x" * 2000},
        {"k": "item", "id": "d", "value": "y" * 300},
        {"k": "done", "id": "e", "value": "z" * 300},
    ]
    texts, rest = _cut("h", items, 1000)
    infinite, signal, done, too_large, item = (loads(text, "item") for text in texts)
    # A non-finite number goes as null, as a local branch records and answers it.
    assert infinite == {"k": "done", "id": "a", "value": None}
    assert signal == {"k": "signal", "signal": {"progress": None}}
    assert done == {"k": "done", "id": "b", "value": 1}
    assert too_large["k"] == "refused" and too_large["id"] == "c"
    assert isinstance(decode_error(too_large["error"]), InvalidMessage)
    assert "over the 1000-byte limit" in str(decode_error(too_large["error"]))
    assert item["id"] == "d"
    assert sum(len(text) + 1 for text in texts) <= 1000
    assert rest == items[5:]  # left for the next return, numbered then


async def test_hostile_items_from_a_caller_never_stop_the_host(cluster: Cluster, name: str) -> None:
    """Ids that are not strings, an envelope twice in one batch, a batch of too many
    items: refused or logged, and the host serves on."""
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    handle = await trio.to_thread.run_sync(_shared_handle)
    conn = uuid.uuid4().hex
    twice = {
        "k": "send",
        "id": uuid.uuid4().hex,
        "b": name,
        "mode": "ask",
        "cmd": unstructure(Chat("once")),
    }
    items = [
        {"k": "cancel", "id": [1]},
        {"k": "credit", "id": {"a": 1}, "n": "x"},
        {"k": "close", "id": None},
        {"k": "send", "id": ["x"], "b": name, "mode": "ask", "cmd": unstructure(Chat("x"))},
        {"k": 7},
        {**twice, "window": -5},
        twice,
    ]
    batch = dumps({"conn": conn, "seq": 0, "items": items})
    delivered = await wait_ref(handle.deliver.remote(batch))
    answers = await _final_answers(handle, conn, delivered, 2)
    by_kind = {a["k"]: a for a in answers}
    assert sorted(by_kind) == ["done", "refused"]  # the first ran, the second was refused
    assert by_kind["done"]["value"] == "echo: once"
    assert type(decode_error(by_kind["refused"]["error"])).__name__ == "EnvelopeReplayed"
    flood = dumps({"conn": conn, "seq": 1, "items": [{"k": "watch"}] * 20_000})
    refused = loads(await wait_ref(handle.deliver.remote(flood)), "answer")
    assert isinstance(decode_error(refused["error"]), InvalidMessage)
    assert await pride.ask(ref, Chat("still")) == "echo: still"


def _shared_handle() -> Any:
    import ray

    return ray.get_actor("pride-host:shared", namespace=NAMESPACE)


async def _final_answers(
    handle: Any, conn: str, delivered: Any, count: int
) -> list[dict[str, Any]]:
    batches = loads(delivered, "delivery")["out"] if delivered is not None else []
    items = [item for batch in batches for item in batch["items"]]
    while len([i for i in items if i["k"] in ("done", "refused")]) < count:
        polled = loads(await wait_ref(handle.poll.remote(conn)), "poll")
        items += [item for batch in polled for item in batch["items"]]
    return [item for item in items if item["k"] in ("done", "refused")]
