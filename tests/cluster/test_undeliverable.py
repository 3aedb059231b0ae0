"""Text with no UTF-8 form on the wire, and a delivery that cannot leave this process.

A lone surrogate (what a JSON ``"\\ud800"`` escape decodes to) has no UTF-8
form. A local branch accepts a command holding one and records it as U+FFFD;
a remote branch answers the same, since a `RemoteBranchRef` is a drop-in for a
Branch: the command's strings travel with U+FFFD in place of each lone
surrogate, and so do the host's answers.

A delivery that cannot leave this process fails the envelopes it carried with
a typed pride error, is logged, and the link serves on: later sends, and the
other envelopes of a batch, arrive as ever. Made to happen for real with a
branch *name* holding a lone surrogate: a name is not conversation text to
be repaired, and this one cannot be written out for Ray.
"""

from __future__ import annotations

import logging

import pytest
import trio

import pride
from pride import Call, Chat, ChatAndRecord, InvalidMessage
from pride.cluster import Cluster
from tests.cluster import factories

ECHO = "tests.cluster.factories:echo"
WORKER = "tests.cluster.factories:worker"
BAD = f"bad {chr(0xD800)} text"


async def test_a_command_with_a_lone_surrogate_is_answered_as_a_local_branch_answers(
    cluster: Cluster, name: str
) -> None:
    command = ChatAndRecord(BAD, context={f"k {chr(0xDFFF)}": BAD})
    async with factories.echo(name="local") as local:
        expected = await pride.ask(local, command)
        recorded = [message.text for message in local.messages]
    assert "\ufffd" in expected and expected.encode()  # replaced where it was recorded
    assert recorded[0].startswith("bad \ufffd text")
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, command) == expected
    assert await pride.send_nowait(ref, command).result() == expected


async def test_a_host_s_answer_with_a_lone_surrogate_arrives_with_u_fffd(
    cluster: Cluster, name: str
) -> None:
    async with factories.worker(name="local") as local:
        assert await pride.ask(local, Call("lone_surrogate")) == {
            "text": BAD,
            f"key {chr(0xDFFF)}": "value",
        }  # in this process, nothing needs to be written out
    ref = await cluster.spawn(WORKER, name=name, host="shared")
    assert await pride.ask(ref, Call("lone_surrogate")) == {
        "text": "bad \ufffd text",
        "key \ufffd": "value",
    }


async def test_a_send_straight_from_the_caller_that_cannot_leave_fails_typed(
    cluster: Cluster, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    unsendable = cluster.ref(BAD, host="shared")
    assert await pride.ask(ref, Chat("before")) == "echo: before"  # nothing in flight now
    with caplog.at_level(logging.ERROR, logger="pride.cluster"):
        with pytest.raises(InvalidMessage, match="UTF-8"):
            await pride.ask(unsendable, Chat("hi"))
    assert "could not be sent" in caplog.text
    assert await pride.ask(ref, Chat("after")) == "echo: after"
    nowait = pride.send_nowait(unsendable, Chat("hi"))
    with pytest.raises(InvalidMessage, match="UTF-8"):
        await nowait.result()
    assert await pride.ask(ref, Chat("again")) == "echo: again"


async def test_one_item_that_cannot_leave_fails_alone_in_its_batch(
    cluster: Cluster, name: str
) -> None:
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    unsendable = cluster.ref(BAD, host="shared")
    assert await pride.ask(ref, Chat("warm up")) == "echo: warm up"
    outcomes: dict[int, object] = {}

    async def ask(n: int) -> None:
        try:
            outcomes[n] = await pride.ask(unsendable if n == 7 else ref, Chat(f"m{n}"))
        except InvalidMessage as exc:
            outcomes[n] = exc

    async with trio.open_nursery() as nursery:  # many in flight: they leave in batches
        for n in range(30):
            nursery.start_soon(ask, n)
    assert isinstance(outcomes.pop(7), InvalidMessage)
    assert outcomes == {n: f"echo: m{n}" for n in range(30) if n != 7}
    assert await pride.ask(ref, Chat("after")) == "echo: after"
