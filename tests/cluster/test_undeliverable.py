"""A delivery that cannot leave this process (its payload has no wire form, or Ray
refuses the call) fails the envelopes it carried with a typed pride error, is
logged, and the link serves on: later sends, and the other envelopes of a batch,
arrive as ever.

Made to happen for real: a command holding a lone surrogate (what a JSON
request line's ``"\\ud800"`` decodes to) has no UTF-8 form, so the delivery's
payload cannot be written out for Ray.
"""

from __future__ import annotations

import logging

import pytest
import trio

import pride
from pride import Chat, InvalidMessage
from pride.cluster import Cluster

ECHO = "tests.cluster.factories:echo"
BAD = "bad \ud800 text"


async def test_a_send_straight_from_the_caller_that_cannot_leave_fails_typed(
    cluster: Cluster, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, Chat("before")) == "echo: before"  # nothing in flight now
    with caplog.at_level(logging.ERROR, logger="pride.cluster"):
        with pytest.raises(InvalidMessage, match="UTF-8"):
            await pride.ask(ref, Chat(BAD))
    assert "could not be sent" in caplog.text
    assert await pride.ask(ref, Chat("after")) == "echo: after"
    nowait = pride.send_nowait(ref, Chat(BAD))
    with pytest.raises(InvalidMessage, match="UTF-8"):
        await nowait.result()
    assert await pride.ask(ref, Chat("again")) == "echo: again"


async def test_one_item_that_cannot_leave_fails_alone_in_its_batch(
    cluster: Cluster, name: str
) -> None:
    ref = await cluster.spawn(ECHO, name=name, host="shared")
    assert await pride.ask(ref, Chat("warm up")) == "echo: warm up"
    outcomes: dict[int, object] = {}

    async def ask(n: int) -> None:
        try:
            outcomes[n] = await pride.ask(ref, Chat(BAD if n == 7 else f"m{n}"))
        except InvalidMessage as exc:
            outcomes[n] = exc

    async with trio.open_nursery() as nursery:  # many in flight: they leave in batches
        for n in range(30):
            nursery.start_soon(ask, n)
    assert isinstance(outcomes.pop(7), InvalidMessage)
    assert outcomes == {n: f"echo: m{n}" for n in range(30) if n != 7}
    assert await pride.ask(ref, Chat("after")) == "echo: after"
